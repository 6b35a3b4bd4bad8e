"""A fresh NDRM model to train: its initial embeddings, the ``match`` start, Adam's parameter groups."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from ckqti.train.embedding_init import initial_embeddings
from ckqti.train.ndrm_config import TrainConfig
from ckqti.train.ndrm_data import TrainingData


def build_model(
    data: TrainingData, config: TrainConfig, device: torch.device, init: bool, matrix: np.ndarray | None = None
) -> nn.Module:
    """A fresh model for the training vocabulary; embeddings initialised when ``init`` (from ``matrix`` if given)."""
    from ckqti.models.ndrm import build_ndrm
    from ckqti.models.ndrm_config import NDRMConfig

    vocab = data.collection.vocab
    model_config = NDRMConfig(vocab_size=len(vocab), variant=config.model, **dict(config.model_options))
    model = build_ndrm(model_config, vocab)
    if init and config.model != "ndrm2":
        if matrix is None:
            matrix = initial_embeddings(data.collection, config.embeddings, model_config.dim, config.seed,
                                        config.progress)
        if matrix is not None:
            model.load_embeddings(torch.as_tensor(matrix))
    if init and config.init == "match":
        match_init(model)
    return model.to(device)


def match_init(model: nn.Module) -> None:
    """Start NDRM1/NDRM3 from a model that ranks like its explicit part and matches terms by embedding.

    The paper trains from a random initialisation for many steps on MS MARCO; a few hundred
    steps on a small collection barely move a random query projection or NDRM3's random
    ``Linear(2, 1)``, whose sign may even rank against the explicit score. So:

    * NDRM1's query projection is the identity and the document mix takes the raw embedding
      only (``w_emb = 1, w_ctx = 0``): a query term's cosine with a document term is the
      embeddings' cosine (1 for the same term), so the kernels see exact and skip-gram-similar
      matches from the first step; the Conformer's share grows from 0 as training finds it useful;
    * NDRM3's combination weights are ``(latent 0, explicit 1)``, bias 0: at step 0 the model
      ranks exactly as NDRM2 (a BM25-like scorer), and the latent weight grows from 0 as far as
      the latent score helps.
    """
    latent = getattr(model, "latent", model)
    with torch.no_grad():
        if hasattr(latent, "query_proj"):
            nn.init.eye_(latent.query_proj.weight)
            nn.init.zeros_(latent.query_proj.bias)
            latent.mix.weight[0].fill_(1.0)
            latent.mix.weight[1].fill_(0.0)
            latent.mix.bias.zero_()
        if hasattr(model, "combine"):
            model.combine.linear.weight.copy_(torch.tensor([[0.0, 1.0]]))
            model.combine.linear.bias.zero_()


HEAD_PREFIXES = ("pooling.", "latent.pooling.", "combine.", "explicit.", "length_")


def parameter_groups(model: nn.Module, lr: float, head_lr: float | None) -> list[dict]:
    """Adam parameter groups: the scoring head (:data:`HEAD_PREFIXES`) at ``head_lr``, the rest at ``lr``."""
    head, body = [], []
    for name, p in model.named_parameters():
        if p.requires_grad:  # a fixed explicit channel's two parameters are not trained
            (head if name.startswith(HEAD_PREFIXES) else body).append(p)
    groups = [{"params": body, "lr": lr}, {"params": head, "lr": head_lr if head_lr is not None else lr}]
    return [g for g in groups if g["params"]]
