"""Training TK and TKL: a model for the training vocabulary (initial embeddings, the ``match`` start), one stage."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn

from ckqti.models.checkpoint import Checkpoint
from ckqti.models.inputs import TermText
from ckqti.models.reranker import build_model, save_reranker
from ckqti.train.embedding_init import initial_embeddings
from ckqti.train.reranker_config import RerankerTrainConfig
from ckqti.train.reranker_data import PairData
from ckqti.train.reranker_stage import StageResult, fit_stage
from ckqti.train.stage_state import StageState


def match_init(model: nn.Module) -> None:
    """Start TK or TKL from exact matching: ``alpha = 1`` and only the ``mu = 1`` kernel weighted.

    See :mod:`ckqti.train.rerankers`' docstring. TK's two branches are combined as ``1 * log + 0 * length``; a TKL
    with an explicit channel starts as that channel alone
    (:meth:`~ckqti.models.explicit.ExplicitCombiner.match_init`).
    """
    with torch.no_grad():
        model.mixer.fill_(1.0)
        mus = model.kernels.mu
        exact = (mus - 1.0).abs().argmin()
        dense = model.dense_log if hasattr(model, "dense_log") else model.dense
        dense.weight.zero_()
        dense.weight[0, exact] = 1.0
        if hasattr(model, "dense_combine"):
            model.dense_length.weight.zero_()
            model.dense_combine.weight.copy_(torch.tensor([[1.0, 0.0]]))
    if getattr(model, "combiner", None) is not None:
        model.combiner.match_init()


def term_model_options(config: RerankerTrainConfig) -> dict[str, Any]:
    """TK/TKL config fields: 256-d embeddings (the skip-gram IN+OUT width) with 8 heads unless overridden."""
    return {"embedding_dim": 256, "num_heads": 8, **config.model_options}


def new_term_model(kind: str, text: TermText, collection, config: RerankerTrainConfig, init: bool = True) -> nn.Module:
    """A TK or TKL for the training vocabulary, embeddings initialised as ``config.embeddings`` asks
    (unless not ``init``: a resumed run loads its saved weights over them, so skip-gram is not trained again)."""
    model = build_model(kind, {**term_model_options(config), "vocab_size": len(text.vocab)})
    matrix = (initial_embeddings(collection, config.embeddings, model.config.embedding_dim, config.seed, config.progress)
              if init else None)
    if matrix is not None:
        with torch.no_grad():
            model.embedding.weight.copy_(torch.as_tensor(matrix, dtype=torch.float32))
            model.embedding.weight[0].zero_()
    if config.init == "match":
        match_init(model)
    model.set_collection(text.vocab)  # idf term weights (term_weights="idf"), else nothing
    return model


def train_term_model(data: PairData, text: TermText, collection, config: RerankerTrainConfig, out: Path,
                     meta: dict, device: torch.device, state: StageState) -> tuple[Checkpoint | None, StageResult]:
    """Train TK or TKL; each epoch better than the last is written to ``out``, and the best model
    (the start, if no epoch beat it) at the end if no epoch of this call did (so a run interrupted
    before it improves leaves ``out`` as it was). Each epoch's end is saved to ``state``."""
    resuming = state.resume and state.path.is_file()
    model = new_term_model(config.kind, text, collection, config, init=not resuming).to(device)
    optimizer = torch.optim.Adam(model.parameter_groups(config.lr_encoder, config.lr_rest))
    saved: list[Checkpoint] = []

    def on_best(dev: float, history: list[dict]) -> None:
        if len(history) > 1:  # a trained epoch (history[0] is the validation before training)
            saved.append(save_reranker(out, model, config.kind, text, {**meta, "dev_ndcg10": dev, "history": history}))

    result = fit_stage(0, model, None, model, optimizer, data, config, config.epochs, device, on_best, state)
    if not saved:  # no epoch of this call beat the best: fit_stage restored it
        saved.append(save_reranker(out, model, config.kind, text,
                                   {**meta, "dev_ndcg10": result.best, "history": result.history}))
    return saved[-1], result
