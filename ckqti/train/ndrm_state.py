"""An NDRM run's resumable state (``state.pt``): saved each epoch, checked against the run's settings, restored."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ckqti.errors import CkqtiError
from ckqti.files import save_torch
from ckqti.models.checkpoint import load_checkpoint
from ckqti.train.ndrm_config import TrainConfig
from ckqti.train.stage_state import fresh_note, restore_rng, rng_state, stop_epoch, what_is_left


@dataclass
class RunState:
    """The resumable part of a run besides model and optimizer."""

    epoch: int = 0
    best: float = -1.0
    best_epoch: int = 0
    since_best: int = 0
    history: list[dict] = field(default_factory=list)
    best_id: str = ""


def fingerprint(config: TrainConfig, sources: Mapping[str, Any]) -> str:
    """What a resumed run must share with the saved one (epochs, patience and progress may change)."""
    d = config.to_dict()
    for key in ("epochs", "patience", "progress", "device", "eval_batch_size"):
        d.pop(key)
    if d["max_steps"] is None:  # as states saved before the option were fingerprinted
        d.pop("max_steps")
    return json.dumps({"config": d, "sources": dict(sources)}, sort_keys=True, default=str)


def save_state(path: Path, model: nn.Module, optimizer, state: RunState, fp: str) -> None:
    payload = {
        "fingerprint": fp,
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        **rng_state(model),
        "run": asdict(state),
    }
    save_torch(payload, path)


def saved_id(path: Path) -> str | None:
    """The id of the checkpoint at ``path``, or None when there is none to read."""
    try:
        return load_checkpoint(path).id if path.is_file() else None
    except CkqtiError:
        return None


def saved_run(path: Path) -> RunState | None:
    """The run state saved at ``path`` (read again and checked by :func:`load_state`), or None when there is
    none to read."""
    try:
        return RunState(**torch.load(path, map_location="cpu", weights_only=True)["run"]) if path.is_file() else None
    except Exception:  # a damaged file raises many types: load_state names it
        return None


def trains_more(state: RunState | None, config: TrainConfig) -> bool:
    """Whether a run from ``state`` (None: a new run) has an epoch left to train: fewer than ``config.epochs``
    done and patience not run out."""
    return state is None or (state.epoch < config.epochs and state.since_best < config.patience)


def load_state(path: Path, model: nn.Module, optimizer, fp: str) -> RunState:
    """Restore model, optimizer and RNG from ``path``; returns the run state."""
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # a damaged file raises many types
        raise CkqtiError(f"cannot read the training state ({type(err).__name__}); rerun without --resume", path) from None
    if payload.get("fingerprint") != fp:
        raise CkqtiError("the saved training state has other settings or data; rerun without --resume", path)
    try:
        model.load_state_dict(payload["model"])
        optimizer.load_state_dict(payload["optimizer"])
    except (RuntimeError, ValueError, KeyError):  # a state of another vocabulary or model shape
        raise CkqtiError("the saved training state has other settings or data; rerun without --resume", path) from None
    restore_rng(payload, model)
    return RunState(**payload["run"])


def resume_notes(resume: bool, resuming: bool, state: RunState, path: Path, config: TrainConfig) -> list[str]:
    """What a run does with the saved state at ``path``, in one line: ``--resume`` printed nothing, so
    a resumed run looked like a new one until its next epoch ended, ``--resume`` without a state
    started over silently, and a run without ``--resume`` silently replaced an interrupted run's state."""
    if resuming:
        best = f"best dev nDCG@10 {state.best:.4f} at epoch {state.best_epoch}" if state.best_epoch else "no best yet"
        stop = stop_epoch(state.history, config.epochs, config.patience, RunState.best, state.epoch)
        left = what_is_left(state.epoch, state.since_best, state.best_epoch, stop, config.epochs, config.patience)
        return [f"resuming from {path} after epoch {state.epoch} ({best}): {left}"]
    return [note] if (note := fresh_note(path, resume)) else []
