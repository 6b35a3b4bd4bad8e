"""Merging shards' hits into one top k, and the hits a batch asks for so that ties at the cut show."""

from __future__ import annotations

import numpy as np

TIE_MARGIN = 8  # a batch searches k + k // TIE_MARGIN hits (tie_margin)



def tie_margin(k: int) -> int:
    """Hits a batch asks for to rank ``k``: a tie at the k-th score shows as the last one tying it, and then
    that query is searched again (:meth:`~retriever.search.Searcher.topk_with_ties`). ``k + 1`` shows it; a deep ``k`` gets an
    eighth more, within which most ties at the cut end: at k = 1,000, 146 of SciFact's 1,109 claims were
    searched again at k + 1 and none at k + 125 (``topk_columns`` 0.197 -> 0.184 s), and 293 of its 300 test
    claims over SciFact's abstracts copied 40 times (207,320 documents, 3 shards) -> none, 1.38 -> 0.46 s;
    the same hits (session 41)."""
    return k + max(1, k // TIE_MARGIN)



def tie_at_cut(vals: np.ndarray, k: int, want: int, held=None) -> bool:
    """Whether hits ``vals`` (descending, of ``want`` asked for, k + 1 or more) may leave out a document
    tied with the k-th: the last one returned, beyond the k-th, still scores as the k-th does (as
    ``held`` holds scores, :meth:`retriever.query.QueryPlan.held`; None: the integers), and it is the last asked for
    (fewer returned than asked: every hit is in)."""
    if vals.size <= k or vals.size < want:
        return False
    return vals[-1] == vals[k - 1] if held is None else held(vals[-1]) == held(vals[k - 1])



def merged_topk(parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]], k: int | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The top ``k`` (None: all) of shards' hits ``(vals, shards, docs)``: score descending, then shard, then document."""
    if not parts:
        empty = np.zeros(0, np.int64)
        return empty, empty, empty
    vals, shards, docs = (np.concatenate(x) for x in zip(*parts))
    order = np.lexsort((docs, shards, -vals))[:k]
    return vals[order], shards[order], docs[order]



def merge_shard_hits(vals: np.ndarray, docs: np.ndarray, n: np.ndarray, out: np.ndarray, counts: np.ndarray) -> None:
    """Per query, the top ``k`` of the shards' hits (score desc, then shard, then doc).

    Shape:
        vals, docs: [S, Q, k] per-shard hits, the first ``n[s, q]`` valid; n: [S, Q];
        out: [3, Q, k] (scores, shards, docs) written up to ``counts[q]``; counts: [Q].
    """
    num_shards, nq, k = vals.shape[0], vals.shape[1], out.shape[2]
    for j in range(nq):
        v = np.concatenate([vals[si, j, :n[si, j]] for si in range(num_shards)])
        s = np.concatenate([np.full(n[si, j], si, np.int64) for si in range(num_shards)])
        d = np.concatenate([docs[si, j, :n[si, j]] for si in range(num_shards)])
        order = np.lexsort((d, s, -v))[:k]
        c = order.size
        out[0, j, :c], out[1, j, :c], out[2, j, :c] = v[order], s[order], d[order]
        counts[j] = c
