import numpy as np
import pytest

from ckqti.train.data import candidate_indices, load_collection, relevant_docs
from ckqti.train.sampling import (
    LABELS_WITH_RELEVANT,
    LABELS_WITHOUT_RELEVANT,
    docs_per_example,
    labels_of,
    random_documents,
    ranknet_pairs,
    sample_epoch,
    sample_example,
)


def test_pairs_of_the_published_labels():
    assert ranknet_pairs(LABELS_WITH_RELEVANT) == [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3)]
    assert ranknet_pairs(LABELS_WITHOUT_RELEVANT) == [(0, 1), (0, 2), (0, 3)]
    assert ranknet_pairs((0, 0, 0)) == []


def test_relevant_in_top_100_gives_one_relevant_one_candidate_two_random():
    rng = np.random.default_rng(0)
    relevant = frozenset({7, 42})
    candidates = [3, 42, 9, 11]
    for _ in range(200):
        ex = sample_example("q", relevant, candidates, 50, rng)
        assert ex.labels == (2, 1, 0, 0)
        assert ex.docs[0] == 42  # the only relevant document among the candidates
        assert ex.docs[1] in (3, 9, 11)
        assert len(set(ex.docs)) == 4
        assert not set(ex.docs[2:]) & relevant
        assert all(0 <= d < 50 for d in ex.docs)


def test_no_relevant_in_top_100_gives_one_candidate_three_random():
    rng = np.random.default_rng(1)
    relevant = frozenset({5})
    for _ in range(200):
        ex = sample_example("q", relevant, [1, 2, 3], 12, rng)
        assert ex.labels == (1, 0, 0, 0)
        assert ex.docs[0] in (1, 2, 3)
        assert len(set(ex.docs)) == 4 and 5 not in ex.docs


def test_more_negatives_are_distinct_top_100_non_relevant_documents():
    rng = np.random.default_rng(2)
    relevant = frozenset({7, 42})
    candidates = [3, 42, 9, 11, 20, 21, 22]
    for _ in range(100):
        ex = sample_example("q", relevant, candidates, 60, rng, negatives=4)
        assert ex.labels == labels_of(4, True) == (2, 1, 1, 1, 1, 0, 0)
        assert len(ex.docs) == docs_per_example(4) == 7 and len(set(ex.docs)) == 7
        assert ex.docs[0] == 42 and set(ex.docs[1:5]) <= {3, 9, 11, 20, 21, 22}
        assert not set(ex.docs[1:]) & relevant
    # fewer non-relevant candidates than asked: repeats, never a relevant document
    ex = sample_example("q", relevant, [42, 3, 9], 60, rng, negatives=4)
    assert set(ex.docs[1:5]) <= {3, 9} and ex.labels == labels_of(4, True)
    ex = sample_example("q", relevant, [3, 9, 11, 20], 60, rng, negatives=2)
    assert ex.labels == labels_of(2, False) == (1, 1, 0, 0, 0) and len(set(ex.docs)) == 5
    with pytest.raises(ValueError):
        sample_example("q", relevant, candidates, 60, rng, negatives=0)


def test_one_negative_draws_the_published_stream():
    """negatives=1 draws one integer for the relevant document, one for the candidate, then the random
    documents: the stream of the sampling before the option, so earlier runs sample as they did."""
    relevant, candidates = frozenset({4, 8}), [8, 1, 2, 3, 5, 6]
    for seed in range(20):
        ex = sample_example("q", relevant, candidates, 40, np.random.default_rng(seed))
        rng = np.random.default_rng(seed)
        pos = [8][int(rng.integers(1))]
        neg = [1, 2, 3, 5, 6][int(rng.integers(5))]
        extra = random_documents(2, 40, relevant | {pos, neg}, rng)
        assert ex.docs == (pos, neg, *extra)


def test_queries_without_usable_candidates_are_skipped():
    rng = np.random.default_rng(0)
    assert sample_example("q", frozenset({1}), [], 10, rng) is None
    assert sample_example("q", frozenset({1, 2}), [1, 2], 10, rng) is None  # nothing non-relevant to contrast


def test_random_documents_are_distinct_and_refuse_impossible_draws():
    rng = np.random.default_rng(0)
    picked = random_documents(5, 6, [2], rng)
    assert sorted(picked) == [0, 1, 3, 4, 5]
    with pytest.raises(ValueError):
        random_documents(3, 4, [0, 1], rng)


def test_epoch_is_a_function_of_its_seed():
    relevant = {f"q{i}": frozenset({i}) for i in range(20)}
    candidates = {f"q{i}": list(range(i, i + 10)) for i in range(20)}
    qids = sorted(relevant)
    a = sample_epoch(qids, relevant, candidates, 100, np.random.default_rng([0, 1]))
    b = sample_epoch(qids, relevant, candidates, 100, np.random.default_rng([0, 1]))
    c = sample_epoch(qids, relevant, candidates, 100, np.random.default_rng([0, 2]))
    assert a == b and a != c
    assert sorted(e.qid for e in a) == qids


def test_sampling_on_scifact_candidates(tiny_scifact):
    coll = load_collection(tiny_scifact["corpus"])
    index = coll.index()
    rel = relevant_docs(tiny_scifact["qrels"], index)
    cands = candidate_indices({q: tiny_scifact["candidates"][q] for q in tiny_scifact["queries"]}, index, 100)
    examples = sample_epoch(sorted(rel), rel, cands, len(coll), np.random.default_rng(0))
    assert len(examples) == len(rel)
    for ex in examples:
        if ex.labels == LABELS_WITH_RELEVANT:
            assert ex.docs[0] in rel[ex.qid] and ex.docs[0] in cands[ex.qid]
            assert ex.docs[1] in cands[ex.qid] and ex.docs[1] not in rel[ex.qid]
        else:
            assert ex.labels == LABELS_WITHOUT_RELEVANT
            assert not set(cands[ex.qid]) & rel[ex.qid]
        assert not set(ex.docs[1:]) & rel[ex.qid]
    assert sum(ex.labels == LABELS_WITH_RELEVANT for ex in examples) > len(examples) // 2


def test_the_positive_is_drawn_among_every_relevant_candidate():
    """Several relevant documents in the top-100: each is the example's relevant document in turn
    (a sampler that always took the first one would train on one judgement per query)."""
    rng = np.random.default_rng(0)
    relevant, candidates = frozenset({4, 8, 9}), [8, 1, 4, 2, 3]  # 9 is relevant but not a candidate
    drawn = [sample_example("q", relevant, candidates, 40, rng).docs[0] for _ in range(100)]
    assert set(drawn) == {4, 8} and 20 < drawn.count(4) < 80


def test_an_epoch_comes_in_a_shuffled_order():
    """Batches are runs of consecutive examples: the epoch's order is shuffled, not the queries' order."""
    qids = [f"q{i:02d}" for i in range(30)]
    relevant = {q: frozenset({i}) for i, q in enumerate(qids)}
    candidates = {q: [i, i + 1, i + 2] for i, q in enumerate(qids)}
    orders = [[e.qid for e in sample_epoch(qids, relevant, candidates, 100, np.random.default_rng(s))] for s in range(3)]
    assert all(sorted(order) == qids and order != qids for order in orders) and orders[0] != orders[1]
