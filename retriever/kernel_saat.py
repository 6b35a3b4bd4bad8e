"""Numba kernels for top-k retrieval over impact-ordered segments.

Pure functions over flat arrays (see ``indexer.format`` for the layout); every one
also runs with ``NUMBA_DISABLE_JIT=1``. The caller owns scratch buffers (``acc``,
``touched``, ``hist``): they are zero on entry and restored to zero on exit, so a
query never pays for zero-filling an array of the collection's size.

Score-at-a-time traversal (Anh & Moffat's impact-ordered evaluation): the segments of
all query terms are processed in decreasing order of ``weight * impact``. Accumulators
are integers.

1. Warm-up: a short query (at most ``warmup`` postings: most tail queries) is added
   whole with no bookkeeping beyond the list of touched documents, and its top k is
   selected with a k-heap, or for a k that is not small beside the touched documents by
   the k-th value, found by a histogram (:func:`select_topk`); a longer one adds its first
   segments that way, up to ``warmup >> WARMUP_SHIFT`` postings.
2. OR mode: a histogram of accumulator values, built once from the touched documents,
   keeps ``theta``, the k-th largest accumulator, up to date in amortised O(1) per
   posting. ``R``, the sum over query terms of their next unprocessed contribution,
   bounds what any document can still gain.
3. AND mode, once ``theta > R``: no unseen document can enter the top k; only documents
   already seen whose accumulator plus ``R`` can still reach ``theta`` are updated (a
   bitset marks them). Each time ``R`` falls below 4/5 of its value at the last pruning,
   candidates that cannot reach ``theta`` are dropped; so they are too before a segment
   much longer than the candidates. A segment longer than the candidates times
   ``lookup_cost`` is not scanned: each candidate is looked up in it (the candidates sorted
   by document once, which pruning keeps).
4. Finish, once looking the few candidates up in every segment left costs less than scanning
   what is left: each remaining segment is merged against the candidates (a forward
   pass over the segment's skip entries, every ``SKIP_BLOCK``-th document, then a search
   in one block of postings), terms in decreasing order of contribution, dropping
   candidates that can no longer reach the k-th best after each term.

5. Dense restart (exact mode): a query still in OR mode after ``1 / DENSE_AFTER`` of its
   postings plus half the shard's documents (a kernel searches one shard) has impacts that do not prune (uniform
   random impacts do not); its accumulators go back to zero and
   :func:`~retriever.kernel_dense.dense_topk` adds every posting with no bookkeeping, then ranks
   all accumulators in one pass.

Exact mode gives scores equal to brute force. Anytime mode stops once a postings budget
is spent, at a segment boundary (the finish by lookup reads no postings, so it is not
charged to the budget), and may prune with the bound ``R`` scaled by ``slack`` /
:data:`EXACT_SLACK` < 1 (a document is dropped once its accumulator plus the scaled bound
falls below ``theta``): a top-k document is then missed only when its score is within
(1 - slack) * R of the k-th best.
"""

from __future__ import annotations

import numpy as np

from ckqti.jit import njit  # numba.njit; cache=True only where Numba can write a cache
from retriever.kernel_accumulate import accumulate, accumulate_flat, accumulate_plain, fill_histogram
from retriever.kernel_and import EXACT_SLACK, SLACK_SHIFT, and_segment, finish_by_lookup, prune, set_bits
from retriever.kernel_dense import dense_point, restart_dense
from retriever.kernel_postings import term_ranges
from retriever.kernel_select import collect_topk, select_topk

# A query whose postings exceed ``warmup`` warms up on warmup >> WARMUP_SHIFT postings only, so
# that the histogram can bound the k-th best (and AND mode start) before many documents
# are touched (WARMUP 16,384 and 4: +36-50% head-heavy QPS on the 100k synthetic index, +23% on
# SciFact, +2-3% at 1M, against 8,192 for both).
WARMUP_SHIFT = 4
# The finish merges every segment left against the candidates, short ones too, so it pays off later
# than one segment's lookups: at 32x (factors 16 and 64, and never finishing, within noise).
FINISH_FACTOR = 32
# Anytime mode finishes where exact mode did before session 31 (512 a lookup): the finish reads no
# postings, so it is not charged to the budget, and with a slack it drops candidates term by term;
# finishing at FINISH_FACTOR cost anytime agreement on the 1M benchmark (budget 20k 0.685 -> 0.615,
# slack 0.8 0.950 -> 0.924).
ANYTIME_FINISH_FACTOR = 4
# AND mode drops hopeless candidates each time the remaining bound falls below DEN / NUM
# (4/5) of its value at the last pruning (waiting for it to halve, before session 5, left
# more candidates to scan and look up; pruning at every segment cost more than it saved).
PRUNE_STEP_NUM, PRUNE_STEP_DEN = 5, 4


@njit(nogil=True, cache=True)
def next_term(cur, end, seg_impact, weights):
    """Index of the query term whose next segment contributes most (-1 when all are done)."""
    best, best_c = -1, -1
    for i in range(cur.shape[0]):
        if cur[i] < end[i]:
            c = weights[i] * np.int64(seg_impact[cur[i]])
            if c > best_c:
                best, best_c = i, c
    return best


@njit(nogil=True, cache=True)
def remaining_bound(cur, end, seg_impact, weights):
    """Sum over query terms of their next segment's contribution: what any document can still gain."""
    r = 0
    for i in range(cur.shape[0]):
        if cur[i] < end[i]:
            r += weights[i] * np.int64(seg_impact[cur[i]])
    return r


@njit(nogil=True, cache=True, inline="always")
def advanced_bound(bound, c, i, cur, end, seg_impact, weights):
    """:func:`remaining_bound` after term ``i`` (whose segment contributed ``c``) moved on one
    segment: only its part changes."""
    if cur[i] < end[i]:
        return bound - c + weights[i] * np.int64(seg_impact[cur[i]])
    return bound - c


@njit(nogil=True, cache=True)
def warm_up(postings, seg_start, seg_impact, cur, end, weights, budget, acc, touched, warmup, left, post_impact):
    """Add whole segments without histogram or pruning: all ``left`` postings of the query
    when they total at most ``warmup`` (term by term: no search for the next segment, which
    matters as a learned index's term has a segment for each of its distinct impacts), else
    segments in traversal order while they total at most ``warmup >> WARMUP_SHIFT`` (and the
    budget lasts). With ``post_impact`` (each posting's impact, see
    :func:`~retriever.kernel_postings.posting_impacts`) the whole query goes in one flat loop a term,
    with no loop a segment to start and leave.
    Returns ``(ntouched, processed)``."""
    ntouched, processed = 0, 0
    if left <= warmup and (budget < 0 or left <= budget):  # everything goes in: the order does not matter
        if post_impact.shape[0] > 0:
            for i in range(cur.shape[0]):
                ntouched = accumulate_flat(postings, post_impact, seg_start[cur[i]], seg_start[end[i]], weights[i], acc, touched,
                                           ntouched)
                cur[i] = end[i]
            return ntouched, left
        for i in range(cur.shape[0]):
            for s in range(cur[i], end[i]):
                ntouched = accumulate_plain(postings, seg_start[s], seg_start[s + 1], weights[i] * np.int64(seg_impact[s]),
                                            acc, touched, ntouched)
            cur[i] = end[i]
        return ntouched, left
    while budget < 0 or processed < budget:
        i = next_term(cur, end, seg_impact, weights)
        if i < 0:
            break
        s = cur[i]
        a0, a1 = seg_start[s], seg_start[s + 1]
        if processed + a1 - a0 > (warmup >> WARMUP_SHIFT):
            break
        ntouched = accumulate_plain(postings, a0, a1, weights[i] * np.int64(seg_impact[s]), acc, touched, ntouched)
        processed += a1 - a0
        cur[i] += 1
    return ntouched, processed


@njit(nogil=True, cache=True)
def saat_topk(postings, seg_start, seg_impact, seg_ptr, terms, weights, k, budget, acc, touched, hist, bits, skips, skip_ptr,
              post_impact, warmup, lookup_cost, slack, out_docs, out_vals):
    """Top-k documents by the sum of ``weight * impact`` over the query terms.

    Args:
        terms: int64[m] term (posting list) ids, those outside ``seg_ptr`` empty; weights:
            int64[>= m] positive integer weights (the first m are the terms'). A repeated id
            adds its list once per occurrence, as one occurrence with the summed weight would.
        k: results wanted; budget: postings to process at most (< 0: exact).
        acc: uint16/uint32/int64[num_docs] (wide enough for sum(weights)*255),
            touched: uint32/int64[num_docs + 1], hist: int64[>= sum(weights)*255+2],
            bits: uint64[num_docs // 64 + 1], all zero on entry and on exit.
        skips, skip_ptr: :func:`~retriever.kernel_postings.build_skips` of the shard (``NO_SKIPS,
            NO_SKIP_PTR``: plain binary search).
        post_impact: :func:`~retriever.kernel_postings.posting_impacts` of the shard, or
            ``NO_POST_IMPACT``.
        warmup: a query of at most this many postings is added whole without pruning; a
            longer one warms up on ``warmup >> WARMUP_SHIFT`` (0: the histogram and pruning
            work from the first segment).
        lookup_cost: a lookup's cost in postings scanned (:data:`~retriever.kernel_and.LOOKUP_COST`):
            AND mode looks candidates up in a segment longer than this many postings a candidate, and the finish
            by lookup starts once candidates x segments left x this x :data:`FINISH_FACTOR`
            (anytime: :data:`ANYTIME_FINISH_FACTOR`) is below the postings left (smaller values look
            up and finish earlier).
        slack: the bound ``R`` is scaled by ``slack / EXACT_SLACK`` wherever it prunes
            (:data:`EXACT_SLACK`: exact; smaller: approximate, sooner).

        out_docs, out_vals: int64[>= k], where the hits go (written, not allocated: a
            returned array costs a call ~0.4 us of boxing).

    Returns:
        ``(n, processed)``: the hits are ``out_docs[:n]`` (shard-local documents) and
        ``out_vals[:n]`` (integer scores), best first, ties by ascending document;
        postings scanned.
    """
    m = terms.shape[0]
    cur = np.empty(m, np.int64)
    end = np.empty(m, np.int64)
    left = term_ranges(terms, seg_ptr, seg_start, cur, end)  # postings not yet processed
    ntouched, processed = warm_up(postings, seg_start, seg_impact, cur, end, weights, budget, acc, touched, warmup, left,
                                  post_impact)
    left -= processed
    if left == 0 or (budget >= 0 and processed >= budget):
        return select_topk(acc, touched, ntouched, k, hist, out_docs, out_vals), processed
    theta, cnt = fill_histogram(acc, touched, ntouched, hist, k)
    dense_at = dense_point(left + processed, acc.shape[0], budget, slack)
    finish_cost = lookup_cost * (FINISH_FACTOR if budget < 0 and slack >= EXACT_SLACK else ANYTIME_FINISH_FACTOR)
    bound = remaining_bound(cur, end, seg_impact, weights)
    eff = (bound * slack) >> SLACK_SHIFT
    and_mode = False
    is_sorted = False  # touched[:ntouched] ascending (pruning keeps the order)
    pruned_at = 0  # the bound at the last step's pruning (which then checks whether to finish)
    swept_at = 0  # the bound at the last pruning of either kind (step, or before a long segment)
    while True:
        if not and_mode and cnt >= k and theta > eff:
            and_mode = True
            pruned_at = swept_at = eff + 1
            set_bits(bits, touched, ntouched, np.bool_(True))  # not a literal: see ROOT
        if and_mode and PRUNE_STEP_NUM * eff < PRUNE_STEP_DEN * pruned_at:
            ntouched = prune(acc, touched, ntouched, hist, theta, eff, bits)
            pruned_at = swept_at = eff
            segs_left = 0
            for j in range(m):
                segs_left += end[j] - cur[j]
            if ntouched * segs_left * finish_cost < left:
                n = finish_by_lookup(postings, seg_start, seg_impact, cur, end, weights, acc, touched, ntouched, hist, k, skips,
                                     skip_ptr, slack, out_docs, out_vals)
                set_bits(bits, touched, ntouched, np.bool_(False))
                return n, processed
        if not and_mode and 0 <= dense_at <= processed and left > dense_at:
            n = restart_dense(postings, seg_start, seg_impact, seg_ptr, terms, weights, cur, end, acc, touched, ntouched,
                              hist, post_impact, k, out_docs, out_vals)
            return n, 2 * processed + left
        i = next_term(cur, end, seg_impact, weights)
        if i < 0 or (budget >= 0 and processed >= budget):
            break
        s = cur[i]
        c = weights[i] * np.int64(seg_impact[s])
        a0, a1 = seg_start[s], seg_start[s + 1]
        if and_mode:
            theta, cnt, ntouched, swept_at, is_sorted = and_segment(postings, seg_start, skips, skip_ptr, s, c, acc, touched,
                                                                    ntouched, hist, bits, theta, cnt, k, eff, swept_at,
                                                                    is_sorted, lookup_cost)
        else:
            ntouched, theta, cnt = accumulate(postings, a0, a1, c, acc, touched, ntouched, hist, theta, cnt, k)
        processed += a1 - a0
        left -= a1 - a0
        cur[i] += 1
        bound = advanced_bound(bound, c, i, cur, end, seg_impact, weights)
        eff = (bound * slack) >> SLACK_SHIFT
    if and_mode:
        set_bits(bits, touched, ntouched, np.bool_(False))
    return collect_topk(acc, touched, ntouched, hist, k, theta, cnt, out_docs, out_vals), processed


@njit(nogil=True, cache=True)
def saat_batch(postings, seg_start, seg_impact, seg_ptr, q_terms, q_weights, q_ptr, k, budget, acc, touched, hist, bits,
               skips, skip_ptr, post_impact, warmup, lookup_cost, slack, out_docs, out_vals, out_n, out_processed):
    """:func:`saat_topk` for many queries in one call (no Python between queries).

    Args:
        q_terms, q_weights: int64, query ``q``'s lists and weights at ``q_ptr[q]:q_ptr[q + 1]``.
        hist: sized for the largest ``sum(weights) * 255 + 2`` of the batch.
        out_docs, out_vals: int64[nq, k] (filled up to ``out_n[q]``); out_n, out_processed: int64[nq].
    Other arguments as :func:`saat_topk`.
    """
    for q in range(q_ptr.shape[0] - 1):
        a, b = q_ptr[q], q_ptr[q + 1]
        if b == a:
            out_n[q] = 0
            out_processed[q] = 0
            continue
        out_n[q], out_processed[q] = saat_topk(postings, seg_start, seg_impact, seg_ptr, q_terms[a:b], q_weights[a:b], k,
                                               budget, acc, touched, hist, bits, skips, skip_ptr, post_impact, warmup,
                                               lookup_cost, slack, out_docs[q], out_vals[q])


def brute_force_scores(postings, seg_start, seg_impact, seg_ptr, terms, weights, num_docs):
    """Reference: dense integer scores of every document (numpy, no pruning)."""
    scores = np.zeros(num_docs, np.int64)
    for t, w in zip(terms, weights):
        for s in range(seg_ptr[t], seg_ptr[t + 1]):
            a0, a1 = seg_start[s], seg_start[s + 1]
            np.add.at(scores, postings[a0:a1].astype(np.int64), int(w) * int(seg_impact[s]))
    return scores
