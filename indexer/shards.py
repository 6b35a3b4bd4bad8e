"""Writing one shard: postings triples -> impact-ordered segments in Arrow IPC files."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from ckqti.files import naming_full_disk
from ckqti.jit import njit  # numba.njit; cache=True only where Numba can write a cache
from indexer.format import (
    DOCS_FILE,
    MAX_DOC_KEY,
    POSTINGS_FILE,
    SEGMENTS_FILE,
    SHARD_FILES,
    TERMS_FILE,
    ShardInfo,
    file_checksum,
)


def write_table(path: str | Path, columns: dict[str, np.ndarray | list], metadata: dict[str, str] | None = None) -> None:
    """Write columns as a single-batch Arrow IPC file (so each column mmaps contiguously), with
    ``metadata`` in its schema."""
    table = pa.table({k: (pa.array(v) if not isinstance(v, pa.Array) else v) for k, v in columns.items()}, metadata=metadata)
    with naming_full_disk(path), pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table, max_chunksize=max(table.num_rows, 1))


DOC_COLUMNS = ("docid", "title", "text", "length", "prefix")  # a document store's columns (write_documents)


def document_column(table: pa.Table, name: str) -> list:
    """A document store's column as a list; ``prefix``, missing from stores written before it was
    kept, reads as empty strings."""
    if name == "prefix" and name not in table.column_names:
        return [""] * table.num_rows
    return table.column(name).to_pylist()


def documents_table(docs: dict[str, list]) -> pa.Table:
    """A document store's columns as an Arrow table: ``docid``, ``title``, ``text`` (strings),
    ``length`` (int32, analyzed terms) and ``prefix`` (the fields indexed before the title that
    snippets leave out: ORCAS clicks and an MS MARCO document's URL; empty where there are none)."""
    n = len(docs["docid"])
    return pa.table(
        {
            "docid": pa.array(docs["docid"], pa.string()),
            "title": pa.array(docs["title"], pa.string()),
            "text": pa.array(docs["text"], pa.large_string()),
            "length": pa.array(np.asarray(docs["length"], dtype=np.int32)),
            "prefix": pa.array(docs.get("prefix") or [""] * n, pa.large_string()),
        }
    )


def as_documents_table(table: pa.Table) -> pa.Table:
    """A document store read from a shard with :func:`documents_table`'s schema: the table itself
    (no copy of a memory-mapped store) where it has it, else its columns rebuilt (a store written
    before ``prefix`` was kept)."""
    want = documents_table({c: [] for c in DOC_COLUMNS}).schema
    if table.schema.equals(want, check_metadata=False):
        return table
    return documents_table({c: document_column(table, c) for c in DOC_COLUMNS})


def write_documents(path: str | Path, docs: dict[str, list] | pa.Table) -> None:
    """Write a document store (columns as in :func:`documents_table`, or such a table)."""
    table = docs if isinstance(docs, pa.Table) else documents_table(docs)
    write_table(path, {name: table.column(name).combine_chunks() for name in table.column_names})


@dataclass(frozen=True)
class ImpactPostings:
    """Postings of one shard in triple form, in any order.

    Attributes:
        terms: int32[N] posting list ids: ``term * channels + channel`` (with one channel,
            the global term ids).
        docs: uint32[N] shard-local document numbers.
        impacts: uint8[N] quantized impacts (> 0).
        channels: posting lists per term (see :mod:`indexer.format`).
    """

    terms: np.ndarray
    docs: np.ndarray
    impacts: np.ndarray
    channels: int = 1


@njit(cache=True)
def _by_term(terms, docs, imps, vocab_size):
    """Stable counting sort of the postings with impact > 0 by term: ``(start int64[V+1], docs
    uint32[N], impacts uint8[N])``, the documents and impacts copied (5 bytes a posting), not
    an index of them."""
    start = np.zeros(vocab_size + 1, np.int64)
    for i in range(terms.shape[0]):
        if imps[i] > 0:
            start[terms[i] + 1] += 1
    for t in range(vocab_size):
        start[t + 1] += start[t]
    fill = start[:-1].copy()
    term_docs = np.empty(start[vocab_size], np.uint32)
    term_imps = np.empty(start[vocab_size], np.uint8)
    for i in range(terms.shape[0]):
        if imps[i] > 0:
            t = terms[i]
            term_docs[fill[t]] = docs[i]
            term_imps[fill[t]] = imps[i]
            fill[t] += 1
    return start, term_docs, term_imps


@njit(cache=True)
def _impact_bins(term_imps, a, b, counts):
    """``counts[255 - v]``: how many of ``term_imps[a:b]`` are ``v`` (impact 255 -> bin 0)."""
    counts[:] = 0
    for j in range(a, b):
        counts[255 - term_imps[j]] += 1


@njit(cache=True)
def _segment_sorted(start, term_docs, term_imps):
    """Each term's postings (as :func:`_by_term` returns them) by impact descending, stable, and
    cut into segments: ``(postings uint32[N], seg_start int64[S+1], seg_impact uint8[S+1],
    seg_ptr int64[V+1])``. The 256-bin count of a term is made twice: once to size the segment
    arrays."""
    vocab_size = start.shape[0] - 1
    counts = np.zeros(256, np.int64)
    seg_ptr = np.zeros(vocab_size + 1, np.int64)
    for t in range(vocab_size):
        seg_ptr[t + 1] = seg_ptr[t]
        if start[t + 1] > start[t]:
            _impact_bins(term_imps, start[t], start[t + 1], counts)
            seg_ptr[t + 1] += np.count_nonzero(counts)
    segments, n = seg_ptr[vocab_size], term_docs.shape[0]
    postings = np.empty(n, np.uint32)
    seg_start = np.full(segments + 1, n, np.int64)
    seg_impact = np.zeros(segments + 1, np.uint8)
    k = 0
    for t in range(vocab_size):
        if start[t + 1] == start[t]:
            continue
        _impact_bins(term_imps, start[t], start[t + 1], counts)
        pos = start[t]
        for v in range(256):
            if counts[v]:
                seg_start[k], seg_impact[k] = pos, 255 - v
                k += 1
            counts[v], pos = pos, pos + counts[v]
        for j in range(start[t], start[t + 1]):
            v = 255 - term_imps[j]
            postings[counts[v]] = term_docs[j]
            counts[v] += 1
    return postings, seg_start, seg_impact, seg_ptr


SEGMENT_ARRAYS = ("postings", "seg_start", "seg_impact", "seg_ptr")  # segment_postings's, in _segment_sorted's order


def segment_postings(p: ImpactPostings, vocab_size: int) -> dict[str, np.ndarray]:
    """Order postings by (term, impact desc, doc) and cut them into segments; impacts of 0 are
    dropped.

    Returns flat arrays: ``postings`` (uint32 docs), ``seg_start`` (int64, S+1),
    ``seg_impact`` (uint8, S+1, last entry 0), ``seg_ptr`` (int64, V+1).
    """
    terms, docs, imps = p.terms, p.docs, np.asarray(p.impacts, dtype=np.uint8)
    keep = imps > 0
    if keep.any() and (np.min(terms, where=keep, initial=0) < 0 or np.max(terms, where=keep, initial=0) >= vocab_size):
        raise ValueError("term id outside the vocabulary")
    if docs.size > 1 and (docs[1:] < docs[:-1]).any():
        # both sorts below are stable: postings that already come in document order within each list
        # and impact (a written shard's, decoded; shards concatenated in document order, as compaction
        # merges them) need no sort by document, which took a quarter of a compaction's time
        seg = _segment_sorted(*_by_term(terms, docs, imps, vocab_size))
        if _segments_ascend(seg[0], seg[1]):
            return dict(zip(SEGMENT_ARRAYS, seg))
        del seg
        by_doc = np.argsort(docs, kind="stable")  # a stable sort by document keeps ties in input order
        terms, docs, imps = terms[by_doc], docs[by_doc], imps[by_doc]
    return dict(zip(SEGMENT_ARRAYS, _segment_sorted(*_by_term(terms, docs, imps, vocab_size))))


@njit(cache=True)
def _segments_ascend(postings, seg_start):
    """Whether each segment's documents strictly ascend."""
    for s in range(seg_start.shape[0] - 1):
        for j in range(seg_start[s] + 1, seg_start[s + 1]):
            if postings[j] <= postings[j - 1]:
                return False
    return True


def write_shard(
    directory: str | Path,
    name: str,
    postings: ImpactPostings,
    vocab_size: int,
    docs: dict[str, list] | pa.Table,
) -> ShardInfo:
    """Write a complete shard directory and return its manifest entry.

    ``vocab_size`` is the number of terms the shard covers (its lists: ``vocab_size *
    postings.channels``). ``docs`` holds the document store columns: ``docid``, ``title``,
    ``text``, ``length`` (and ``prefix``), as lists or as a table of :func:`documents_table`'s
    schema (an analyzed corpus's rows, which never become Python strings).
    """
    d = Path(directory, name)
    d.mkdir(parents=True, exist_ok=True)
    write_documents(d / DOCS_FILE, docs)  # first: its copy of the text is let go before the postings are sorted
    num_docs = docs.num_rows if isinstance(docs, pa.Table) else len(docs["docid"])
    seg = segment_postings(postings, vocab_size * postings.channels)
    facts = {MAX_DOC_KEY: str(int(seg["postings"].max()))} if seg["postings"].size else None
    write_table(d / POSTINGS_FILE, {"doc": seg["postings"]}, facts)
    write_table(d / SEGMENTS_FILE, {"start": seg["seg_start"], "impact": seg["seg_impact"]})
    write_table(d / TERMS_FILE, {"seg_ptr": seg["seg_ptr"]})
    files = {f: file_checksum(d / f) for f in SHARD_FILES}
    size = sum((d / f).stat().st_size for f in SHARD_FILES)
    return ShardInfo(name, num_docs, int(seg["postings"].size), files, size)


def decode_segments(postings: np.ndarray, seg_start: np.ndarray, seg_impact: np.ndarray, seg_ptr: np.ndarray):
    """A written shard's postings back in triple form: ``(lists int32, docs uint32, impacts uint8)``
    in the stored order (by list, impact descending, document ascending)."""
    seg_len = np.diff(seg_start)  # [S]
    seg_list = np.repeat(np.arange(seg_ptr.size - 1, dtype=np.int64), np.diff(seg_ptr))  # [S]
    lists = np.repeat(seg_list, seg_len).astype(np.int32)
    impacts = np.repeat(seg_impact[:-1], seg_len).astype(np.uint8)
    return lists, np.asarray(postings, dtype=np.uint32), impacts
