"""Which (term, document) pairs the impact scorer keeps for a latent model."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
import torch

from ckqti.models.ndrm import NDRMConfig, build_ndrm
from ckqti.threads import ThreadChooser
from ckqti.vocab import Vocabulary
from indexer.impacts import ImpactConfig, ImpactScorer, length_batches, pad_batch


def corpus(num_docs: int = 30, vocab: int = 200, length: int = 25, seed: int = 0) -> list[list[str]]:
    rng = np.random.default_rng(seed)
    return [[f"w{t}" for t in rng.integers(0, vocab, length)] for _ in range(num_docs)]


def latent_model(vocab: Vocabulary):
    torch.manual_seed(0)
    config = NDRMConfig(vocab_size=len(vocab), variant="ndrm1", dim=16, num_heads=4, conv_window=5, ff_dim=16,
                        mlp_hidden=16, pool_window=20, pool_stride=10)
    return build_ndrm(config, vocab).eval()


def test_neighbours_are_terms_beyond_the_documents_own():
    docs = corpus()
    vocab = Vocabulary.build(docs)
    model = latent_model(vocab)
    ids = [np.array(vocab.ids(d), np.int64) for d in docs]
    for n in (0, 5, 40):
        scorer = ImpactScorer(model, vocab.df, ImpactConfig(neighbours=n))
        with torch.no_grad():
            enc = model.encode_documents(*pad_batch(ids[:4], 4000, torch.device("cpu")))
            for b in range(4):
                own = set(ids[b].tolist())
                got = set(scorer.candidates(enc, b).tolist())
                extra = got - own
                assert own <= got
                assert len(extra) == n  # own terms never take a neighbour's slot
                assert all(vocab.df[t] >= 2 for t in extra)
                # the extra terms are the nearest non-own candidates by max_j cos(t, d_j)
                cand = scorer._cand_terms.numpy()
                best = (enc.vectors[b][enc.mask[b]] @ scorer._cand_vectors.T).max(0).values.numpy()
                others = [(v, t) for v, t in zip(best, cand) if t not in own]
                others.sort(key=lambda x: -x[0])
                if n:
                    assert min(best[np.searchsorted(cand, t)] for t in extra) >= others[n - 1][0] - 1e-6


def test_dense_latent_offsets_are_medians_and_impacts_what_lies_above_them():
    """A dense latent model's offset c_t is the median of the term's score over the sampled
    documents (here every one of 31: an odd count, one middle value), and a document stores
    ``s(t, d) - c_t`` for its own terms where that is positive (no neighbours asked)."""
    docs = corpus(num_docs=31)
    vocab = Vocabulary.build(docs)
    model = latent_model(vocab)
    ids = [np.array(vocab.ids(d), np.int64) for d in docs]
    scorer = ImpactScorer(model, vocab.df, ImpactConfig(neighbours=0, offset_sample=64))
    offsets = scorer.fit_offsets(ids, len(vocab))
    terms = torch.arange(2, len(vocab))
    with torch.no_grad():  # each document scored alone against every term: [31, V - 2]
        alone = np.stack([model.channel_scores(terms, model.encode_documents(*pad_batch([d], 4000, torch.device("cpu"))))
                          [0, :, 0].numpy() for d in ids])
    assert offsets[:2].tolist() == [0.0, 0.0]
    np.testing.assert_allclose(offsets[2:], np.median(alone, axis=0), rtol=1e-5, atol=1e-6)
    for b, imp in enumerate(scorer.score_batch(ids[:5])):
        above = {t: alone[b, t - 2] - offsets[t] for t in set(ids[b].tolist())}
        want = {t: v for t, v in above.items() if v > 1e-5}
        assert set(want) <= set(imp.lists.tolist()) <= set(above)  # near-zero differences may land either side
        assert want and len(want) < len(above)  # some own terms score under their median: not stored
        got = dict(zip(imp.lists.tolist(), imp.scores.tolist()))
        np.testing.assert_allclose([got[t] for t in want], [want[t] for t in want], rtol=1e-4, atol=1e-5)


def test_gated_latent_model_stores_every_pair_it_scores():
    """With a latent gate, stored impacts plus offsets give back the model's score of every
    (term, document) pair: the index loses nothing but quantization."""
    docs = corpus()
    vocab = Vocabulary.build(docs)
    ids = [np.array(vocab.ids(d), np.int64) for d in docs]
    for variant in ("ndrm1", "ndrm3"):
        torch.manual_seed(0)
        config = NDRMConfig(vocab_size=len(vocab), variant=variant, dim=16, num_heads=4, conv_window=5, ff_dim=16,
                            mlp_hidden=16, pool_window=20, pool_stride=10, latent_gate=0.4)
        model = build_ndrm(config, vocab).eval()
        if variant == "ndrm3":
            with torch.no_grad():
                model.combine.linear.weight.copy_(torch.tensor([[0.5, 1.0]]))
        for impacts in (ImpactConfig(neighbours=3, min_df=5), ImpactConfig(neighbours=0)):  # neither applies to a gate
            check_gated_scorer(model, vocab, ids, impacts)


def check_gated_scorer(model, vocab, ids, impacts):
    """The scorer's impacts plus offsets rebuild the gated ``model``'s score of every pair (see above)."""
    scorer = ImpactScorer(model, vocab.df, impacts)
    offsets = scorer.fit_offsets(ids, len(vocab))
    assert np.all(offsets[2:] == np.float32(model.closed_pair_score()))
    terms = torch.arange(2, len(vocab))
    channels = len(model.impact_channels)
    with torch.no_grad():
        enc = model.encode_documents(*pad_batch(ids[:6], 4000, torch.device("cpu")))
        exact = model.channel_scores(terms, enc).numpy()  # [B, T, C]
    stored_pairs = 0
    for b, imp in enumerate(scorer.score_batch(ids[:6])):
        rebuilt = np.zeros((len(vocab), channels), np.float32)
        rebuilt[imp.lists // channels, imp.lists % channels] = imp.scores
        rebuilt[:, scorer.offset_channel] += offsets
        np.testing.assert_allclose(rebuilt[2:], exact[b], rtol=1e-5, atol=1e-5)
        stored_pairs += len(imp.lists)
        # more than the document's own terms: embedding neighbours open too, whatever their df
        latent_terms = set((imp.lists[imp.lists % channels == scorer.offset_channel] // channels).tolist())
        assert latent_terms > set(ids[b].tolist())
    assert stored_pairs < 6 * (len(vocab) - 2) * channels  # far from every pair


def test_length_batches_sort_each_block_and_cover_every_document_once():
    lengths = np.random.default_rng(1).integers(0, 500, 103)
    batches = list(length_batches(lengths, batch_size=8, block=40))
    assert all(1 <= len(b) <= 8 for b in batches)
    order = np.concatenate(batches)
    assert sorted(order.tolist()) == list(range(103))
    for start in range(0, 103, 40):  # blocks in order, each sorted by length (ties in corpus order)
        part = order[start: start + 40]
        assert set(part.tolist()) == set(range(start, min(start + 40, 103)))
        assert all((lengths[a], a) < (lengths[b], b) for a, b in zip(part, part[1:]))


def test_score_all_gives_each_documents_impacts_in_corpus_order():
    """Batches of similar lengths (the encoder pads little) hand back every document's
    impacts in corpus order, the same as scoring the document alone."""
    rng = np.random.default_rng(2)
    docs = [[f"w{t}" for t in rng.integers(0, 200, n)] for n in rng.integers(1, 120, 20)]
    vocab = Vocabulary.build(docs)
    ids = [np.array(vocab.ids(d), np.int64) for d in docs]
    torch.manual_seed(0)
    config = NDRMConfig(vocab_size=len(vocab), variant="ndrm3", dim=16, num_heads=4, conv_window=5, ff_dim=16,
                        mlp_hidden=16, pool_window=20, pool_stride=10, latent_gate=0.4)
    model = build_ndrm(config, vocab).eval()
    scorer = ImpactScorer(model, vocab.df, ImpactConfig(batch_size=4))
    got = list(scorer.score_all(ids))
    assert len(got) == len(ids)
    for doc, imp in zip(ids, got):
        alone = scorer.score_batch([doc])[0]
        assert imp.lists.tolist() == alone.lists.tolist()
        np.testing.assert_allclose(imp.scores, alone.scores, rtol=1e-5, atol=1e-6)


def test_batched_impacts_equal_document_by_document():
    """The batched path (CUDA's default) keeps the same pairs and scores as the per-document one,
    for an explicit model, a dense latent one with neighbours and gated latent ones; documents of
    different lengths share a batch (padding), one of them empty."""
    rng = np.random.default_rng(3)
    docs = [[f"w{t}" for t in rng.integers(0, 150, n)] for n in [0, *rng.integers(1, 90, 11)]]
    vocab = Vocabulary.build(docs)
    ids = [np.array(vocab.ids(d), np.int64) for d in docs]
    models = {"ndrm2": {}, "ndrm1": {}, "ndrm1-gated": {"latent_gate": 0.3}, "ndrm3-gated": {"latent_gate": 0.3}}
    for name, extra in models.items():
        torch.manual_seed(0)
        config = NDRMConfig(vocab_size=len(vocab), variant=name.split("-")[0], dim=16, num_heads=4, conv_window=5,
                            ff_dim=16, mlp_hidden=16, pool_window=20, pool_stride=10, score_chunk_elements=4096, **extra)
        model = build_ndrm(config, vocab).eval()
        if name.startswith("ndrm3"):
            with torch.no_grad():
                model.combine.linear.weight.copy_(torch.tensor([[0.5, 1.0]]))
        one, many = (ImpactScorer(model, vocab.df, ImpactConfig(batch_size=5, neighbours=4, batched=b)) for b in (False, True))
        assert not one.batched and many.batched
        offsets = one.fit_offsets(ids, len(vocab))
        many.offsets = offsets.copy()
        if name == "ndrm1":
            assert np.any(offsets[2:] != 0)  # dense latent: offsets are taken off
        for start in range(0, len(ids), 5):
            batch = ids[start: start + 5]
            for a, b in zip(one.score_batch(batch), many.score_batch(batch)):
                da, db = dict(zip(a.lists.tolist(), a.scores)), dict(zip(b.lists.tolist(), b.scores))
                # only float rounding differs: a pair at its term's offset (the median) may land on either side of 0
                assert all({**da, **db}[k] < 1e-5 for k in set(da) ^ set(db)), name
                common = sorted(set(da) & set(db))
                np.testing.assert_allclose([da[k] for k in common], [db[k] for k in common], rtol=1e-5, atol=1e-6)
        assert sum(len(x.lists) for x in many.score_batch(ids[1:6])) > 0


def test_explicit_models_score_a_batch_at_once_by_default_with_the_same_bits(monkeypatch):
    """NDRM2's impacts are exact elementwise arithmetic, so the batched path gives the per-document
    path's bits, and by default it is taken on a CPU too (a document's small tensor operations made a
    Vaswani NDRM2 build's scoring 6x slower); its candidates, a document's own terms, come from the
    sorted ids, without a ``[B, V]`` mask. A latent model still scores document by document on a CPU."""
    rng = np.random.default_rng(5)
    docs = [[f"w{t}" for t in rng.integers(0, 300, n)] for n in [0, 3, *rng.integers(1, 120, 14)]]
    docs[1] = ["w1", "w1", "w1"]  # one term repeated
    vocab = Vocabulary.build(docs)
    ids = [np.array(vocab.ids(d), np.int64) for d in docs]
    ids[2] = np.array([1, 1, *ids[2][:1]], np.int64)  # unknown terms (id 1) are never candidates
    model = build_ndrm(NDRMConfig(vocab_size=len(vocab), variant="ndrm2", score_chunk_elements=4096), vocab).eval()
    default = ImpactScorer(model, vocab.df, ImpactConfig(batch_size=6))
    assert default.batched
    one = ImpactScorer(model, vocab.df, ImpactConfig(batch_size=6, batched=False))
    monkeypatch.setattr(ImpactScorer, "candidate_mask", lambda self, enc: pytest.fail("a [B, V] mask was built"))
    got, want = list(default.score_all(ids)), list(one.score_all(ids))
    assert [a.lists.tolist() for a in got] == [b.lists.tolist() for b in want]
    assert all(np.array_equal(a.scores, b.scores) for a, b in zip(got, want))
    assert got[1].lists.size == 1 and got[0].lists.size == 0
    assert not ImpactScorer(latent_model(vocab), vocab.df, ImpactConfig()).batched


def test_a_batch_is_scored_in_inference_mode_with_the_bits_of_no_grad():
    """A batch's scoring runs in ``torch.inference_mode`` (no autograd bookkeeping for a document's few hundred
    small tensor operations: a sixth of the per-document scoring time of the bundled sample) and gives the
    bits the same code gives under ``no_grad``, for an explicit, a dense latent and a gated latent model;
    what comes back holds no tensor."""
    rng = np.random.default_rng(7)
    docs = [[f"w{t}" for t in rng.integers(0, 150, n)] for n in [0, *rng.integers(1, 90, 9)]]
    vocab = Vocabulary.build(docs)
    ids = [np.array(vocab.ids(d), np.int64) for d in docs]
    for name, extra in (("ndrm2", {}), ("ndrm1", {}), ("ndrm3", {"latent_gate": 0.3})):
        torch.manual_seed(0)
        config = NDRMConfig(vocab_size=len(vocab), variant=name, dim=16, num_heads=4, conv_window=5, ff_dim=16,
                            mlp_hidden=16, pool_window=20, pool_stride=10, **extra)
        model = build_ndrm(config, vocab).eval()
        scorer = ImpactScorer(model, vocab.df, ImpactConfig(batch_size=5, neighbours=4))
        scorer.fit_offsets(ids, len(vocab))
        modes: list[bool] = []

        def encode(*args, encode=model.encode_documents, modes=modes):
            modes.append(torch.is_inference_mode_enabled())
            return encode(*args)

        model.encode_documents = encode
        for start in range(0, len(ids), 5):
            batch = ids[start: start + 5]
            got = scorer.score_batch(batch)
            with torch.no_grad():
                want = ImpactScorer.score_batch.__wrapped__(scorer, batch)
            assert [a.lists.tolist() for a in got] == [b.lists.tolist() for b in want], name
            assert all(np.array_equal(a.scores, b.scores) for a, b in zip(got, want)), name
            assert all(isinstance(a.lists, np.ndarray) and isinstance(a.scores, np.ndarray) for a in got)
        assert modes and modes[::2] == [True] * len(modes[::2]) and modes[1::2] == [False] * len(modes[1::2]), name


def test_query_vectors_are_projected_once_per_scorer_not_per_document():
    """A latent model's query projection runs once, for the whole vocabulary, when the scorer is made;
    scoring documents reads those vectors (the per-document projection of ~200 candidate terms took 20 ms
    a document on 2 busy cores), and the impacts are the ones of the model's own vectors."""
    docs = corpus(num_docs=12)
    vocab = Vocabulary.build(docs)
    ids = [np.array(vocab.ids(d), np.int64) for d in docs]
    for name, extra in (("ndrm1", {}), ("ndrm3", {"latent_gate": 0.3})):
        torch.manual_seed(0)
        model = build_ndrm(NDRMConfig(vocab_size=len(vocab), variant=name, dim=16, num_heads=4, conv_window=5,
                                      ff_dim=16, mlp_hidden=16, pool_window=20, pool_stride=10, **extra), vocab).eval()
        latent = model if name == "ndrm1" else model.latent
        calls: list[int] = []
        latent.query_proj.register_forward_hook(lambda module, args, out, calls=calls: calls.append(args[0].shape[0]))
        scorer = ImpactScorer(model, vocab.df, ImpactConfig(batch_size=4, neighbours=5))
        assert calls == [len(vocab)]  # the table: every term at once
        with torch.no_grad():
            enc = model.encode_documents(*pad_batch(ids[:4], 4000, torch.device("cpu")))
            own = [scorer.document_impacts(enc, b, r) for b, r in enumerate(scorer.reached(enc) or [None] * 4)]
        calls.clear()
        for a, b in zip(scorer.score_batch(ids[:4]), own):
            assert calls == []  # no projection while scoring
            assert a.lists.tolist() == b.lists.tolist(), name
            np.testing.assert_allclose(a.scores, b.scores, rtol=1e-5, atol=1e-6)


def test_a_model_scoring_nan_stops_the_build():
    """NaN impacts would be dropped as not positive, leaving an index without postings (a model
    trained into NaN weights did exactly that): both scoring paths refuse them."""
    import pytest

    from ckqti.errors import CkqtiError

    docs = corpus(num_docs=6)
    vocab = Vocabulary.build(docs)
    ids = [np.array(vocab.ids(d), np.int64) for d in docs]
    model = build_ndrm(NDRMConfig(vocab_size=len(vocab), variant="ndrm2"), vocab).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.fill_(float("nan"))
    for batched in (False, True):
        scorer = ImpactScorer(model, vocab.df, ImpactConfig(batch_size=3, batched=batched))
        with pytest.raises(CkqtiError, match="NaN or infinite"):
            scorer.score_batch(ids[:3])


def test_documents_are_cut_at_max_doc_terms():
    """A document is scored on its first ``max_doc_terms`` terms (SPEC: 4,000), with its whole length
    (NDRM's length normalisation reads the untruncated length): terms that occur only after the cut
    are not stored, in either scoring path."""
    head = [f"h{i}" for i in range(10)]
    docs = [head + [f"t{i}" for i in range(20)], head[:5] + ["t0", "h1"]]
    vocab = Vocabulary.build(docs)
    ids = [np.array(vocab.ids(d), np.int64) for d in docs]
    model = build_ndrm(NDRMConfig(vocab_size=len(vocab), variant="ndrm2"), vocab).eval()
    for batched in (False, True):
        imp = ImpactScorer(model, vocab.df, ImpactConfig(max_doc_terms=10, batched=batched)).score_batch(ids)[0]
        assert sorted(imp.lists.tolist()) == sorted(set(ids[0][:10].tolist()))
        with torch.no_grad():  # the first 10 terms, the length of all 30
            enc = model.encode_documents(torch.from_numpy(ids[0][None, :10]), torch.tensor([30.0]))
            want = model.channel_scores(torch.from_numpy(imp.lists.astype(np.int64)), enc)[0, :, 0].numpy()
        np.testing.assert_allclose(imp.scores, want, rtol=1e-6)


def test_a_pair_scoring_exactly_its_terms_offset_is_not_stored():
    """``DocImpacts.scores`` are > 0 in both scoring paths: with offsets fitted on all 31 documents (an
    odd count), each term's median document scores exactly its offset, a difference of 0, which is an
    unstored pair (it scores c_t), not a posting."""
    docs = corpus(num_docs=31)
    vocab = Vocabulary.build(docs)
    model = latent_model(vocab)
    ids = [np.array(vocab.ids(d), np.int64) for d in docs]
    for batched in (False, True):
        scorer = ImpactScorer(model, vocab.df, ImpactConfig(neighbours=0, offset_sample=64, batched=batched))
        offsets = scorer.fit_offsets(ids, len(vocab))
        terms = torch.arange(2, len(vocab))
        zeros = 0
        for doc, imp in zip(ids, scorer.score_batch(ids)):
            with torch.no_grad():
                exact = model.channel_scores(terms, model.encode_documents(*pad_batch([doc], 4000, torch.device("cpu"))))
            own = np.unique(doc)
            zeros += int(np.count_nonzero(exact[0, own - 2, 0].numpy() - offsets[own] == 0))
            assert (imp.scores > 0).all(), batched
        assert zeros > 0  # the case arises here


def test_a_gated_pair_at_exactly_the_threshold_is_a_candidate():
    """The gate opens a pair whose ``max_j cos(t, d_j)`` equals tau (``>=``, as :class:`LatentGate`), so a
    candidate term at exactly the threshold is scored, in the batched path too."""
    docs = corpus(num_docs=4)
    vocab = Vocabulary.build(docs)
    ids = [np.array(vocab.ids(d), np.int64) for d in docs]
    torch.manual_seed(0)
    config = NDRMConfig(vocab_size=len(vocab), variant="ndrm1", dim=16, num_heads=4, conv_window=5, ff_dim=16,
                        mlp_hidden=16, pool_window=20, pool_stride=10, latent_gate=0.4)
    scorer = ImpactScorer(build_ndrm(config, vocab).eval(), vocab.df, ImpactConfig(batched=True))
    with torch.no_grad():
        enc = scorer.model.encode_documents(*pad_batch(ids[:1], 4000, torch.device("cpu")))
        best = scorer.max_cosines(enc)[0]  # [V']
        others = ~torch.isin(scorer._cand_terms, torch.from_numpy(ids[0]))
        k = int(torch.nonzero(others)[0])  # a term the document does not hold
        scorer.gate = float(best[k])  # the threshold at exactly its cosine
        mask = scorer.candidate_mask(enc)[0]
    assert mask[scorer._cand_terms[k]]
    assert not mask[scorer._cand_terms[others & (best < best[k])]].any()


def index_files(path: Path) -> dict[str, bytes]:
    """Every file of an index but its manifest (which records the build's seconds)."""
    return {str(f.relative_to(path)): f.read_bytes() for f in sorted(path.rglob("*"))
            if f.is_file() and f.name != "manifest.json"}


def test_an_index_built_switching_threads_every_batch_is_the_one_thread_index(scifact_small, tmp_path, monkeypatch):
    """The bundled NDRM3 (a latent model: encoder, cosine bound, per-document channel scores) over
    200 abstracts in batches of 16, built on one thread and built with torch's count switching
    between 2 and 1 at every batch: the same index, byte for byte; torch's count is set back."""
    from ckqti import api

    corpus = tmp_path / "corpus.jsonl"
    with open(scifact_small) as f:
        corpus.write_text("".join(itertools.islice(f, 200)))
    api.index(corpus, tmp_path / "one", batch_size=16, progress=False)  # the tests' one torch thread: nothing to choose

    used = []
    counts = itertools.cycle([2, 1])

    def alternate(self) -> int:
        n = next(counts)
        used.append((n, torch.get_num_threads()))
        return n

    recorded = []
    record = ThreadChooser.record
    monkeypatch.setattr(ThreadChooser, "next", alternate)
    monkeypatch.setattr(ThreadChooser, "record", lambda self, n, s, u: (recorded.append(n), record(self, n, s, u)))
    torch.set_num_threads(2)  # restored to the tests' one thread by the conftest fixture
    api.index(corpus, tmp_path / "switching", batch_size=16, progress=False)
    assert torch.get_num_threads() == 2
    assert len(used) == 13 and recorded == [n for n, _ in used] and {n for n, _ in used} == {1, 2}
    assert all(before == 2 for _, before in used)  # each batch's count set back after it
    assert index_files(tmp_path / "switching") == index_files(tmp_path / "one")
