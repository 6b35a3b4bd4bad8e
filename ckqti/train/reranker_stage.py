"""A re-ranker's training stage: epochs, validation, early stopping on dev nDCG@10, a state saved each epoch."""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from ckqti.train.reranker_config import RerankerTrainConfig
from ckqti.train.reranker_data import PairData
from ckqti.train.reranker_epoch import LossFn, ScoreFn, train_epoch
from ckqti.train.reranker_validation import validate
from ckqti.train.stage_state import StageProgress, StageState
from ckqti.train.stage_state import show as show_state


@dataclass
class StageResult:
    best: float
    history: list[dict]


def fit_stage(stage: int, score: ScoreFn, loss_fn: LossFn | None, model: nn.Module, optimizer, data: PairData,
              config: RerankerTrainConfig, epochs: int, device: torch.device,
              on_best: Callable[[float, list[dict]], None] | None = None, state: StageState | None = None) -> StageResult:
    """Epochs with validation and early stopping; the model ends with its best epoch's weights.

    The model is validated before the first epoch too (history epoch 0), so a stage whose
    training does not beat its starting point on dev keeps its starting weights. With ``state``,
    each epoch's end is saved there, and a run that resumes continues after the saved epoch.
    """
    label = f"stage {stage} " if stage else ""  # TK and TKL train in one stage, numbered 0: no label
    progress = state.restore(model, optimizer) if state is not None else None
    if state is not None:
        show_state(state.note(progress, epochs, config.patience), config.progress)
    if progress is None:
        best = validate(score, model, data, config, device)
        history = [{"stage": stage, "epoch": 0, "loss": None, "steps": 0, "dev_ndcg10": best, "seconds": 0.0}]
        progress = StageProgress(0, best, 0, history, copy.deepcopy(model.state_dict()))
        if config.progress:
            print(f"{label}before training: dev nDCG@10 {best:.4f}", flush=True)
        if on_best is not None:
            on_best(best, history)
    for epoch in range(progress.epoch, epochs):
        if progress.since >= config.patience:
            break
        started = time.perf_counter()
        stats = train_epoch(None if loss_fn else score, loss_fn, model, optimizer, data, config, epoch, device)
        dev = validate(score, model, data, config, device)
        progress.history.append({"stage": stage, "epoch": epoch + 1, **stats, "dev_ndcg10": dev,
                                 "seconds": time.perf_counter() - started})
        progress.epoch = epoch + 1
        if config.progress:
            print(f"{label}epoch {epoch + 1}: loss {stats['loss']:.4f}, dev nDCG@10 {dev:.4f}", flush=True)
        if dev > progress.best:
            progress.best, progress.best_state, progress.since = dev, copy.deepcopy(model.state_dict()), 0
            if on_best is not None:
                on_best(dev, progress.history)
        else:
            progress.since += 1
        if state is not None:
            state.save(model, optimizer, progress)
    model.load_state_dict(progress.best_state)
    return StageResult(progress.best, progress.history)
