"""Hand-built and random indexes for the kernels' tests, and a search through :func:`retriever.kernel_saat.saat_topk`
that checks its scratch buffers come back zeroed."""

from __future__ import annotations

import numpy as np

from indexer.shards import ImpactPostings, segment_postings
from retriever.kernel_and import EXACT_SLACK, LOOKUP_COST
from retriever.kernel_postings import NO_POST_IMPACT, NO_SKIP_PTR, NO_SKIPS, build_skips
from retriever.kernel_saat import saat_topk


def build(triples, vocab_size):
    t, d, i = (np.array(x) for x in zip(*triples))
    return segment_postings(ImpactPostings(t.astype(np.int32), d.astype(np.uint32), i.astype(np.uint8)), vocab_size)


def search(a, num_docs, terms, weights, k, budget=-1, warmup=8192, acc_dtype=np.uint32, skips=True, lookup_cost=LOOKUP_COST,
           acc_docs=None, flat=False, slack=EXACT_SLACK):
    """``acc_docs``: scratch sized for a larger shard than this one (the kernels' branchy
    accumulation runs beyond BRANCH_FREE_DOCS); ``flat``: per-posting impacts given (the
    warm-up's one loop a posting list), whatever the segments' lengths."""
    post_impact = np.repeat(a["seg_impact"][:-1], np.diff(a["seg_start"])).astype(np.uint8) if flat else NO_POST_IMPACT
    acc = np.zeros(acc_docs or num_docs, acc_dtype)
    touched = np.zeros((acc_docs or num_docs) + 1, np.int64)
    hist = np.zeros(int(np.sum(weights)) * 255 + 2, np.int64)
    bits = np.zeros(num_docs // 64 + 1, np.uint64)
    out = np.full((2, k + 3), -7, np.int64)  # room past k: the kernel must write only its n hits
    count, n = saat_topk(
        a["postings"], a["seg_start"], a["seg_impact"], a["seg_ptr"],
        np.asarray(terms, np.int64), np.asarray(weights, np.int64), k, budget, acc, touched, hist, bits,
        *(build_skips(a["postings"], a["seg_start"]) if skips else (NO_SKIPS, NO_SKIP_PTR)), post_impact, warmup, lookup_cost, slack,
        out[0], out[1],
    )
    assert not acc.any() and not hist.any() and not bits.any(), "scratch buffers must be left zeroed"
    assert 0 <= count <= k and (out[:, count:] == -7).all(), "hits past the count were written"
    return out[0, :count].tolist(), out[1, :count].tolist(), n


# term 2: d0=5, d1=3, d3=3 ; term 3: d1=4, d2=9 ; term 4: d3=1
HAND = [(2, 0, 5), (2, 1, 3), (2, 3, 3), (3, 1, 4), (3, 2, 9), (4, 3, 1)]


def random_index(rng, num_docs=3000, vocab=400, n=60_000, skew=True):
    t = rng.zipf(1.4, n) % (vocab - 2) + 2
    d = rng.integers(0, num_docs, n)
    imp = (rng.geometric(0.05, n) % 255 + 1) if skew else rng.integers(1, 256, n)
    key = np.unique(t.astype(np.int64) * num_docs + d, return_index=True)[1]
    return build(list(zip(t[key], d[key], imp[key])), vocab)
