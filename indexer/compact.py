"""Compaction: merge consecutive shards into fewer, larger ones, without rescoring.

Appends add small shards; search visits shards one after another, so many small shards
cost time. :func:`compact_index` groups consecutive shards greedily into shards of up to
``shard_size`` documents (a shard already that large stays as it is), decodes each group's
postings from its segments, re-encodes them with :func:`indexer.shards.write_shard` over the
current vocabulary, and concatenates the document stores. Stored impacts are copied, never
recomputed, and document order is kept, so every search result is unchanged (integer
scores, docids and tie order; in anytime mode only where the budget, per shard, does not bind and
the slack is 1: slack prunes against each shard's own k-th best). The new shards are written to ``INDEX/.compact-PID/``, moved
in under new names, the manifest is replaced by an atomic rename, and only then are the
old shard directories deleted.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow as pa

from indexer.append import next_shard_number, publish, remove_strays, writing
from indexer.format import Manifest, ShardInfo, shard_name
from indexer.shards import ImpactPostings, as_documents_table, decode_segments, write_shard


def shard_groups(sizes: list[int], shard_size: int) -> list[list[int]]:
    """Consecutive shard positions grouped greedily so that each group holds at most
    ``shard_size`` documents (a larger shard forms a group alone)."""
    groups: list[list[int]] = []
    total = 0
    for i, n in enumerate(sizes):
        if groups and total + n <= shard_size:
            groups[-1].append(i)
            total += n
        else:
            groups.append([i])
            total = n
    return groups


def merge_shards(directory: Path, name: str, shards: list, vocab_size: int, channels: int) -> ShardInfo:
    """Write the postings and documents of ``shards`` (opened :class:`retriever.index.Shard`),
    in order, as one shard covering ``vocab_size`` terms."""
    lists, docs, impacts, base = [], [], [], 0
    for sh in shards:
        li, do, im = decode_segments(sh.postings, sh.seg_start, sh.seg_impact, sh.seg_ptr)
        lists.append(li)
        docs.append(do.astype(np.int64) + base)
        impacts.append(im)
        base += sh.num_docs
    if base >= 1 << 32:
        raise ValueError(f"a shard of {base} documents exceeds uint32 document numbers")
    postings = ImpactPostings(np.concatenate(lists), np.concatenate(docs).astype(np.uint32), np.concatenate(impacts), channels)
    # the stores joined as Arrow tables, not lists of Python strings (held twice over: as strings, then in Arrow)
    docs = pa.concat_tables([as_documents_table(sh.docs) for sh in shards])
    return write_shard(directory, name, postings, vocab_size, docs)


def compact_index(index_path: str | Path, shard_size: int = 100_000) -> Manifest:
    """Merge the index's consecutive shards into shards of up to ``shard_size`` documents;
    returns the new manifest (the old one when there is nothing to merge)."""
    from retriever.index import Index

    if shard_size < 1:
        raise ValueError("shard_size must be >= 1")
    index = Path(index_path)
    Manifest.read(index)  # a clear error for a missing or unsupported index
    with writing(index):
        manifest = Manifest.read(index)
        remove_strays(index, manifest)
        groups = shard_groups([s.num_docs for s in manifest.shards], shard_size)
        if all(len(g) == 1 for g in groups):  # nothing to merge: no shard opened (at 1M documents, 3 s and 830 MiB)
            return manifest
        idx = Index(index)  # verifies every file: corruption is not copied into new shards
        work = index / f".compact-{os.getpid()}"
        work.mkdir()
        try:
            infos, written = merge_groups(work, idx, groups, next_shard_number(index, manifest))
            holder = {manifest.shards[i].name: info.name for info, group in zip(infos, groups) for i in group}
            updated = replace(
                manifest,
                shards=infos,
                appends=[renamed_shards(a, holder) for a in manifest.appends],
                num_postings=sum(i.num_postings for i in infos),
                generation=manifest.generation + 1,
            )
            updated.write(work)
            publish(index, work, written, manifest, updated)
            return updated
        finally:
            shutil.rmtree(work, ignore_errors=True)


def renamed_shards(record: dict, holder: dict[str, str]) -> dict:
    """An append's manifest record with its ``shards`` named as the shards that hold their documents
    after a compaction (``holder``: old name -> new), each once, in order; names not there are kept."""
    if not isinstance(record.get("shards"), list):
        return record
    return {**record, "shards": list(dict.fromkeys(holder.get(s, s) for s in record["shards"]))}


def merge_groups(work: Path, idx, groups: list[list[int]], number: int) -> tuple[list[ShardInfo], list[str]]:
    """The new shard list: groups of one shard keep it, larger groups are merged into new
    shards (numbered from ``number``) written to ``work``; returns it and the new names."""
    m = idx.manifest
    infos, written = [], []
    for group in groups:
        if len(group) == 1:
            infos.append(m.shards[group[0]])
            continue
        name = shard_name(number + len(written))
        infos.append(merge_shards(work, name, [idx.shards[i] for i in group], m.vocab_size, m.num_channels))
        written.append(name)
    return infos, written
