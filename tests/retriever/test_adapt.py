import numpy as np
import pytest

from ckqti.vocab import Vocabulary
from indexer.build import write_index
from indexer.quantize import Quantizer
from indexer.shards import ImpactPostings
from retriever.adapt import channel_spreads, matched_channel_weights
from retriever.index import Index


def two_channel_index(path, triples, num_docs, steps=(0.5, 2.0), shards=1):
    """An index of ``(term, channel, doc, impact)`` triples over a "one" and an "idf" channel."""
    t = np.array([x[0] for x in triples])
    terms = sorted(set(t.tolist()))
    vocab_size = max(terms) + 1
    df = np.bincount(t[np.array([x[1] for x in triples]) == 1], minlength=vocab_size)
    vocab = Vocabulary([f"w{i}" for i in range(vocab_size)], df, df.copy(), num_docs, int(df.sum()))
    per = -(-num_docs // shards)
    parts = []
    for s in range(shards):
        rows = [x for x in triples if s * per <= x[2] < (s + 1) * per]
        postings = ImpactPostings(np.array([x[0] * 2 + x[1] for x in rows], np.int32),
                                  np.array([x[2] - s * per for x in rows], np.uint32),
                                  np.array([x[3] for x in rows], np.uint8), channels=2)
        n = min(per, num_docs - s * per)
        parts.append((postings, {"docid": [str(s * per + j) for j in range(n)], "title": [""] * n, "text": [""] * n,
                                 "length": [1] * n}))
    write_index(path, parts, vocab, np.zeros(vocab_size), Quantizer(steps, weights=("one", "idf")),
                {"id": "m", "name": "m"}, {"stemmer": "none", "stopwords": "none", "lowercase": True})
    return Index(path)


def reference_spreads(index, triples, steps=(0.5, 2.0)):
    one = [imp * steps[0] for t, c, d, imp in triples if c == 0]
    idf = [imp * steps[1] * index.idf[t] for t, c, d, imp in triples if c == 1]
    return {"one": float(np.std(one)), "idf": float(np.std(idf))}


@pytest.mark.parametrize("shards", [1, 2])
def test_spreads_are_the_standard_deviations_of_the_stored_contributions(tmp_path, shards):
    rng = np.random.default_rng(0)
    triples = [(t, c, d, int(rng.integers(1, 256))) for t in range(2, 9) for c in (0, 1) for d in range(40)
               if rng.random() < 0.15 * (t - 1)]
    index = two_channel_index(tmp_path / "x", triples, 40, shards=shards)
    got, want = channel_spreads(index), reference_spreads(index, triples)
    assert set(got) == {"one", "idf"}
    for name in got:
        assert got[name] == pytest.approx(want[name], rel=1e-9)


def test_matched_weights_restore_the_source_ratio_and_are_one_on_the_source_itself():
    source = {"one": 2.0, "idf": 4.0}
    assert matched_channel_weights(source, source) == {"one": 1.0}
    target = {"one": 4.0, "idf": 2.0}  # the latent channel spreads twice as wide, the explicit half as wide
    w = matched_channel_weights(source, target)
    assert w == {"one": 0.25}
    assert (w["one"] * target["one"]) / target["idf"] == pytest.approx(source["one"] / source["idf"])
    with pytest.raises(ValueError, match="agree"):
        matched_channel_weights(source, {"one": 1.0})
    with pytest.raises(ValueError, match="positive"):
        matched_channel_weights(source, {"one": 0.0, "idf": 1.0})


def test_a_channel_without_postings_spreads_0_and_gets_no_weight(tmp_path):
    """A channel no posting holds has no spread to restore: 0, which matched_channel_weights refuses
    (not a NaN from dividing by no postings, which passed its check and gave NaN weights)."""
    triples = [(t, 1, d, 10 * t + d) for t in range(2, 5) for d in range(t)]  # the "idf" channel only
    spreads = channel_spreads(two_channel_index(tmp_path / "x", triples, 20))
    assert spreads["one"] == 0.0 and spreads["idf"] > 0
    with pytest.raises(ValueError, match="positive"):
        matched_channel_weights(spreads, {"one": 1.0, "idf": 1.0})


def test_matched_weights_need_the_reference_channel():
    with pytest.raises(ValueError, match="include 'idf'"):
        matched_channel_weights({"one": 1.0}, {"one": 2.0})
    assert matched_channel_weights({"one": 1.0, "x": 2.0}, {"one": 4.0, "x": 1.0}, reference="x") == {"one": 0.125}
