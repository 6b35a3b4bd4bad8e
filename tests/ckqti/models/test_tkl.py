"""TKL: windowing, packing, region selection, masking, gradient flow and learning on real text."""

from __future__ import annotations

import dataclasses
import itertools
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from ckqti.models.tkl import TKL, Saturation, TKLConfig, join_centres, split_windows, top_regions
from ckqti.text import Analyzer
from ckqti.vocab import Vocabulary

DATA = Path(__file__).resolve().parents[3] / ".." / "shared" / "data"


def tiny(**kw) -> TKLConfig:
    base = dict(vocab_size=60, embedding_dim=16, num_layers=1, num_heads=2, ff_dim=12, max_doc_length=400)
    base.update(kw)
    return TKLConfig(**base)


def random_batch(q: int = 5, d: int = 230, vocab: int = 60) -> tuple[torch.Tensor, torch.Tensor]:
    """4 queries and documents of 230, 83, 7 and 78 tokens."""
    g = torch.Generator().manual_seed(2)
    qi = torch.randint(2, vocab, (4, q), generator=g)
    di = torch.randint(2, vocab, (4, d), generator=g)
    qi[1, 2:] = 0
    di[1, 83:] = 0  # 83 % 40 = 3: the case where the reference formula drops the tail
    di[2, 7:] = 0
    di[3, 78:] = 0  # the third window's left overlap is real, its centre is padding
    return qi, di


def reference_windows(x: torch.Tensor, chunk: int = 40, overlap: int = 5) -> torch.Tensor:
    """The reference code's padding formula and unfold, for comparison."""
    n = x.shape[1]
    pad = chunk + 2 * overlap - ((n - overlap) % chunk) if n > overlap else chunk + overlap - n
    return nn.functional.pad(x, (overlap, pad)).unfold(1, chunk + 2 * overlap, chunk)


@pytest.mark.parametrize("length", [1, 5, 6, 39, 40, 41, 44, 45, 79, 80, 83, 84, 85, 2000])
def test_window_centres_concatenate_to_the_original_order(length):
    x = torch.arange(1, length + 1).unsqueeze(0)  # [1, L], ids 1..L
    w = split_windows(x, 40, 5)
    assert w.shape == (1, -(-length // 40), 50)
    joined = join_centres(w, 5)
    assert torch.equal(joined[0, :length], x[0])
    assert torch.count_nonzero(joined[0, length:]) == 0
    # each window's context is the neighbouring tokens of the original sequence
    for i in range(w.shape[1]):
        lo = i * 40 - 5
        expect = [t if 1 <= t <= length else 0 for t in range(lo + 1, lo + 51)]
        assert w[0, i].tolist() == expect
    if length > 5 and length % 40 in (1, 2, 3, 4):  # the reference makes one window too few
        assert reference_windows(x).shape[1] == w.shape[1] - 1
    else:
        assert torch.equal(reference_windows(x), w)


def test_config_is_validated_and_round_trips():
    with pytest.raises(ValueError):
        tiny(saturation="tanh")
    with pytest.raises(ValueError):
        tiny(chunk_size=0)
    saved = json.loads(json.dumps(dataclasses.asdict(tiny(saturation="log"))))
    assert TKLConfig(**saved) == tiny(saturation="log")


def test_vector_windows_keep_feature_dims():
    x = torch.randn(2, 93, 3)
    w = split_windows(x, 40, 5)
    assert w.shape == (2, 3, 50, 3)
    torch.testing.assert_close(join_centres(w, 5)[:, :93], x)


def test_output_shape_and_finite():
    torch.manual_seed(0)
    model = TKL(tiny())
    q, d = random_batch()
    s = model(q, d)
    assert s.shape == (4,)
    assert torch.isfinite(s).all()
    empty = model(q[:1], torch.zeros(1, 50, dtype=torch.long))
    assert empty.item() == 0.0


def test_all_padding_windows_never_reach_the_encoder():
    torch.manual_seed(0)
    model = TKL(tiny())
    q, d = random_batch()
    d = nn.functional.pad(d, (0, 170))  # 400 tokens: 10 windows per document
    seen = []

    def hook(module, args, kwargs):
        seen.append((args[0].shape[0], kwargs["src_key_padding_mask"]))

    model.contextualizer.register_forward_pre_hook(hook, with_kwargs=True)
    model(q, d)
    assert seen[0][0] == 4  # the queries
    rows, ignore = seen[1]
    lengths = (d != 0).sum(1).tolist()  # 230, 83, 7, 78
    assert rows == sum(-(-n // 40) for n in lengths) == 6 + 3 + 1 + 2
    real = ~ignore[:, 5:45]  # the centre of every encoded window
    assert real.any(1).all()


def test_packed_and_unpacked_give_the_same_scores():
    torch.manual_seed(0)
    packed = TKL(tiny()).eval()
    unpacked = TKL(dataclasses.replace(tiny(), pack_windows=False)).eval()
    unpacked.load_state_dict(packed.state_dict())
    q, d = random_batch()
    d = nn.functional.pad(d, (0, 170))
    with torch.no_grad():
        a, b = packed.explain(q, d), unpacked.explain(q, d)
    torch.testing.assert_close(a.score, b.score, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(a.topography, b.topography, atol=1e-5, rtol=1e-5)


def test_query_and_document_are_capped():
    """SPEC: TKL reads up to ``max_query_length`` query terms (30) and ``max_doc_length`` document
    terms (2,000 in the paper): a longer query or document scores as its first terms."""
    torch.manual_seed(0)
    model = TKL(tiny(max_query_length=3, max_doc_length=100)).eval()
    longer = TKL(tiny(max_query_length=3)).eval()  # the same weights, 400 document terms
    longer.load_state_dict(model.state_dict())
    q, d = random_batch(q=6)  # the first document has 230 terms
    with torch.no_grad():
        capped = model(q[:, :3], d[:, :100])
        torch.testing.assert_close(model(q, d), capped)
        assert not torch.allclose(longer(q[:, :3], d)[0], capped[0])  # the terms past the cap would count


def test_a_document_encoded_once_scores_every_query_as_forward():
    """A reranker encodes each document once for all its queries (:meth:`TKL.encode_document`, in a batch of
    other documents, so with more padding) and scores each query against it (:meth:`TKL.score_encoded`):
    forward's scores, with the caps, idf weights and the explicit channel."""
    torch.manual_seed(0)
    model = TKL(tiny(max_doc_length=100, max_query_length=4, term_weights="idf", explicit=True)).eval()
    model.set_collection(Vocabulary.build([[f"w{i}" for i in range(58)], ["w1", "w2"]]))
    q, d = random_batch(q=6)
    with torch.no_grad():
        docs = model.encode_document(d.flip(0))  # [4, 120, D]: the cap applied, in another batch order
        queries = model.encode_query(q)
        for j in range(4):  # every query against document j
            doc = docs[3 - j].expand(4, -1, -1)
            score = model.score_encoded(q, queries, d[j].expand(4, -1), doc)
            torch.testing.assert_close(score, model(q, d[j].expand(4, -1)), atol=1e-5, rtol=1e-5)
    assert docs.shape == (4, 120, 16) and queries.shape == (4, 4, 16)


def test_query_vectors_are_the_hybrid_mix():
    """``alpha * emb + (1 - alpha) * ctx`` (TK's mix, alpha learned), ctx the Transformer over the
    embeddings plus the query positions; zero at padding."""
    torch.manual_seed(0)
    model = TKL(tiny()).eval()
    with torch.no_grad():
        model.mixer.fill_(0.7)  # away from 0.5, so swapped weights show
        q = torch.tensor([[5, 9, 17, 0], [7, 7, 3, 21]])
        mask = q != 0
        emb = model.embedding.weight[q] * mask.unsqueeze(-1)
        ctx = model.contextualizer(emb + model.query_positions[:4], src_key_padding_mask=~mask)
        expected = (0.7 * emb + 0.3 * ctx) * mask.unsqueeze(-1)
        torch.testing.assert_close(model.encode_query(q), expected)


def test_padding_invariance():
    torch.manual_seed(0)
    model = TKL(tiny()).eval()
    q, d = random_batch()
    with torch.no_grad():
        base = model(q, d)
        padded = model(nn.functional.pad(q, (0, 3)), nn.functional.pad(d, (0, 111)))
        alone = model(q[1:2, :2], d[1:2, :83])
    torch.testing.assert_close(padded, base, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(alone, base[1:2], atol=1e-5, rtol=1e-5)


def test_whole_tail_windows_drop_windows_running_past_the_end():
    """Every kept window holds at least 29 real tokens (the last still reaches the last token), a
    document shorter than that keeps its first window only, and scores stay padding-invariant."""
    torch.manual_seed(0)
    whole = TKL(tiny(tail_windows="whole")).eval()
    partial = TKL(tiny()).eval()
    partial.load_state_dict(whole.state_dict())
    q, d = random_batch()  # documents of 230, 83, 7 and 78 tokens
    with torch.no_grad():
        e, p = whole.explain(q, d), partial.explain(q, d)
        padded = whole(nn.functional.pad(q, (0, 3)), nn.functional.pad(d, (0, 111)))
        alone = whole(q[2:3], d[2:3, :7])
    lengths = (d != 0).sum(1).tolist()
    for b, n in enumerate(lengths):
        kept = e.window_valid[b].nonzero().squeeze(1)
        if n >= 29:
            assert (e.window_lengths[b, kept] >= 29).all()
            last = int(kept[-1]) * 2 + 30  # one past the last window's reach
            assert last - 1 >= n - 1 >= int(kept[-1]) * 2 + 28
            assert int(p.window_valid[b].sum()) > kept.numel()  # partial keeps the tail windows
        else:
            assert kept.tolist() == [0] and int(e.window_lengths[b, 0]) == n
    assert not torch.equal(e.score, p.score)
    torch.testing.assert_close(padded, e.score, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(alone, e.score[2:3], atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError):
        tiny(tail_windows="some")


def test_top_regions_on_hand_built_topography():
    scores = torch.tensor([[0.0, 5.0, 1.0, 0.0, 0.0, 4.0, 0.0, 3.0, 9.0, 0.0]])
    valid = torch.ones_like(scores, dtype=torch.bool)
    picks, found = top_regions(scores, valid, 3, window=3, stride=1)  # rules out 2 windows on each side
    assert picks[0].tolist() == [8, 1, 5] and found.all()
    valid[0, 5] = False  # now 4.0 is not a window; 7 is within 3 of 8
    picks, found = top_regions(scores, valid, 3, window=3, stride=1)
    assert picks[0, :2].tolist() == [8, 1] and found[0].tolist() == [True, True, True]
    picks, found = top_regions(scores, valid, 3, window=12, stride=2)
    assert picks[0, :2].tolist() == [8, 1] and found[0].tolist() == [True, True, False]


def greedy_regions(scores: list[float], valid: list[bool], count: int, window: int, stride: int) -> list[int]:
    """The picks by definition: the best valid window sharing no term with an earlier pick, ``count`` times."""
    picks = []
    for _ in range(count):
        free = [i for i, ok in enumerate(valid) if ok and all(abs(i - p) * stride >= window for p in picks)]
        if free:
            picks.append(max(free, key=lambda i: scores[i]))
    return picks


@pytest.mark.parametrize("window, stride", list(itertools.product(range(1, 9), range(1, 9))))
def test_picks_never_overlap_and_are_distinct_for_every_window_and_stride(window, stride):
    """A pick ruled out window // stride windows on each side: with a stride not dividing the window (5, 2)
    picks started 4 terms apart and overlapped; with a stride over the window (2, 3) nothing was ruled out
    and the same window was picked three times. Rows with few (or no) valid windows find fewer picks; a
    failed pick is never a padding window nor a repeat, and comes after every found one."""
    g = torch.Generator().manual_seed(window * 10 + stride)
    scores = torch.rand(64, 12, generator=g)
    valid = torch.rand(64, 12, generator=g) < torch.linspace(0.0, 1.0, 64)[:, None]  # from no window to all
    picks, found = top_regions(scores, valid, 3, window, stride)
    for b in range(64):
        got = picks[b][found[b]].tolist()
        assert found[b].tolist() == [True] * len(got) + [False] * (3 - len(got))
        assert got == greedy_regions(scores[b].tolist(), valid[b].tolist(), 3, window, stride)
        assert all(valid[b, i] for i in got) and len(set(got)) == len(got)
        assert all(abs(i - j) * stride >= window for i, j in itertools.combinations(got, 2))  # disjoint terms
    assert found[-1, 0] and not found[0].any()  # the last row has every window valid, the first none


def test_region_values_take_neighbours_inside_the_document_only():
    model = TKL(tiny())
    topo = torch.tensor([[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 0.0, 0.0]])
    valid = torch.tensor([[True] * 6 + [False] * 2])
    picks, found = torch.tensor([[5, 0, 2]]), torch.tensor([[True, True, False]])
    values = model._region_values(topo, valid, picks, found)
    # order: picks, picks - 1, picks + 1, picks - 2, picks + 2; a failed pick gives zeros
    assert values.tolist() == [[6.0, 1.0, 0.0, 5.0, 0.0, 0.0, 0.0, 2.0, 0.0, 4.0, 0.0, 0.0, 0.0, 3.0, 0.0]]


@pytest.mark.parametrize("window, stride", [(30, 2), (5, 2), (3, 4)])
def test_selected_regions_never_overlap_and_match_the_topography(window, stride):
    torch.manual_seed(0)
    model = TKL(tiny(saturation_window=window, saturation_stride=stride)).eval()
    g = torch.Generator().manual_seed(5)
    q = torch.randint(2, 60, (6, 4), generator=g)
    d = torch.randint(2, 60, (6, 400), generator=g)
    d[3, 70:] = 0
    d[4, 4:] = 0
    with torch.no_grad():
        e = model.explain(q, d)
    assert e.region_starts.shape == (6, 3) and e.region_length == window
    for b in range(6):
        starts = [s for s, ok in zip(e.region_starts[b].tolist(), e.region_valid[b].tolist()) if ok]
        assert (e.region_starts[b, len(starts):] == -1).all()
        if len(starts) < 3:  # only when every window shares a term with a pick (row 3: 70 tokens, row 4: 4)
            windows = e.window_valid[b].nonzero().flatten().tolist()
            assert all(any(abs(w * stride - s) < window for s in starts) for w in windows)
        assert len(starts) == 3 or b in (3, 4)
        for i, s in enumerate(starts):
            assert 0 <= s < e.doc_lengths[b] and s % stride == 0
            assert e.region_scores[b, i] == e.topography[b, s // stride]
            for t in starts[i + 1:]:
                assert abs(s - t) >= window  # [s, s + window) and [t, t + window) are disjoint
        best = e.topography[b].masked_fill(~e.window_valid[b], float("-inf")).max()
        assert e.region_scores[b, 0] == best


def test_saturation_starts_close_to_log():
    torch.manual_seed(0)
    sat = Saturation(8, "embedding")
    x = torch.tensor([0.5, 1.0, 5.0, 20.0]).view(1, 1, 1, 4)
    out = sat(x, torch.randn(1, 1, 8), torch.tensor([[17.0]]))
    torch.testing.assert_close(out, torch.log(x), atol=0.1, rtol=0.0)


@pytest.mark.parametrize("saturation", ["embedding", "linear", "log"])
def test_gradients_reach_every_trainable_parameter(saturation):
    torch.manual_seed(0)
    model = TKL(tiny(saturation=saturation))
    q, d = random_batch()
    model(q, d).sum().backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.count_nonzero(p.grad) > 0, name


def long_scifact_batch(n: int, doc_len: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]:
    """Queries; their relevant abstract followed by unrelated abstracts; unrelated abstracts only."""
    if not DATA.is_dir():
        pytest.skip("../shared/data is not present")
    sf = DATA / "scifact"
    queries = {d["_id"]: d["text"] for d in map(json.loads, (sf / "queries.jsonl").read_text().splitlines())}
    qrels = [line.split("\t")[:2] for line in (sf / "qrels" / "train.tsv").read_text().splitlines()[1: 4 * n]]
    pairs = list(dict(qrels).items())[:n]
    corpus = [d for d, _ in zip(map(json.loads, (sf / "corpus.jsonl").read_text().splitlines()), range(400))]
    rel = {d: None for _, d in pairs}
    for doc in map(json.loads, (sf / "corpus.jsonl").read_text().splitlines()):
        if doc["_id"] in rel:
            rel[doc["_id"]] = f"{doc['title']} {doc['text']}"
    an = Analyzer()
    filler = [t for doc in corpus[:60] for t in an(doc["text"])]
    qs = [an(queries[q]) for q, _ in pairs]
    pos = [(an(rel[d]) + filler)[:doc_len] for _, d in pairs]
    neg = [filler[i * 50:][:doc_len] for i in range(n)]
    vocab = Vocabulary.build(qs + pos + neg)

    def ids(texts: list[list[str]]) -> torch.Tensor:
        out = torch.zeros(len(texts), max(map(len, texts)), dtype=torch.long)
        for i, t in enumerate(texts):
            out[i, : len(t)] = torch.tensor(vocab.ids(t))
        return out

    return ids(qs), ids(pos), ids(neg), len(vocab)


@pytest.mark.parametrize("explicit", [False, True])
def test_adam_lowers_margin_loss_on_long_scifact_documents(explicit):
    """Every parameter gets a gradient (with ``explicit``, NDRM2's two and the combination's too) and
    a few Adam steps lower the margin loss; relevant and non-relevant documents are scored in one
    call, as the trainer does, so the explicit channel's BatchNorm sees both."""
    q, dp, dn, v = long_scifact_batch(6, 300)
    torch.manual_seed(0)
    model = TKL(TKLConfig(vocab_size=v, embedding_dim=32, num_layers=1, num_heads=4, ff_dim=32, explicit=explicit))
    if explicit:
        df = np.array([0, 0] + [3] * (v - 2))
        model.set_collection(Vocabulary(["[PAD]", "[UNK]"] + [f"w{i}" for i in range(2, v)], df, df, 50, 50 * 200))
    both_q, both_d = q.repeat(2, 1), torch.cat([dp, nn.functional.pad(dn, (0, dp.shape[1] - dn.shape[1]))])
    model(both_q, both_d).sum().backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.count_nonzero(p.grad) > 0, name
    opt = torch.optim.Adam(model.parameter_groups(lr_encoder=1e-3, lr_rest=1e-2))

    def loss() -> torch.Tensor:
        s = model(both_q, both_d)
        return torch.relu(1 - s[: len(q)] + s[len(q):]).mean()

    first = loss().item()
    for _ in range(6):
        opt.zero_grad()
        loss().backward()
        opt.step()
    assert loss().item() < 0.5 * first


def test_idf_term_weights_scale_each_query_terms_contribution():
    """``term_weights="idf"``: with every idf 1 the scores are the plain model's; a one-term
    query's score scales with its term's idf (the topography is linear in it, so the same
    regions are picked); the collection's idf is taken; the option's name is checked."""
    q, d = random_batch()
    torch.manual_seed(0)
    plain = TKL(tiny())
    torch.manual_seed(0)
    weighted = TKL(tiny(term_weights="idf"))
    torch.testing.assert_close(weighted(q, d), plain(q, d))  # idf starts at 1
    one = q[:, :1]
    base = weighted(one, d)
    weighted.idf[one[:, 0]] = 2.5
    torch.testing.assert_close(weighted(one, d), 2.5 * base)
    vocab = Vocabulary.build([["gene", "cell"], ["cell", "tumor"], ["gene"]])
    model = TKL(tiny(vocab_size=len(vocab), term_weights="idf"))
    model.set_collection(vocab)  # ckqti.models.tk.set_idf_weights, whose checks test_tk.py covers
    assert torch.allclose(model.idf, torch.as_tensor(vocab.idf(), dtype=torch.float32))
    with pytest.raises(ValueError, match="term_weights"):
        tiny(term_weights="bm25")
