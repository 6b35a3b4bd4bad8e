"""TK: shapes, masking, explanations, gradient flow and learning on real SciFact text."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch

from ckqti.models.tk import TK, TKConfig
from ckqti.text import Analyzer
from ckqti.vocab import Vocabulary

DATA = Path(__file__).resolve().parents[3] / ".." / "shared" / "data"


def scifact_triples(n: int, max_doc_terms: int = 120) -> tuple[list[list[str]], list[list[str]], list[list[str]]]:
    """``n`` (query, relevant abstract, another query's relevant abstract) from SciFact train, analyzed."""
    if not DATA.is_dir():
        pytest.skip("../shared/data is not present")
    sf = DATA / "scifact"
    queries = {d["_id"]: d["text"] for d in map(json.loads, (sf / "queries.jsonl").read_text().splitlines())}
    pairs, seen = [], set()
    for line in (sf / "qrels" / "train.tsv").read_text().splitlines()[1:]:
        qid, did, _ = line.split("\t")
        if qid not in seen:
            seen.add(qid)
            pairs.append((qid, did))
        if len(pairs) == n + 1:
            break
    wanted = {did for _, did in pairs}
    docs = {}
    for d in map(json.loads, (sf / "corpus.jsonl").read_text().splitlines()):
        if d["_id"] in wanted:
            docs[d["_id"]] = f"{d['title']} {d['text']}"
    an = Analyzer()
    qs = [an(queries[q]) for q, _ in pairs[:n]]
    pos = [an(docs[d])[:max_doc_terms] for _, d in pairs[:n]]
    neg = [an(docs[d])[:max_doc_terms] for _, d in pairs[1: n + 1]]
    return qs, pos, neg


def id_batch(vocab: Vocabulary, texts: list[list[str]]) -> torch.Tensor:
    width = max(len(t) for t in texts)
    out = torch.zeros(len(texts), width, dtype=torch.long)
    for i, t in enumerate(texts):
        out[i, : len(t)] = torch.tensor(vocab.ids(t))
    return out


def tiny(**kw) -> TKConfig:
    base = dict(vocab_size=60, embedding_dim=16, num_layers=2, num_heads=2, ff_dim=12, max_doc_length=40)
    base.update(kw)
    return TKConfig(**base)


def random_batch(b: int = 3, q: int = 5, d: int = 30, vocab: int = 60) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    qi = torch.randint(2, vocab, (b, q), generator=g)
    di = torch.randint(2, vocab, (b, d), generator=g)
    qi[1, 3:] = 0
    di[1, 12:] = 0
    return qi, di


def test_config_is_validated():
    with pytest.raises(ValueError):
        tiny(num_heads=3)  # 16 not divisible by 3
    with pytest.raises(ValueError):
        tiny(vocab_size=1)
    with pytest.raises(ValueError):
        tiny(kernel_sigma=0.0)
    with pytest.raises(ValueError):
        TK(tiny(), embeddings=torch.zeros(10, 16))
    saved = json.loads(json.dumps(dataclasses.asdict(tiny())))  # a checkpoint round trip
    assert TKConfig(**saved) == tiny()


def test_output_shape_and_finite():
    torch.manual_seed(0)
    model = TK(tiny())
    q, d = random_batch()
    s = model(q, d)
    assert s.shape == (3,)
    assert torch.isfinite(s).all()


def test_initial_embedding_matrix_is_used():
    w = torch.randn(60, 16)
    model = TK(tiny(train_embeddings=False), embeddings=w)
    assert torch.equal(model.embedding.weight[1:], w[1:])
    assert torch.count_nonzero(model.embedding.weight[0]) == 0
    assert not model.embedding.weight.requires_grad


def test_padding_invariance():
    torch.manual_seed(0)
    model = TK(tiny()).eval()
    q, d = random_batch()
    with torch.no_grad():
        base = model(q, d)
        padded = model(torch.nn.functional.pad(q, (0, 4)), torch.nn.functional.pad(d, (0, 9)))
        alone = model(q[1:2, :3], d[1:2, :12])  # row 1 without any padding
    torch.testing.assert_close(padded, base, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(alone, base[1:2], atol=1e-5, rtol=1e-5)


def test_a_document_encoded_once_scores_every_query_as_forward():
    """A reranker encodes each document once for all its queries (:meth:`TK.encode_document`, in a batch of
    other documents) and scores each query against it (:meth:`TK.score_encoded`): forward's scores, with
    the caps, idf weights and the explicit channel."""
    torch.manual_seed(0)
    model = TK(tiny(max_doc_length=20, max_query_length=4, term_weights="idf", explicit=True)).eval()
    model.set_collection(Vocabulary.build([[f"w{i}" for i in range(58)], ["w1", "w2"]]))
    q, d = random_batch(q=6)
    with torch.no_grad():
        docs = model.encode_document(d.flip(0))  # [3, 20, D]: the cap applied, in another batch order
        queries = model.encode_query(q)
        for j in range(3):  # every query against document j
            doc = docs[2 - j].expand(3, -1, -1)
            score = model.score_encoded(q, queries, d[j].expand(3, -1), doc)
            torch.testing.assert_close(score, model(q, d[j].expand(3, -1)), atol=1e-6, rtol=1e-5)
    assert docs.shape == (3, 20, 16) and queries.shape == (3, 4, 16)


def test_document_is_capped_at_max_doc_length():
    torch.manual_seed(0)
    model = TK(tiny(max_doc_length=20)).eval()
    q, d = random_batch(d=30)
    changed = d.clone()
    changed[:, 20:] = 7
    with torch.no_grad():
        torch.testing.assert_close(model(q, changed), model(q, d))
        changed[0, 5] = 9 if d[0, 5] != 9 else 8
        assert not torch.allclose(model(q, changed)[0], model(q, d)[0])


def test_query_is_capped_at_max_query_length():
    """SPEC: query cap (30 by default): terms past it are not read."""
    torch.manual_seed(0)
    model = TK(tiny(max_query_length=3)).eval()
    q, d = random_batch(q=6)
    with torch.no_grad():
        torch.testing.assert_close(model(q, d), model(q[:, :3], d))
        assert model.explain(q, d).query_mask.shape == (3, 3)


def test_explanation_adds_up_to_the_score():
    torch.manual_seed(0)
    model = TK(tiny()).eval()
    q, d = random_batch()
    with torch.no_grad():
        e = model.explain(q, d)
        s = model(q, d)
    torch.testing.assert_close(e.score, s)
    torch.testing.assert_close(e.term_kernel_scores.sum((1, 2)), s, atol=1e-6, rtol=1e-5)
    k = len(model.config.kernel_mus)
    assert e.term_kernel_scores.shape == (3, 5, k)
    # padded query terms contribute nothing; padded document terms have no kernel
    assert torch.count_nonzero(e.term_kernel_scores[1, 3:]) == 0
    assert (e.doc_term_kernel[1, 12:] == -1).all()
    assert ((e.doc_term_kernel[1, :12] >= 0) & (e.doc_term_kernel[1, :12] < k)).all()
    assert (e.closest_kernel[1, 3:] == -1).all()
    # the closest kernel is the one whose mu is nearest to the cosine
    c, kk = e.cosine[0, 0, 0], e.closest_kernel[0, 0, 0]
    assert kk == (c - e.kernel_mus).abs().argmin()


def test_idf_term_weights_scale_each_query_terms_contribution():
    """``term_weights="idf"``: with every idf 1 the scores are the plain model's; a one-term
    query's score scales with its term's idf (both branches are linear in it); the explanation
    still adds up; unknown and padding ids weigh 0; sizes and names are checked."""
    q, d = random_batch()
    torch.manual_seed(0)
    plain = TK(tiny()).eval()
    torch.manual_seed(0)
    weighted = TK(tiny(term_weights="idf")).eval()
    with torch.no_grad():
        torch.testing.assert_close(weighted(q, d), plain(q, d))  # idf starts at 1
        one = q[:, :1]
        base = weighted(one, d)
        weighted.idf[one[:, 0]] = 2.5
        torch.testing.assert_close(weighted(one, d), 2.5 * base)
        weighted.idf[q[0, 1]] = 0.5
        e = weighted.explain(q, d)
        torch.testing.assert_close(e.term_kernel_scores.sum((1, 2)), weighted(q, d), atol=1e-6, rtol=1e-5)
    vocab = Vocabulary.build([["gene", "cell"], ["cell", "tumor"], ["gene"]])
    model = TK(tiny(vocab_size=len(vocab), term_weights="idf"))
    model.set_collection(vocab)
    assert torch.allclose(model.idf, torch.as_tensor(vocab.idf(), dtype=torch.float32))
    assert model.idf[0] == model.idf[1] == 0  # padding and the unknown id
    double = TK(tiny(vocab_size=len(vocab), term_weights="idf")).double()
    double.set_collection(vocab)  # in the model's dtype, as NDRM2's idf (it was rounded to float32)
    assert double.idf.tolist() == torch.as_tensor(vocab.idf(), dtype=torch.float64).tolist()
    with pytest.raises(ValueError, match="vocabulary has"):
        TK(tiny(term_weights="idf")).set_collection(vocab)
    with pytest.raises(ValueError, match="term_weights"):
        tiny(term_weights="bm25")
    TK(tiny()).set_collection(vocab)  # no idf weights: nothing to take, whatever the size


def test_gradients_reach_every_trainable_parameter():
    torch.manual_seed(0)
    model = TK(tiny())
    q, d = random_batch()
    model(q, d).sum().backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.count_nonzero(p.grad) > 0, name


def test_adam_lowers_margin_loss_on_scifact():
    qs, pos, neg = scifact_triples(6, max_doc_terms=80)
    vocab = Vocabulary.build(qs + pos + neg)
    q, dp, dn = id_batch(vocab, qs), id_batch(vocab, pos), id_batch(vocab, neg)
    torch.manual_seed(0)
    model = TK(TKConfig(vocab_size=len(vocab), embedding_dim=32, num_heads=4, ff_dim=32, max_doc_length=80))
    opt = torch.optim.Adam(model.parameter_groups(lr_encoder=1e-3, lr_rest=1e-2))

    def loss() -> torch.Tensor:
        return torch.relu(1 - model(q, dp) + model(q, dn)).mean()

    first = loss().item()
    for _ in range(12):
        opt.zero_grad()
        loss().backward()
        opt.step()
    assert loss().item() < 0.5 * first
