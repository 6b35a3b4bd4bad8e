"""QTIScorer, checked on every variant: the QTIModel interface, forward as the sum of term_scores, score_encoded in chunks."""

from __future__ import annotations

import pytest
import torch

from ckqti.models.qti import DocumentEncoding, QTIModel
from tests.ckqti.models.ndrm_helpers import VARIANTS, model


@pytest.mark.parametrize("variant", VARIANTS)
def test_shapes_and_interface(scifact, variant):
    vocab, q, pos, _ = scifact
    m = model(vocab, variant).eval()
    assert isinstance(m, QTIModel)
    assert m(q, pos).shape == (8,)
    assert m.term_scores(q, pos).shape == q.shape
    enc = m.encode_documents(pos)
    assert isinstance(enc, DocumentEncoding) and enc.lengths.tolist() == (pos != 0).sum(1).float().tolist()
    terms = torch.arange(len(vocab))
    assert m.score_encoded(terms, enc).shape == (8, len(vocab))
    assert m.is_latent == (variant != "ndrm2")
    if variant == "ndrm2":
        assert enc.vectors is None and m.term_vectors(terms) is None
    else:
        norms = enc.vectors.norm(dim=-1)
        assert torch.allclose(norms[enc.mask], torch.ones(int(enc.mask.sum())), atol=1e-5)
        assert torch.all(norms[~enc.mask] == 0)
        assert torch.allclose(m.term_vectors(terms).norm(dim=-1), torch.ones(len(vocab)), atol=1e-5)


@pytest.mark.parametrize("variant", VARIANTS)
@torch.no_grad()
def test_qti_additivity_and_score_encoded_consistency(scifact, variant):
    vocab, q, pos, _ = scifact
    m = model(vocab, variant, score_chunk_elements=50_000).eval()  # score_encoded in chunks of a few terms
    total = m(q, pos)
    singles = torch.stack([m(q[:, i : i + 1], pos) for i in range(q.shape[1])], dim=1)  # [B, Q]
    assert torch.allclose(total, singles.sum(1), atol=1e-4)
    assert torch.allclose(m.term_scores(q, pos), singles, atol=1e-5)
    assert torch.all(singles[q <= 1] == 0)  # padding and unknown query terms score 0
    encoded = m.score_encoded(torch.arange(len(vocab)), m.encode_documents(pos))  # [B, V]
    assert torch.allclose(encoded.gather(1, q) * (q > 1), singles, atol=1e-5)
    rows = torch.randint(0, len(vocab), (pos.shape[0], 37))  # each document's own terms, padding among them
    rows[:, -5:] = 0
    own = m.score_encoded(rows, m.encode_documents(pos))  # [B, 37]: the [V] scores of those terms, in chunks
    assert own.shape == rows.shape and torch.allclose(own, encoded.gather(1, rows) * (rows > 1), atol=1e-5)
