"""What an index holds (``ckqti info``): counts, model, analyzer, channels and bytes on disk,
read from its manifest and file sizes without opening a shard; optionally every checksum."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

from ckqti.errors import IndexFormatError
from indexer.format import DOCS_FILE, MANIFEST, SHARD_FILES, Manifest, verify_files


@dataclass(frozen=True)
class IndexInfo:
    """An index's summary.

    Attributes:
        bytes: on disk, ``postings`` (postings, segments and term directory of every shard),
            ``documents`` (the document stores), ``vocabulary`` and ``total`` (with the manifest).
        shards: ``name``, ``docs``, ``postings`` of each shard.
        unfinished: a build, append or compaction left unfinished beside the index (its
            ``.partial`` directory), else None.
        verified: whether every file's checksum was checked (and matched).
    """

    path: str
    format_version: int
    model: dict
    analyzer: dict
    num_docs: int
    num_postings: int
    vocab_size: int
    channels: list[str]
    quantization: dict
    shards: list[dict]
    bytes: dict
    corpus: str | None
    orcas: str | None
    orcas_documents: int | None
    build_seconds: float | None
    generation: int
    appends: int
    clipped_impacts: int
    unfinished: str | None
    verified: bool

    def to_dict(self) -> dict:
        return asdict(self)


def file_bytes(path: Path) -> int:
    """Size of an index file the manifest names; a missing one is an error even without ``verify``
    (a summary of what is not there would understate the index silently)."""
    if not path.is_file():
        raise IndexFormatError("index file missing", path)
    return path.stat().st_size


def index_info(path: str | Path, verify: bool = False) -> IndexInfo:
    """Summary of the index at ``path``; ``verify`` hashes every file and checks its sha256, even
    where search would trust a verification stamp (:mod:`indexer.stamps`); an
    :class:`~ckqti.errors.IndexFormatError` names the first missing or corrupted file."""
    path = Path(path)
    partial = path.with_name(path.name + ".partial")
    if not path.exists() and partial.is_dir():
        raise IndexFormatError(f"no index here yet: an unfinished build is in {partial.name}/ (the same ckqti index "
                               "command resumes it)", path)
    m = Manifest.read(path)
    if verify:
        verify_files(path, m, stamps=False)
    sizes = {f: sum(file_bytes(path / s.name / f) for s in m.shards) for f in SHARD_FILES}
    documents = sizes[DOCS_FILE]
    postings = sum(sizes.values()) - documents
    vocabulary = file_bytes(path / m.vocab_file)
    total = postings + documents + vocabulary + file_bytes(path / MANIFEST)
    return IndexInfo(
        path=str(path),
        format_version=m.format_version,
        model={k: m.model.get(k) for k in ("id", "name", "variant") if m.model.get(k) is not None},
        analyzer=dict(m.analyzer),
        num_docs=m.num_docs,
        num_postings=m.num_postings,
        vocab_size=m.vocab_size,
        channels=[c["weight"] for c in m.channels],
        quantization=dict(m.quantization),
        shards=[{"name": s.name, "docs": s.num_docs, "postings": s.num_postings} for s in m.shards],
        bytes={"postings": postings, "documents": documents, "vocabulary": vocabulary, "total": total},
        corpus=m.corpus.get("path"),
        orcas=m.corpus.get("orcas"),
        orcas_documents=m.corpus.get("orcas_documents"),
        build_seconds=m.build.get("seconds"),
        generation=m.generation,
        appends=len(m.appends),
        clipped_impacts=m.clipped_impacts,
        unfinished=str(partial) if partial.is_dir() else None,
        verified=verify,
    )
