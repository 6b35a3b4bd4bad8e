"""The explicit channel of TK and TKL (:mod:`ckqti.models.explicit`): NDRM2's score combined with the
model's own by ``BatchNorm1d(2) -> Linear(2, 1)``, as NDRM3 combines its channels."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from ckqti.models.explicit import ExplicitCombiner
from ckqti.models.ndrm2 import NDRM2
from ckqti.models.ndrm_config import NDRMConfig
from ckqti.models.tk import TK, TKConfig
from ckqti.models.tkl import TKL, TKLConfig
from ckqti.vocab import Vocabulary

VOCAB = 60
TINY = dict(vocab_size=VOCAB, embedding_dim=16, num_layers=1, num_heads=2, ff_dim=12)
MODELS = {  # kind -> (model, its own score's field in the explanation)
    "tk": (lambda **kw: TK(TKConfig(**TINY, max_doc_length=120, **kw)), "kernel_score"),
    "tkl": (lambda **kw: TKL(TKLConfig(**TINY, max_doc_length=400, **kw)), "region_score"),
}


def sparse_vocabulary(size: int = VOCAB) -> Vocabulary:
    """Ids 2..size-1 as terms with document frequencies 1..30 of 100 documents (every idf > 0)."""
    terms = ["[PAD]", "[UNK]"] + [f"t{i}" for i in range(2, size)]
    df = np.array([0, 0] + [1 + i % 30 for i in range(size - 2)], dtype=np.int64)
    return Vocabulary(terms, df, df.copy(), 100, 100 * 150)


def random_batch() -> tuple[torch.Tensor, torch.Tensor]:
    """4 queries (one of 2 terms) and documents of 110, 83, 7 and 78 tokens."""
    g = torch.Generator().manual_seed(2)
    q = torch.randint(2, VOCAB, (4, 5), generator=g)
    d = torch.randint(2, VOCAB, (4, 110), generator=g)
    q[1, 2:] = 0
    d[1, 83:], d[2, 7:], d[3, 78:] = 0, 0, 0
    return q, d


@pytest.mark.parametrize("kind", list(MODELS))
def test_explicit_channel_starts_as_ndrm2_and_combines_affinely(kind):
    """``explicit=True``: match-initialised, the model scores exactly as NDRM2 alone; once the
    combination's weights and statistics move, eval-mode scores are ``a * own score + b * NDRM2
    score + c`` (:meth:`ExplicitCombiner.combination`), the explanation reports both parts, padding
    changes nothing, and the channel and its combination train at 10x ``lr_rest``."""
    build, own = MODELS[kind]
    vocab = sparse_vocabulary()
    q, d = random_batch()
    torch.manual_seed(0)
    model = build(term_weights="idf", explicit=True)
    model.set_collection(vocab)
    assert isinstance(model.combiner, ExplicitCombiner)
    model.combiner.match_init()
    ndrm2 = NDRM2(NDRMConfig(vocab_size=len(vocab), variant="ndrm2"))
    ndrm2.set_collection(vocab)
    model.eval(), ndrm2.eval()
    with torch.no_grad():
        expected = ndrm2(q, d)
        assert (expected > 0).sum() >= 2
        torch.testing.assert_close(model(q, d), expected, rtol=1e-4, atol=1e-5)  # BatchNorm's eps
        norm = model.combiner.norm
        norm.running_mean.copy_(torch.tensor([-300.0, 2.0]))
        norm.running_var.copy_(torch.tensor([900.0, 4.0]))
        norm.weight.copy_(torch.tensor([1.5, 0.5]))
        model.combiner.linear.weight.copy_(torch.tensor([[0.7, 1.3]]))
        e = model.explain(q, d)
        a, b, c = model.combiner.combination()
        torch.testing.assert_close(e.score, model(q, d))
        torch.testing.assert_close(e.explicit_score, expected)
        torch.testing.assert_close(e.score, (a * getattr(e, own) + b * e.explicit_score + c).float())
        assert not torch.allclose(e.score, expected)
        padded = model(nn.functional.pad(q, (0, 3)), nn.functional.pad(d, (0, 111)))
    torch.testing.assert_close(padded, e.score, atol=1e-4, rtol=1e-5)
    rates = {id(p): g["lr"] for g in model.parameter_groups(1e-4, 1e-3) for p in g["params"]}
    assert {rates[id(p)] for p in model.combiner.parameters()} == {1e-2}
    assert {rates[id(p)] for p in model.embedding.parameters()} == {1e-4}
    plain = build(term_weights="idf")
    assert plain.combiner is None and build().explain(q, d).explicit_score is None
    assert not any(n.startswith("combiner.") for n, _ in plain.named_parameters())


@pytest.mark.parametrize("kind", list(MODELS))
def test_every_parameter_gets_a_gradient_with_the_explicit_channel(kind):
    build, _ = MODELS[kind]
    torch.manual_seed(0)
    model = build(explicit=True)
    model.set_collection(sparse_vocabulary())
    q, d = random_batch()
    model(q, d).sum().backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.count_nonzero(p.grad) > 0, name


def test_the_combination_holds_when_a_channel_barely_varies():
    """``combination()`` is the eval-mode map even where BatchNorm's eps matters (a channel whose
    running variance is near eps): what explanations report sums to the score."""
    combiner = ExplicitCombiner(VOCAB).eval()
    with torch.no_grad():
        combiner.norm.running_mean.zero_()
        combiner.norm.running_var.copy_(torch.tensor([2e-5, 1e-5]))
        combiner.linear.weight.copy_(torch.tensor([[0.7, 1.3]]))
        score, explicit = torch.tensor([0.001, 0.002, -0.003]), torch.tensor([0.002, -0.001, 0.004])
        a, b, c = combiner.combination()
        torch.testing.assert_close(combiner(score, explicit), (a * score + b * explicit + c).float(), rtol=1e-4, atol=1e-6)
