"""Training IDCM in its three stages, each resumable; a finished stage's checkpoint is reused."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from ckqti.models.checkpoint import Checkpoint, load_checkpoint
from ckqti.models.inputs import WordPieceText
from ckqti.models.reranker import save_reranker
from ckqti.train.data import inputs_digest
from ckqti.train.losses_idcm import selector_distillation_loss
from ckqti.train.reranker_config import STAGE3_SETTINGS, RerankerTrainConfig
from ckqti.train.reranker_data import PairData
from ckqti.train.reranker_epoch import LossFn, ScoreFn
from ckqti.train.reranker_stage import fit_stage
from ckqti.train.stage_state import StageState


def idcm_stage_setup(model: nn.Module, stage: int, config: RerankerTrainConfig) -> tuple[ScoreFn, LossFn | None, Any]:
    """Scoring function, optional loss and optimizer of one IDCM stage."""
    if stage == 3:
        params = [*model.conv.parameters(), model.kernel_scale, *model.bin_weights.parameters()]
        return (model, (lambda q, d: selector_distillation_loss(model, q, d, config.selector_loss)),
                torch.optim.Adam(params, lr=config.lr_rest))
    groups = [{"params": list(model.bert.parameters()), "lr": config.lr_encoder},
              {"params": [*model.classifier.parameters(), model.top_k_weights], "lr": config.lr_rest}]
    if stage == 1:
        head = model.config.window_length
        return (lambda q, d: model.cross_encoder(q, d[:, :head])), None, torch.optim.Adam(groups)
    return model.forward_all_windows, None, torch.optim.Adam(groups)


def train_idcm(data: PairData, text: WordPieceText, config: RerankerTrainConfig, out: Path, work: Path, meta: dict,
               device: torch.device, resume: bool = False, fingerprint: str = "") -> tuple[Checkpoint | None, list[dict], float]:
    """Run the IDCM stages in order, resuming after the last stage checkpoint found in ``work``, and
    with ``resume`` within the first unfinished stage from its state (``fingerprint``: what the run's
    settings and data must match, :mod:`ckqti.train.stage_state`)."""
    from ckqti.models.idcm import IDCM, IDCMConfig

    options = dict(config.model_options)
    if "bert" in options:  # a randomly initialised BERT of this shape (tests, ablations)
        model = IDCM(IDCMConfig(**options)).to(device)
    else:
        model = IDCM.from_minilm(IDCMConfig(**options), device=device)
    history: list[dict] = []
    best, ckpt = -1.0, None
    for stage in config.stages:
        path = work / f"stage{stage}.pt"
        inputs = meta["inputs"] if stage < 3 else inputs_digest(meta["inputs"], {k: getattr(config, k) for k in STAGE3_SETTINGS})
        done = load_checkpoint(path) if path.is_file() else None
        if done is not None and done.meta.get("inputs") != inputs:
            for old in (work / f"stage{s}.pt" for s in config.stages if s >= stage):
                old.unlink(missing_ok=True)
            if config.progress:  # as training's other notes
                print(f"note: IDCM stage checkpoints in {work} are of other inputs or settings: training stage {stage} "
                      "on", file=sys.stderr, flush=True)
            done = None
        if done is not None:
            (work / f"stage{stage}.state.pt").unlink(missing_ok=True)  # left by a run stopped before it removed it
            ckpt = done
            model.load_state_dict(ckpt.state_dict)
            history, best = list(ckpt.meta.get("history", [])), float(ckpt.meta.get("dev_ndcg10", -1.0))
            continue
        # a later stage's saved epochs began from this stage's model as it was: trained again (more epochs, another
        # patience), it may end elsewhere, and those epochs resumed on top of it would mix two runs
        for later in range(stage + 1, 4):
            (work / f"stage{later}.state.pt").unlink(missing_ok=True)
        # each stage's own seed: a run that reuses the stages before it (interrupted, or a stage-3 setting
        # changed) draws the dropout of an uninterrupted run, not the torch RNG as it was after the model's start
        torch.manual_seed(int(np.random.SeedSequence([config.seed, stage]).generate_state(1)[0]))
        score, loss_fn, optimizer = idcm_stage_setup(model, stage, config)
        epochs = config.distill_epochs if stage == 3 else config.epochs
        stage3 = {k: getattr(config, k) for k in STAGE3_SETTINGS if k != "distill_epochs"} if stage == 3 else {}
        start = ckpt.id if ckpt is not None else ""  # the model the stage began from: the stage before's
        state = StageState(work / f"stage{stage}.state.pt", inputs_digest(fingerprint, stage, stage3, start), resume)
        result = fit_stage(stage, score, loss_fn, model, optimizer, data, config, epochs, device, state=state)
        history += result.history
        best = result.best
        ckpt = save_reranker(path, model, "idcm", text, {**meta, "inputs": inputs, "stage": stage, "dev_ndcg10": best,
                                                         "history": history})
        state.path.unlink(missing_ok=True)  # the stage's checkpoint supersedes its epochs' state
    if ckpt is not None:
        ckpt = save_reranker(out, model, "idcm", text, {**dict(ckpt.meta), **meta, "dev_ndcg10": best, "history": history})
    return ckpt, history, best
