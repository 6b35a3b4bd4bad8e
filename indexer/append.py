"""Appending documents to an index as new shards, without rescoring the old ones.

The new documents are analyzed with the index's analyzer; new terms get the next term ids
(old ids never change, and posting list ids interleave channels, so no old list moves);
df, cf and the document count grow. The model must be the one the index was built with,
with the build's index constants (NDRM2's prior mean document length), and scores new
documents into new shards quantized with the index's steps: scores above ``255 * step``
are clipped to 255 and counted in the manifest. Latent offsets: old terms keep theirs, new
terms get offsets fitted on the new documents. Idf is not stored (``"idf"`` channels take it
at query time from the current df and document count), so every old impact stays correct.

Writing is safe: new shard directories and the new vocabulary file (``vocab-NNNNN.arrow``)
are prepared in ``INDEX/.append-PID/`` (where the new documents are analyzed too, as a build
analyzes them: on disk, read back memory-mapped, so their text and terms need not fit in
memory), moved into the index under names the current manifest does not use, and the
manifest is replaced last by an atomic rename. An append interrupted before that rename
leaves the old index valid (the stray files are removed by the next append or compaction).
One writer at a time: ``INDEX/.writer.lock`` (:mod:`indexer.locks`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ckqti.errors import IndexFormatError, InputError
from ckqti.progress import progress_bar
from ckqti.terminal import counted
from ckqti.text import Analyzer
from ckqti.vocab import Vocabulary
from indexer.analyze import TOKENS_FILE, AnalyzedCorpus, DocumentColumns, analyze_corpus
from indexer.build import corpus_record, quantize_raw, score_shard, shard_ranges, write_vocab
from indexer.format import (
    DOCS_FILE,
    MANIFEST,
    SHARD_RE,
    Manifest,
    ShardInfo,
    file_checksum,
    shard_name,
    strays,
    verify_files,
    vocab_file_name,
)
from indexer.impacts import ImpactConfig, ImpactScorer
from indexer.locks import exclusive
from indexer.paths import check_input_files, corpus_file, read_only_index
from indexer.quantize import Quantizer
from indexer.readers import Document, load_orcas, no_clicks_error
from indexer.shards import write_shard

LOCK = ".writer.lock"


# --- writing next to a live index -------------------------------------------------------


def writer_lock(index: Path, wait: bool = False):
    """Hold ``INDEX/.writer.lock`` (:func:`indexer.locks.exclusive`) while an append, a compaction or
    a rebuild's install writes the index; another writer is refused (or, with ``wait``, waited for)."""
    return exclusive(index / LOCK, "another append, compaction or build is writing this index", index, wait)


@contextlib.contextmanager
def writing(index: Path) -> Iterator[None]:
    """:func:`writer_lock` for an append or a compaction; an index where its lock file cannot be made
    (read-only) is a :class:`~ckqti.errors.CkqtiError` naming the index (:func:`indexer.paths.read_only_index`)."""
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(writer_lock(index))
        except OSError as e:
            if e.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
                raise
            raise read_only_index(index) from None
        yield


def remove_strays(index: Path, manifest: Manifest) -> None:
    """Delete what an interrupted append or compaction left (:func:`indexer.format.strays`)."""
    for p in strays(index, manifest):
        if p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)


def next_shard_number(index: Path, manifest: Manifest) -> int:
    """A shard number above every shard the manifest names or the directory holds."""
    names = [s.name for s in manifest.shards] + [p.name for p in index.iterdir()]
    numbers = [int(m.group(1)) for m in map(SHARD_RE.match, names) if m]
    return max(numbers, default=-1) + 1


def commit_manifest(work: Path, index: Path) -> None:
    """The commit point: the new manifest replaces the old one in one atomic rename."""
    os.replace(work / MANIFEST, index / MANIFEST)


def publish(index: Path, work: Path, new_files: list[str], old: Manifest, new: Manifest) -> None:
    """Move ``new_files`` (shard directories, vocabulary) from ``work`` into ``index``, commit
    ``new`` (already written to ``work``), then delete what only ``old`` named."""
    for name in new_files:
        os.replace(work / name, index / name)
    commit_manifest(work, index)
    named = {s.name for s in new.shards} | {new.vocab_file}
    for s in old.shards:
        if s.name not in named:
            shutil.rmtree(index / s.name, ignore_errors=True)
    if old.vocab_file not in named:
        (index / old.vocab_file).unlink(missing_ok=True)


# --- the index as it is -----------------------------------------------------------------


def read_vocabulary(index: Path, manifest: Manifest) -> tuple[Vocabulary, np.ndarray]:
    """The index's vocabulary with its collection statistics, and the per-term offsets (its file
    verified already: :func:`append_index` checks every file first)."""
    table = pa.ipc.open_file(pa.memory_map(str(index / manifest.vocab_file), "r")).read_all()
    stats = manifest.collection
    vocab = Vocabulary(
        table.column("term").to_pylist(),
        table.column("df").to_numpy().astype(np.int64),
        table.column("cf").to_numpy().astype(np.int64),
        int(stats.get("num_docs", manifest.num_docs)),
        int(stats.get("total_terms", 0)),
    )
    return vocab, table.column("offset").to_numpy().astype(np.float32)


def merge_vocabulary(base: Vocabulary, new: Vocabulary) -> tuple[Vocabulary, np.ndarray]:
    """``base`` grown by ``new``'s terms (new ones get the next ids, in ``new``'s order) and
    statistics; returns it and ``new``'s id -> merged id map."""
    terms = list(base.terms)
    remap = np.arange(len(new), dtype=np.int64)  # ids 0, 1 are shared
    for i in range(2, len(new)):
        t = new.terms[i]
        if t in base:
            remap[i] = base.id(t)
        else:
            remap[i] = len(terms)
            terms.append(t)
    df = np.zeros(len(terms), np.int64)
    cf = np.zeros(len(terms), np.int64)
    df[: len(base)], cf[: len(base)] = base.df[: len(base)], base.cf[: len(base)]
    df[remap[2:]] += new.df[2 : len(new)]
    cf[remap[2:]] += new.cf[2 : len(new)]
    merged = Vocabulary(terms, df, cf, base.num_docs + new.num_docs, base.total_terms + new.total_terms)
    return merged, remap


def check_docids(index: Path, manifest: Manifest, corpus: AnalyzedCorpus, source: Path | Sequence[Document],
                 fmt: str | None, names: Sequence[str] | None = None) -> None:
    """Refuse new documents whose docid the index already holds, naming the first such line of the
    corpus file ``source`` or item of ``source``'s documents given in memory (``documents[i]``, or its ``names``
    entry: ``corpus['d7']`` of a dict keyed by docid).

    Each shard's docids are hashed in Arrow and the new docids looked up in them, so that neither side
    becomes Python strings (a set of MS MARCO's 3.2M docids, and a list of each shard's, held 570 MB)."""
    docs = corpus.docs
    new = docs.table.column("docid") if isinstance(docs, DocumentColumns) else pa.array(docs["docid"], pa.string())
    held = None
    for s in manifest.shards:
        found = pc.is_in(new, value_set=shard_docids(index, s.name))
        held = found if held is None else pc.or_(held, found)
    if held is None or not pc.any(held).as_py():
        return
    clash = new[pc.index(held, True).as_py()].as_py()
    message = f"docid {clash!r} is already in the index {index}"
    if isinstance(source, Path):
        raise InputError(message, source, _line_of(source, fmt, clash))
    i = next(i for i, d in enumerate(source) if d.docid == clash)
    if names is not None:  # a dict's key: its docid
        raise InputError(message, names[i])
    if clash == str(manifest.num_docs + i):  # a text's, most likely: say where the number came from
        message += (f" (a text's docid is its position after the index's {counted(manifest.num_docs, 'document')}; give "
                    "docids with dicts or Documents)")
    raise InputError(message, f"documents[{i}]")


def check_clicks(index: Path, manifest: Manifest, clicks, corpus_path: Path) -> None:
    """An ORCAS file that clicks none of the new documents: refused, as a build refuses it (another id
    scheme, the wrong file), unless it clicks documents the index holds. A collection's file reaches
    some of its documents only (ORCAS about 4 in 10 of MS MARCO's), so an append of a few documents, or
    one, often has none clicked; they are stored as an append without the file stores them."""
    clicked = pa.array(list(clicks), pa.string())
    for s in manifest.shards:
        if pc.any(pc.is_in(shard_docids(index, s.name), value_set=clicked)).as_py():
            return
    raise no_clicks_error(corpus_path, clicks.path, index)


def shard_docids(index: Path, name: str) -> pa.Array:
    """The docids of the index's shard ``name``, an Arrow array read from its memory-mapped document store."""
    return pa.ipc.open_file(pa.memory_map(str(index / name / DOCS_FILE), "r")).read_all().column("docid").combine_chunks()


def _line_of(path: Path, fmt: str | None, docid: str) -> int | None:
    from indexer.readers.corpus import CORPUS_FORMATS, _first_line_of
    from indexer.readers.formats import resolve_format

    try:
        return _first_line_of(path, resolve_format(path, fmt, CORPUS_FORMATS, "corpus"), docid)
    except (StopIteration, InputError):
        return None


# --- append -----------------------------------------------------------------------------


def append_index(
    index_path: str | Path,
    corpus_path: str | Path | Sequence[Document],
    model_factory,
    model_info: dict,
    shard_size: int = 100_000,
    fmt: str | None = None,
    orcas: str | Path | None = None,
    batch_size: int | None = None,
    progress: bool = True,
    names: Sequence[str] | None = None,
) -> Manifest:
    """Add the documents of ``corpus_path`` (a file, or documents read by
    :func:`indexer.readers.read_documents`) to the index at ``index_path`` as new shards of up
    to ``shard_size`` documents; returns the new manifest. ``names``: what an error calls each document given
    in memory (default ``documents[i]``).

    ``model_factory(vocab)`` gives the index's model (``model_info["id"]`` must be the
    manifest's), set up for the grown vocabulary; ``batch_size`` overrides the build's.

    Raises:
        CkqtiError: a corpus or ORCAS file that is no regular file, another model, a docid the index already holds (naming
            the corpus line), or a malformed corpus; the index is then unchanged.
    """
    index = Path(index_path)
    corpus_path = corpus_file(corpus_path) or corpus_path  # a Path, or documents in memory
    if shard_size < 1:
        raise ValueError("shard_size must be >= 1")
    check_input_files(corpus_file(corpus_path), Path(orcas) if orcas else None, fmt)  # a folder, a pipe, nothing: said as a build says it
    manifest = Manifest.read(index)
    with writing(index):
        manifest = Manifest.read(index)
        verify_files(index, manifest)  # as compact does: growing a damaged index hides the damage
        remove_strays(index, manifest)
        work = index / f".append-{os.getpid()}"
        work.mkdir()
        try:
            return _append(index, work, manifest, corpus_path, model_factory, model_info, shard_size, fmt, orcas,
                           batch_size, progress, names)
        finally:
            shutil.rmtree(work, ignore_errors=True)


def _append(index, work, manifest, corpus_path, model_factory, model_info, shard_size, fmt, orcas, batch_size,
            progress, names=None) -> Manifest:
    t0 = time.time()
    if model_info.get("id") != manifest.model.get("id"):
        raise IndexFormatError(
            f"index was built with model {manifest.model.get('id')!r}, not {model_info.get('id')!r}; append with its model",
            index / MANIFEST,
        )
    base, old_offsets = read_vocabulary(index, manifest)
    bar = progress_bar(desc="analyze", unit="doc", show=progress)
    clicks = load_orcas(orcas) if orcas else None
    new = analyze_corpus(corpus_path, Analyzer.from_dict(manifest.analyzer), fmt=fmt, orcas=clicks, progress=bar,
                         directory=work / "analyzed", clicks_required=False)  # as a build analyzes: on disk, read back memory-mapped
    bar.close()
    check_docids(index, manifest, new, corpus_path, fmt, names)
    if clicks and not new.clicked:
        check_clicks(index, manifest, clicks, corpus_path)
    vocab, remap = merge_vocabulary(base, new.vocab)
    corpus = AnalyzedCorpus(new.offsets, renumber_tokens(work / "analyzed" / TOKENS_FILE, remap), new.docs, vocab)
    quantizer = Quantizer.from_manifest(manifest.quantization, manifest.channels)
    scorer = _scorer(index, manifest, model_factory, vocab, quantizer, batch_size)
    offsets = appended_offsets(scorer, corpus, old_offsets, len(vocab))
    infos, clipped = score_new_shards(work, corpus, scorer, quantizer, shard_size, next_shard_number(index, manifest), progress)
    gen = manifest.generation + 1
    write_vocab(work / vocab_file_name(gen), vocab, offsets)
    entry = {
        "corpus": corpus_record(corpus_file(corpus_path), fmt, orcas, new.clicked, new.repeated),
        "num_docs": len(corpus),
        "new_terms": len(vocab) - len(base),
        "shards": [i.name for i in infos],
        "clipped_impacts": clipped,
        "truncated_documents": corpus.longer_than(scorer.config.max_doc_terms),
        "seconds": round(time.time() - t0, 3),
    }
    updated = replace(
        manifest,
        shards=manifest.shards + infos,
        num_docs=manifest.num_docs + len(corpus),
        num_postings=manifest.num_postings + sum(i.num_postings for i in infos),
        vocab_size=len(vocab),
        vocab_checksum=file_checksum(work / vocab_file_name(gen)),
        collection={"num_docs": int(vocab.num_docs), "total_terms": int(vocab.total_terms)},
        clipped_impacts=manifest.clipped_impacts + clipped,
        appends=manifest.appends + [entry],
        generation=gen,
        vocab_file=vocab_file_name(gen),
    )
    updated.write(work)
    publish(index, work, [i.name for i in infos] + [updated.vocab_file], manifest, updated)
    return updated


# Term ids renumbered at a time (:func:`renumber_tokens`): int64 temporaries of a block, not of the corpus
RENUMBER_BLOCK = 1 << 22


def renumber_tokens(path: Path, remap: np.ndarray) -> np.ndarray:
    """The analyzed corpus's term ids in ``path`` (``.npy``) given their ids in the grown vocabulary
    (``remap``: :func:`merge_vocabulary`), rewritten in place a block at a time; returned memory-mapped.
    The file's analysis is then not loadable as it was (its ``vocab.json`` is the new documents'), but
    it lives only in the append's work folder."""
    tokens = np.load(path, mmap_mode="r+")
    for s in range(0, tokens.size, RENUMBER_BLOCK):
        tokens[s : s + RENUMBER_BLOCK] = remap[tokens[s : s + RENUMBER_BLOCK]]
    tokens.flush()
    return tokens


def _scorer(index: Path, manifest: Manifest, model_factory, vocab: Vocabulary, quantizer: Quantizer,
            batch_size: int | None) -> ImpactScorer:
    """The index's model, set up for the grown vocabulary with the build's constants."""
    model = model_factory(vocab) if callable(model_factory) and not hasattr(model_factory, "encode_documents") else model_factory
    where = index / MANIFEST
    missing = set(model.index_constants()) - set(manifest.model_constants)
    if missing:
        raise IndexFormatError(f"index does not record the model constants {sorted(missing)}; rebuild it", where)
    model.set_index_constants(manifest.model_constants)
    if tuple(model.impact_channels) != quantizer.weights:
        raise IndexFormatError(f"index stores channels {quantizer.weights}, the model {tuple(model.impact_channels)}", where)
    config = ImpactConfig(**manifest.build.get("impact_config", asdict(ImpactConfig())))
    if batch_size is not None:
        config = replace(config, batch_size=batch_size)
    return ImpactScorer(model, vocab.df, config)


def appended_offsets(scorer: ImpactScorer, corpus: AnalyzedCorpus, old: np.ndarray, vocab_size: int) -> np.ndarray:
    """Old terms keep their offsets; new terms get offsets fitted on the new documents (latent models)."""
    offsets = np.zeros(vocab_size, np.float32)
    if scorer.offset_channel is not None and vocab_size > old.size:
        offsets = scorer.fit_offsets(corpus.token_lists(0, len(corpus)), vocab_size).astype(np.float32)
    offsets[: old.size] = old
    scorer.offsets = offsets
    return offsets


def score_new_shards(work: Path, corpus: AnalyzedCorpus, scorer: ImpactScorer, quantizer: Quantizer, shard_size: int,
                     first: int, progress: bool) -> tuple[list[ShardInfo], int]:
    """Score, quantize with the index's steps and write the new shards into ``work``;
    returns their manifest entries and the count of clipped impacts."""
    (work / "raw").mkdir()
    bar = progress_bar(total=len(corpus), desc="impacts", unit="doc", show=progress)
    infos, clipped = [], 0
    for i, (start, stop) in enumerate(shard_ranges(len(corpus), shard_size)):
        raw = work / "raw" / f"{shard_name(first + i)}.npz"
        score_shard(corpus, scorer, start, stop, raw, progress=bar)
        postings, n = quantize_raw(raw, quantizer)
        infos.append(write_shard(work, shard_name(first + i), postings, len(corpus.vocab), corpus.doc_table(start, stop)))
        clipped += n
        raw.unlink()
    bar.close()
    return infos, clipped
