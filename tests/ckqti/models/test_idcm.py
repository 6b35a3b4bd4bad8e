"""IDCM: the cascade scores exactly sample_n windows, masking, explanations, learning."""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from pathlib import Path

import pytest
import torch
from torch import nn

from ckqti.models.idcm import IDCM, IDCMConfig, idcm_inputs
from ckqti.models.minilm import BertConfig, WordPieceTokenizer

DATA = Path(__file__).resolve().parents[3] / ".." / "shared" / "data"
TINY_BERT = BertConfig(vocab_size=60, hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32,
                       max_position_embeddings=64, dropout=0.0)


def tiny(**kw) -> IDCMConfig:
    base = dict(bert=TINY_BERT, window=10, overlap=2, max_doc_length=120, max_query_length=8,
                sample_n=3, top_k=2, cls_id=2, sep_id=3)
    base.update(kw)
    return IDCMConfig(**base)


def random_batch(b: int = 3, q: int = 5, d: int = 100) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(3)
    qi = torch.randint(5, 60, (b, q), generator=g)
    di = torch.randint(5, 60, (b, d), generator=g)
    qi[1, 3:] = 0
    di[1, 25:] = 0  # 3 windows
    di[2, 14:] = 0  # 2 windows: fewer than sample_n
    return qi, di


def count_rows(module: nn.Module) -> list[torch.Tensor]:
    """Record the ids every call of ``module`` receives."""
    calls = []
    module.register_forward_hook(lambda m, args, out: calls.append(args[0]))
    return calls


def test_config_is_validated():
    with pytest.raises(ValueError):
        tiny(top_k=4)  # more than sample_n
    with pytest.raises(ValueError):
        tiny(max_query_length=60)  # 60 + 14 + 3 > 64 positions
    with pytest.raises(ValueError):
        tiny(cls_id=0)
    with pytest.raises(ValueError):
        IDCM(tiny(), bert=IDCM(tiny(bert=replace(TINY_BERT, num_layers=2))).bert)
    saved = json.loads(json.dumps(asdict(tiny())))  # a checkpoint round trip
    assert IDCMConfig(**saved) == tiny()


def test_output_shape_and_finite():
    torch.manual_seed(0)
    model = IDCM(tiny())
    q, d = random_batch()
    s = model(q, d)
    assert s.shape == (3,) and torch.isfinite(s).all()
    assert model(q[:1], torch.zeros(1, 30, dtype=torch.long)).item() == 0.0


def test_scores_exactly_sample_n_windows_at_inference():
    torch.manual_seed(0)
    model = IDCM(tiny()).eval()
    q, d = random_batch()
    calls = count_rows(model.bert)
    with torch.no_grad():
        sel = model.selector_scores(q, d)
        model(q, d)
    assert len(calls) == 1
    # 10 windows, 3 windows and 2 windows: min(sample_n, windows) rows each
    assert calls[0].shape[0] == 3 + 3 + 2
    assert sel.valid.sum(1).tolist() == [10, 3, 2]
    # the rows are the selector's best windows: each carries its window's centre tokens
    best = sel.scores[0].masked_fill(~sel.valid[0], float("-inf")).topk(3).indices.sort().values
    windows, _ = model.windows(d)
    rows = [r.tolist() for r in calls[0][:3]]
    for w in windows[0, best]:
        centre = w[2:12].tolist()
        assert any(r[i: i + 10] == centre for r in rows for i in range(len(r) - 9))


def test_all_padding_windows_are_never_scored():
    torch.manual_seed(0)
    model = IDCM(tiny()).eval()
    q, d = random_batch()
    d = nn.functional.pad(d, (0, 20))  # 12 windows per row, most of them padding
    bert_calls, conv_calls = count_rows(model.bert), count_rows(model.conv)
    with torch.no_grad():
        model.forward_all_windows(q, d)
        model.selector_scores(q, d)
    assert bert_calls[0].shape[0] == 10 + 3 + 2
    assert [c.shape[0] for c in conv_calls] == [3, 10 + 3 + 2]  # queries, then windows


def test_query_is_capped_in_the_cascade_and_all_windows():
    """Query tokens past ``max_query_length`` reach neither the selector nor the cross-encoder."""
    torch.manual_seed(0)
    model = IDCM(tiny(max_query_length=3)).eval()
    q, d = random_batch(q=7)
    with torch.no_grad():
        torch.testing.assert_close(model(q, d), model(q[:, :3], d))
        torch.testing.assert_close(model.forward_all_windows(q, d), model.forward_all_windows(q[:, :3], d))


def test_padding_invariance():
    torch.manual_seed(0)
    model = IDCM(tiny()).eval()
    q, d = random_batch()
    with torch.no_grad():
        base = model(q, d)
        padded = model(nn.functional.pad(q, (0, 3)), nn.functional.pad(d, (0, 37)))
        alone = model(q[1:2, :3], d[1:2, :25])
        all_windows = model.forward_all_windows(q, d), model.forward_all_windows(q, nn.functional.pad(d, (0, 37)))
    torch.testing.assert_close(padded, base, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(alone, base[1:2], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(*all_windows, atol=1e-5, rtol=1e-5)


def test_selector_ties_go_to_the_earliest_window_whatever_the_padding():
    """Windows the selector scores exactly alike (here every one: the conv's output is one constant
    vector) go to the cross-encoder earliest first, so the windows read, and the score, do not
    depend on how many padding windows the batch adds (``topk`` breaks ties by no stated rule)."""
    torch.manual_seed(0)
    model = IDCM(tiny(window=2, overlap=0, sample_n=1, top_k=1)).eval()
    with torch.no_grad():
        model.conv.weight.zero_()
        model.conv.bias.fill_(1.0)
    q = torch.tensor([[5, 6]])
    d = torch.arange(10, 18).unsqueeze(0)  # 8 tokens: 4 full windows, each read differently by the cross-encoder
    with torch.no_grad():
        assert len(set(model.all_window_scores(q, d).scores[0].tolist())) == 4
        assert len(set(model.selector_scores(q, d).scores[0].tolist())) == 1
        runs = [model.explain(q, nn.functional.pad(d, (0, extra))) for extra in range(0, 40, 2)]
        beside = model(q.expand(2, -1), torch.cat([nn.functional.pad(d, (0, 30)), torch.arange(20, 58)[None]]))
    assert all(r.selected[0, 0].item() == 0 for r in runs)
    assert len({r.score.item() for r in runs}) == 1
    assert beside[0].item() == runs[0].score.item()



def test_a_document_shorter_than_top_k_scores_the_windows_it_has():
    """Missing top-k slots count 0, as the reference code's: a one-window document scores
    ``weights[0] * its window's score``, alone, padded, or beside longer documents, also when the
    weights and scores are negative (0 is not a neutral score there, but it never depends on
    how many slots or how much padding there are)."""
    torch.manual_seed(0)
    model = IDCM(tiny(sample_n=3, top_k=3)).eval()
    with torch.no_grad():
        model.top_k_weights.copy_(torch.tensor([0.7, -1.3, 2.1]))
        model.classifier.bias.fill_(-5.0)  # window scores below 0
    q, d = random_batch()
    d[0, 8:] = 0  # one window
    with torch.no_grad():
        window = model.explain(q[:1], d[:1, :8]).cross_scores[0, 0]
        scores = [model(q, d)[0], model(q[:1], d[:1, :8])[0], model(q[:1], nn.functional.pad(d[:1, :8], (0, 90)))[0],
                  model.forward_all_windows(q, d)[0]]
    assert window < 0
    for got in scores:
        torch.testing.assert_close(got, 0.7 * window, atol=1e-5, rtol=1e-5)

def test_pair_inputs_pack_query_and_window_left():
    model = IDCM(tiny())
    q = torch.tensor([[7, 8, 0, 0]])
    w = torch.tensor([[0, 0, 9, 10, 11, 0]])
    ids, types = model._pair_inputs(q, w)
    assert ids.tolist() == [[2, 7, 8, 3, 9, 10, 11, 3]]
    assert types.tolist() == [[0, 0, 0, 0, 1, 1, 1, 1]]


def test_explanation_names_the_selected_windows():
    torch.manual_seed(0)
    model = IDCM(tiny()).eval()
    q, d = random_batch()
    with torch.no_grad():
        e = model.explain(q, d)
        s = model(q, d)
    torch.testing.assert_close(e.score, s)
    assert e.selected.shape == (3, 3) and e.spans.shape == (3, 3, 2)
    assert e.selected[2, 2] == -1 and (e.spans[2, 2] == -1).all()  # only 2 windows in row 2
    assert e.spans[2, :2].tolist() in ([[0, 10], [10, 14]], [[10, 14], [0, 10]])
    for b in range(3):
        lengths = (d[b] != 0).sum()
        for (start, end), idx in zip(e.spans[b].tolist(), e.selected[b].tolist()):
            if idx >= 0:
                assert start == 10 * idx and start < end <= min(start + 10, lengths)
        assert e.used[b].sum() == min(2, (e.selected[b] >= 0).sum())
    # the combined score is the top-k cross scores weighted by the (initial, unit) weights
    torch.testing.assert_close((e.cross_scores * e.used).sum(1), s)


def test_gradients_reach_every_trainable_parameter():
    torch.manual_seed(0)
    model = IDCM(tiny())
    q, d = random_batch()
    loss = model(q, d).sum() + model.selector_scores(q, d).scores.sum()  # the selector learns apart (stage 3)
    loss.backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.count_nonzero(p.grad) > 0, name


def test_selector_gets_no_gradient_through_the_cascade_but_the_cross_encoder_does():
    torch.manual_seed(0)
    model = IDCM(tiny())
    q, d = random_batch()
    model(q, d).sum().backward()
    assert model.conv.weight.grad is None
    assert model.classifier.weight.grad is not None


def scifact_texts(n: int) -> tuple[list[str], list[str], list[str]]:
    if not DATA.is_dir():
        pytest.skip("../shared/data is not present")
    sf = DATA / "scifact"
    queries = {d["_id"]: d["text"] for d in map(json.loads, (sf / "queries.jsonl").read_text().splitlines())}
    pairs = list(dict(line.split("\t")[:2] for line in (sf / "qrels" / "train.tsv").read_text().splitlines()[1: 4 * n]).items())
    docs = {d["_id"]: d["text"] for d in map(json.loads, (sf / "corpus.jsonl").read_text().splitlines())}
    qs = [queries[q] for q, _ in pairs[:n]]
    return qs, [docs[d] for _, d in pairs[:n]], [docs[d] for _, d in pairs[1: n + 1]]


def test_adam_lowers_margin_loss_on_scifact():
    tok = WordPieceTokenizer.minilm()
    qs, pos, neg = scifact_texts(6)
    config = tiny(bert=replace(TINY_BERT, vocab_size=tok.vocab_size, max_position_embeddings=128),
                  max_query_length=24, max_doc_length=150, cls_id=tok.cls_id, sep_id=tok.sep_id)
    q, dp = idcm_inputs(tok, qs, pos, config)
    _, dn = idcm_inputs(tok, qs, neg, config)
    torch.manual_seed(0)
    model = IDCM(config)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)

    def loss() -> torch.Tensor:
        return torch.relu(1 - model(q, dp) + model(q, dn)).mean()

    first = loss().item()
    for _ in range(15):
        opt.zero_grad()
        loss().backward()
        opt.step()
    assert loss().item() < 0.5 * first


def test_a_literal_pad_or_sep_in_a_document_is_read_as_text():
    tok = WordPieceTokenizer.minilm()
    config = tiny(bert=replace(TINY_BERT, vocab_size=tok.vocab_size), cls_id=tok.cls_id, sep_id=tok.sep_id)
    torch.manual_seed(0)
    model = IDCM(config).eval()
    docs = ["kinase [PAD] inhibitors [SEP] reduce growth", "kinase [pad] inhibitors [sep] reduce growth"]
    q, d = idcm_inputs(tok, ["kinase inhibitors"] * 2, docs, config)
    with torch.no_grad():
        quoted, lower = model(q, d)
    torch.testing.assert_close(quoted, lower)  # uncased text: the same words, not padding and a separator


def test_from_minilm_scores_real_text():
    tok = WordPieceTokenizer.minilm()
    model = IDCM.from_minilm(IDCMConfig(max_doc_length=300)).eval()
    assert model.config.bert.hidden_size == 384
    qs, pos, _ = scifact_texts(2)
    q, d = idcm_inputs(tok, qs, pos, model.config)
    calls = count_rows(model.bert)
    with torch.no_grad():
        e = model.explain(q, d)
    assert e.score.shape == (2,) and torch.isfinite(e.score).all()
    windows = e.window_valid.sum(1)
    assert calls[0].shape[0] == int(torch.clamp(windows, max=4).sum())
