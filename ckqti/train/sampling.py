"""RankNet training examples with the published NDRM sampling (seed paper 002, SPEC).

Per query, four documents:

* a relevant document from the first-stage top-100 (label 2), one non-relevant candidate
  from that top-100 (label 1) and two random collection documents (label 0): 5 ordered
  pairs with a higher label (2>1, 2>0, 2>0, 1>0, 1>0);
* if no relevant document is in the top-100: one candidate (label 1) and three random
  documents (label 0): 3 pairs.

``negatives=n`` (an option, not the paper's: the published sampling is ``n = 1``) draws ``n``
distinct non-relevant candidates instead of one (with repeats only when the top-100 holds
fewer), so an example holds ``n + 3`` documents: more of the first stage's hard negatives
per query, for collections with few training queries.

Random documents exclude the query's relevant documents and the documents already picked;
they may come from the top-100 (the collection is sampled uniformly). A query without any
candidate is skipped. Sampling is driven by a :class:`numpy.random.Generator`, so an epoch's
examples are a function of its seed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

LABELS_WITH_RELEVANT = (2, 1, 0, 0)
LABELS_WITHOUT_RELEVANT = (1, 0, 0, 0)


@dataclass(frozen=True)
class Example:
    """One query's training documents (collection indices) and their labels."""

    qid: str
    docs: tuple[int, ...]
    labels: tuple[int, ...]


def ranknet_pairs(labels: Sequence[int]) -> list[tuple[int, int]]:
    """Every ordered pair ``(i, j)`` of positions with ``labels[i] > labels[j]``."""
    return [(i, j) for i, a in enumerate(labels) for j, b in enumerate(labels) if a > b]


def random_documents(
    count: int, num_docs: int, exclude: Iterable[int], rng: np.random.Generator
) -> list[int]:
    """``count`` distinct documents drawn uniformly from ``range(num_docs)`` minus ``exclude``."""
    banned = set(exclude)
    if num_docs - sum(1 for d in banned if 0 <= d < num_docs) < count:
        raise ValueError(f"cannot draw {count} random documents from {num_docs} with {len(banned)} excluded")
    picked: list[int] = []
    while len(picked) < count:
        d = int(rng.integers(num_docs))
        if d not in banned:
            banned.add(d)
            picked.append(d)
    return picked


def labels_of(negatives: int, with_relevant: bool) -> tuple[int, ...]:
    """An example's labels with ``negatives`` first-stage candidates (``negatives = 1``: the published ones)."""
    return (2, *(1,) * negatives, 0, 0) if with_relevant else (*(1,) * negatives, 0, 0, 0)


def docs_per_example(negatives: int = 1) -> int:
    """Documents in every example: ``negatives + 3`` (4 with the published sampling)."""
    return negatives + 3


def sample_example(
    qid: str, relevant: frozenset[int], candidates: Sequence[int], num_docs: int, rng: np.random.Generator,
    negatives: int = 1,
) -> Example | None:
    """One query's example (see the module docstring); None when the query has no candidate."""
    if negatives < 1:
        raise ValueError(f"negatives must be >= 1, got {negatives}")
    if not candidates:
        return None
    positives = [d for d in candidates if d in relevant]
    pool = [d for d in candidates if d not in relevant]
    if not pool:  # every candidate is relevant: nothing non-relevant to contrast with in the top-100
        return None
    pos = [positives[int(rng.integers(len(positives)))]] if positives else []  # drawn first: the published stream
    negs = _draw(pool, negatives, rng)
    extra = random_documents(3 - len(pos), num_docs, relevant | {*pos, *negs}, rng)
    return Example(qid, (*pos, *negs, *extra), labels_of(negatives, bool(pos)))


def _draw(pool: Sequence[int], n: int, rng: np.random.Generator) -> list[int]:
    """``n`` of ``pool``: distinct when it holds ``n``; one draw keeps the published sampling's stream."""
    if n == 1:
        return [pool[int(rng.integers(len(pool)))]]
    return [pool[int(i)] for i in rng.choice(len(pool), size=n, replace=len(pool) < n)]


def sample_epoch(
    qids: Sequence[str],
    relevant: Mapping[str, frozenset[int]],
    candidates: Mapping[str, Sequence[int]],
    num_docs: int,
    rng: np.random.Generator,
    negatives: int = 1,
) -> list[Example]:
    """One example per query (queries without candidates skipped), in a shuffled order."""
    examples = []
    for qid in qids:
        ex = sample_example(qid, relevant.get(qid, frozenset()), candidates.get(qid, ()), num_docs, rng, negatives)
        if ex is not None:
            examples.append(ex)
    order = rng.permutation(len(examples))
    return [examples[i] for i in order]
