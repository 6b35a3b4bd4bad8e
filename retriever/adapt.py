"""Channel weights for a new collection, from the spreads of an index's stored impacts.

A multi-channel index (NDRM3: a latent ``"one"`` channel and an explicit ``"idf"`` one) adds its
channels with the weights its model learned on the training collection, where a per-term
BatchNorm set their scales. On another collection a channel's scores can spread more or less than
they did there. :func:`channel_spreads` measures each channel's spread over an index's stored
postings (the standard deviation of the contributions a query term's occurrence would add: the
dequantized impact, times the term's idf for an ``"idf"`` channel) and
:func:`matched_channel_weights` gives the query-time weights (``Searcher(channel_weights=...)``)
that restore the training collection's ratio of spreads, as AdaBN (Li et al., 2016) re-estimates
normalisation statistics on a new domain's unlabelled data. Nothing but the indexes is read: no
labels and no queries.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from retriever.index import Index


def channel_spreads(index: Index) -> dict[str, float]:
    """``{channel name: standard deviation of its contributions over the stored postings}``.

    A posting of term ``t`` in channel ``c`` contributes ``impact * step_c`` (``"one"``) or
    ``impact * step_c * idf_t`` (``"idf"``, the index's current idf).
    """
    quant = index.quantizer
    c = quant.channels
    steps = np.asarray(quant.steps, dtype=np.float64)
    idf_weighted = np.array([w == "idf" for w in quant.weights])
    total = np.zeros(c)
    square = np.zeros(c)
    count = np.zeros(c)
    for shard in index.shards:
        num_segments = shard.seg_ptr[-1]
        lists = np.repeat(np.arange(shard.num_lists), np.diff(shard.seg_ptr))  # [S] list of each segment
        channel = lists % c
        value = shard.seg_impact[:num_segments].astype(np.float64) * steps[channel]
        value = np.where(idf_weighted[channel], value * index.idf[lists // c], value)
        weight = np.diff(shard.seg_start[: num_segments + 1]).astype(np.float64)  # postings per segment
        total += np.bincount(channel, weight * value, minlength=c)
        square += np.bincount(channel, weight * value * value, minlength=c)
        count += np.bincount(channel, weight, minlength=c)
    mean = total / np.maximum(count, 1.0)
    spread = np.sqrt(np.maximum(square / np.maximum(count, 1.0) - mean * mean, 0.0))
    return {name: float(s) for name, s in zip(quant.weights, spread)}


def matched_channel_weights(source: Mapping[str, float], target: Mapping[str, float],
                            reference: str = "idf") -> dict[str, float]:
    """Weights of every channel but ``reference`` (which keeps 1) that give ``target``'s channels
    ``source``'s ratio of spreads: ``(source[c] / target[c]) / (source[ref] / target[ref])``.

    Raises:
        ValueError: the two name other channels, lack ``reference``, or a spread is not positive.
    """
    if set(source) != set(target) or reference not in source:
        raise ValueError(f"channels {sorted(source)} and {sorted(target)} must agree and include {reference!r}")
    if min(*source.values(), *target.values()) <= 0:
        raise ValueError("every channel's spread must be positive")
    base = source[reference] / target[reference]
    return {name: (source[name] / target[name]) / base for name in source if name != reference}
