"""Which (term, document) pairs the impact scorer keeps for a latent model."""

from __future__ import annotations

import numpy as np
import torch

from ckqti.models.ndrm import NDRMConfig, build_ndrm
from ckqti.vocab import Vocabulary
from indexer.impacts import ImpactConfig, ImpactScorer, pad_batch


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
