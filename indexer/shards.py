"""Writing one shard: postings triples -> impact-ordered segments in Arrow IPC files."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
from numba import njit

from ckqti.files import naming_full_disk
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
def _order_postings(terms, docs, imps, vocab_size):
    """Stable counting sort by term, then by impact descending inside each term.

    Input in ascending document order stays in ascending document order inside each
    (term, impact) segment. O(N + V) plus a 256-bin count per term with postings.
    """
    n = terms.shape[0]
    start = np.zeros(vocab_size + 1, np.int64)
    for i in range(n):
        start[terms[i] + 1] += 1
    for t in range(vocab_size):
        start[t + 1] += start[t]
    fill = start[:-1].copy()
    by_term = np.empty(n, np.int64)
    for i in range(n):
        t = terms[i]
        by_term[fill[t]] = i
        fill[t] += 1
    order = np.empty(n, np.int64)
    counts = np.zeros(257, np.int64)
    for t in range(vocab_size):
        a, b = start[t], start[t + 1]
        if b - a == 0:
            continue
        counts[:] = 0
        for j in range(a, b):
            counts[256 - imps[by_term[j]]] += 1  # impact 255 -> bin 1 ... impact 1 -> bin 255
        pos = a
        for v in range(257):
            c = counts[v]
            counts[v] = pos
            pos += c
        for j in range(a, b):
            i = by_term[j]
            v = 256 - imps[i]
            order[counts[v]] = i
            counts[v] += 1
    return order


def segment_postings(p: ImpactPostings, vocab_size: int) -> dict[str, np.ndarray]:
    """Order postings by (term, impact desc, doc) and cut them into segments.

    Returns flat arrays: ``postings`` (uint32 docs), ``seg_start`` (int64, S+1),
    ``seg_impact`` (uint8, S+1, last entry 0), ``seg_ptr`` (int64, V+1).
    """
    keep = p.impacts > 0
    terms = p.terms[keep].astype(np.int64)
    docs = p.docs[keep].astype(np.uint32)
    imps = p.impacts[keep].astype(np.int64)
    if terms.size and (terms.min() < 0 or terms.max() >= vocab_size):
        raise ValueError("term id outside the vocabulary")
    if docs.size > 1 and (np.diff(docs.astype(np.int64)) < 0).any():
        by_doc = np.argsort(docs, kind="stable")
        terms, docs, imps = terms[by_doc], docs[by_doc], imps[by_doc]
    order = _order_postings(terms, docs, imps, vocab_size)
    terms, docs, imps = terms[order], docs[order], imps[order].astype(np.uint8)
    n = terms.size
    if n:
        new_seg = np.empty(n, dtype=bool)
        new_seg[0] = True
        new_seg[1:] = (terms[1:] != terms[:-1]) | (imps[1:] != imps[:-1])
        starts = np.flatnonzero(new_seg)
    else:
        starts = np.zeros(0, dtype=np.int64)
    seg_start = np.append(starts, n).astype(np.int64)
    seg_impact = np.append(imps[starts], 0).astype(np.uint8)
    seg_term = terms[starts]
    seg_ptr = np.searchsorted(seg_term, np.arange(vocab_size + 1), side="left").astype(np.int64)
    return {"postings": docs, "seg_start": seg_start, "seg_impact": seg_impact, "seg_ptr": seg_ptr}


def write_shard(
    directory: str | Path,
    name: str,
    postings: ImpactPostings,
    vocab_size: int,
    docs: dict[str, list],
) -> ShardInfo:
    """Write a complete shard directory and return its manifest entry.

    ``vocab_size`` is the number of terms the shard covers (its lists: ``vocab_size *
    postings.channels``). ``docs`` holds the document store columns: ``docid``, ``title``,
    ``text``, ``length``.
    """
    d = Path(directory, name)
    d.mkdir(parents=True, exist_ok=True)
    seg = segment_postings(postings, vocab_size * postings.channels)
    facts = {MAX_DOC_KEY: str(int(seg["postings"].max()))} if seg["postings"].size else None
    write_table(d / POSTINGS_FILE, {"doc": seg["postings"]}, facts)
    write_table(d / SEGMENTS_FILE, {"start": seg["seg_start"], "impact": seg["seg_impact"]})
    write_table(d / TERMS_FILE, {"seg_ptr": seg["seg_ptr"]})
    write_documents(d / DOCS_FILE, docs)
    files = {f: file_checksum(d / f) for f in SHARD_FILES}
    size = sum((d / f).stat().st_size for f in SHARD_FILES)
    return ShardInfo(name, len(docs["docid"]), int(seg["postings"].size), files, size)


def decode_segments(postings: np.ndarray, seg_start: np.ndarray, seg_impact: np.ndarray, seg_ptr: np.ndarray):
    """A written shard's postings back in triple form: ``(lists int32, docs uint32, impacts uint8)``
    in the stored order (by list, impact descending, document ascending)."""
    seg_len = np.diff(seg_start)  # [S]
    seg_list = np.repeat(np.arange(seg_ptr.size - 1, dtype=np.int64), np.diff(seg_ptr))  # [S]
    lists = np.repeat(seg_list, seg_len).astype(np.int32)
    impacts = np.repeat(seg_impact[:-1], seg_len).astype(np.uint8)
    return lists, np.asarray(postings, dtype=np.uint32), impacts
