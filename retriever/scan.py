"""Exact top-k of one query by a plain numpy scan of its posting lists: no Numba.

A process that searches once (``ckqti search``, :func:`ckqti.api.search`) spends more on starting
Numba than on the search: importing it and loading the cached kernels took 0.45 s of a 0.7 s
``ckqti search`` on the bundled sample, and the first search after an install compiles them for
10-20 s. Adding up the query's postings with numpy answers the same question, exactly, in
milliseconds (a list of a million postings: a few). The kernels stay the engine for everything
that searches many queries (batch runs, ``ckqti serve``, reranking from an index) and for anytime
mode, which this scan does not have.

The hits are the kernels' (``retriever.kernels.saat_topk`` in exact mode): documents scoring above
0, by integer score descending, then document number ascending.
"""

from __future__ import annotations

import numpy as np


def query_postings(postings: np.ndarray, seg_start: np.ndarray, seg_impact: np.ndarray, seg_ptr: np.ndarray,
                   lists: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The documents (int64) of every posting of ``lists`` in a shard and what each adds to its
    document's score (``weight * impact``, int64). A list id past the shard's own (a list that did
    not exist when it was written) is empty here."""
    docs, gains = [], []
    num_lists = seg_ptr.shape[0] - 1
    for lst, w in zip(lists.tolist(), weights.tolist()):
        if not 0 <= lst < num_lists:
            continue
        s0, s1 = int(seg_ptr[lst]), int(seg_ptr[lst + 1])
        a0, a1 = int(seg_start[s0]), int(seg_start[s1])
        if a1 == a0:
            continue
        docs.append(postings[a0:a1])
        gains.append(np.repeat(seg_impact[s0:s1].astype(np.int64) * w, np.diff(seg_start[s0:s1 + 1])))
    if not docs:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(docs).astype(np.int64), np.concatenate(gains)


def scan_topk(postings: np.ndarray, seg_start: np.ndarray, seg_impact: np.ndarray, seg_ptr: np.ndarray,
              lists: np.ndarray, weights: np.ndarray, k: int, num_docs: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Top-``k`` documents of one shard for posting lists ``lists`` (int64) weighted ``weights``
    (int64 > 0), every posting read.

    Returns:
        ``(vals, docs, processed)``: int64 integer scores descending, ties by document ascending,
        at most ``k`` of them, only documents scoring above 0; and the postings read.
    """
    docs, gains = query_postings(postings, seg_start, seg_impact, seg_ptr, lists, weights)
    if docs.size == 0 or k < 1:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), int(docs.size)
    # float64 sums of integers stay exact below 2^53 (a query scores at most 1,024 terms x 128 x 255 a channel)
    scores = np.bincount(docs, weights=gains, minlength=num_docs).astype(np.int64)
    hit = np.flatnonzero(scores > 0)
    vals = scores[hit]
    if hit.size > k:
        kth = np.partition(vals, hit.size - k)[hit.size - k]  # the k-th largest score
        keep = vals >= kth  # all of the k-th score's ties; the lowest documents among them are kept below
        hit, vals = hit[keep], vals[keep]
    order = np.lexsort((hit, -vals))[:k]
    return vals[order], hit[order], int(docs.size)
