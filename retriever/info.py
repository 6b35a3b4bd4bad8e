"""What an index holds (``ckqti info``): counts, model, analyzer, channels and bytes on disk,
read from its manifest and file sizes without opening a shard; optionally every checksum."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path

from ckqti.errors import IndexFormatError
from ckqti.files import alive
from indexer.format import (
    DOCS_FILE,
    MANIFEST,
    SHARD_FILES,
    WORK_PREFIXES,
    Manifest,
    read_consistently,
    strays,
    unfinished_build,
    verify_files,
)
from indexer.locks import running_build


@dataclass(frozen=True)
class IndexInfo:
    """An index's summary.

    Attributes:
        bytes: on disk, ``postings`` (postings, segments and term directory of every shard),
            ``documents`` (the document stores), ``vocabulary``, ``leftovers`` and ``total`` (with
            the manifest).
        shards: ``name``, ``docs``, ``postings`` of each shard.
        clipped_impacts: impacts stored as 255 though above 255 steps, at build (forced steps) and
            by appends; ``appended_clipped_impacts`` of them by appends.
        appends, compactions: how many changed the index since its build (``generation``, both together).
        unfinished: a build's folder beside the index (``.partial``): one interrupted, or running now
            (``building``), else None.
        building: the process id of a build of this index running now (in ``unfinished``), else None.
        leftovers: names of what an interrupted append or compaction left inside the index
            (:func:`indexer.format.strays`: the next append or compaction removes them).
        writing: the process id of an append or compaction writing the index now (its work
            directory is among ``leftovers`` and its process is alive), else None.
        orcas, orcas_documents: the build's ORCAS file and the documents its clicks joined (None: none,
            or a build older than the count).
        appended_orcas: ``append`` (its number, from 1), ``orcas`` and ``documents`` of each append
            given an ORCAS file (``ckqti index --append --orcas``).
        clicked_documents: documents with clicks, the build's and appends' together (appends add new
            documents only); None where no ORCAS file was given or a count is missing (older manifests).
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
    appended_orcas: list[dict]
    clicked_documents: int | None
    build_seconds: float | None
    generation: int
    appends: int
    compactions: int
    clipped_impacts: int
    appended_clipped_impacts: int
    unfinished: str | None
    building: int | None
    leftovers: list[str]
    writing: int | None
    verified: bool

    def to_dict(self) -> dict:
        return asdict(self)

    def appended_orcas_files(self) -> dict[str, tuple[list[int], int | None]]:
        """Each ORCAS file appends joined (:attr:`appended_orcas`), in the order first given: the numbers of
        the appends that gave it, and the documents its clicks reached over them (None where a count is missing)."""
        files: dict[str, tuple[list[int], int | None]] = {}
        for a in self.appended_orcas:
            numbers, documents = files.get(a["orcas"], ([], 0))
            files[a["orcas"]] = (numbers + [a["append"]],
                                 None if documents is None or a["documents"] is None else documents + a["documents"])
        return files


def file_bytes(path: Path) -> int:
    """Size of an index file the manifest names; a missing one is an error even without ``verify``
    (a summary of what is not there would understate the index silently)."""
    if not path.is_file():
        raise IndexFormatError("index file missing", path)
    return path.stat().st_size


def tree_bytes(path: Path) -> int:
    """Bytes of a file, or of the files under a directory; what vanishes meanwhile (a live writer's
    files and folders: ``os.walk`` passes over a folder it cannot list) counts 0."""
    paths = [path] if path.is_file() else [Path(root, f) for root, _, files in os.walk(path) for f in files]
    total = 0
    for p in paths:
        try:
            total += p.stat().st_size
        except FileNotFoundError:
            continue
    return total


def live_writer(leftovers: list[Path]) -> int | None:
    """The process id of a running append or compaction whose work directory is among ``leftovers``."""
    for p in leftovers:
        pid = p.name.rpartition("-")[2]
        if p.name.startswith(WORK_PREFIXES) and pid.isdigit() and alive(int(pid)):
            return int(pid)
    return None


def appended_orcas(appends: list[dict]) -> list[dict]:
    """The ORCAS file and clicked documents of each append given one, numbered from 1."""
    records = ((n, a.get("corpus") or {}) for n, a in enumerate(appends, 1))
    return [{"append": n, "orcas": c["orcas"], "documents": c.get("orcas_documents")} for n, c in records if c.get("orcas")]


def clicked_documents(corpus: dict, appended: list[dict]) -> int | None:
    """Documents with ORCAS clicks, the build's and the appends' (each adds new docids only);
    None without an ORCAS file or where a count is missing."""
    counts = ([corpus.get("orcas_documents")] if corpus.get("orcas") else []) + [a["documents"] for a in appended]
    return sum(counts) if counts and None not in counts else None


def index_info(path: str | Path, verify: bool = False) -> IndexInfo:
    """Summary of the index at ``path``; ``verify`` hashes every file and checks its sha256, even
    where search would trust a verification stamp (:mod:`indexer.stamps`); an
    :class:`~ckqti.errors.IndexFormatError` names the first missing or corrupted file."""
    path = Path(path)
    partial = path.with_name(path.name + ".partial")
    if not path.exists() and partial.is_dir():
        raise IndexFormatError(f"no index here yet: {unfinished_build(partial, partial.name + '/')}", path)
    # a writer committing meanwhile (a rebuild in place, a compaction removing the old shards) did not
    # make a sound index look corrupted or incomplete: the summary is read again
    return read_consistently(path, lambda: summary(path, partial, verify))


def summary(path: Path, partial: Path, verify: bool) -> IndexInfo:
    """:func:`index_info` read once (the manifest, then the files it names)."""
    m = Manifest.read(path)
    if verify:
        verify_files(path, m, stamps=False)
    sizes = {f: sum(file_bytes(path / s.name / f) for s in m.shards) for f in SHARD_FILES}
    documents = sizes[DOCS_FILE]
    postings = sum(sizes.values()) - documents
    vocabulary = file_bytes(path / m.vocab_file)
    left = strays(path, m)
    leftovers = sum(tree_bytes(p) for p in left)
    total = postings + documents + vocabulary + leftovers + file_bytes(path / MANIFEST)
    appended = appended_orcas(m.appends)
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
        bytes={"postings": postings, "documents": documents, "vocabulary": vocabulary, "leftovers": leftovers,
               "total": total},
        corpus=m.corpus.get("path"),
        orcas=m.corpus.get("orcas"),
        orcas_documents=m.corpus.get("orcas_documents"),
        appended_orcas=appended,
        clicked_documents=clicked_documents(m.corpus, appended),
        build_seconds=m.build.get("seconds"),
        generation=m.generation,
        appends=len(m.appends),
        compactions=max(m.generation - len(m.appends), 0),  # each append and each compaction is a generation
        clipped_impacts=m.clipped_impacts,
        appended_clipped_impacts=sum(a.get("clipped_impacts", 0) for a in m.appends),
        unfinished=str(partial) if partial.is_dir() else None,
        building=running_build(path) if partial.is_dir() else None,
        leftovers=[p.name for p in left],
        writing=live_writer(left),
        verified=verify,
    )
