"""Resumable epochs of a re-ranker's training stage (TK's and TKL's one stage, each IDCM stage).

After every epoch :func:`ckqti.train.reranker_stage.fit_stage` writes the stage's state to one file
in the work folder (``state.pt``; IDCM's ``stage<N>.state.pt``): model, optimizer, torch's RNG,
the best weights so far, the history and the epochs since the best. ``resume`` continues from it:
each epoch's examples are drawn from ``(seed, epoch)`` and the RNG is restored, so a resumed run
ends with an uninterrupted run's weights (NDRM's trainer does the same with its own
``state.pt``, :mod:`ckqti.train.ndrm_state`, whose resume note shares :func:`stop_epoch`,
:func:`what_is_left` and :func:`fresh_note`). A state of other settings or data is refused; epochs
and patience may change.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ckqti.errors import CkqtiError
from ckqti.files import save_torch
from ckqti.terminal import counted

# settings a resumed stage may change: how long it trains, and how it shows and scores its work
RESUMABLE_SETTINGS = ("epochs", "distill_epochs", "patience", "progress", "device", "eval_batch_size", "stages")


@dataclass
class StageProgress:
    """Where a stage stands after ``epoch`` epochs: its best dev nDCG@10, the epochs since it,
    the history (epoch 0: the validation before training) and the best weights."""

    epoch: int
    best: float
    since: int
    history: list[dict]
    best_state: Mapping[str, torch.Tensor]

    @property
    def best_epoch(self) -> int:
        return min((h["epoch"] for h in self.history if h["dev_ndcg10"] == self.best), default=0)  # the first to reach it

    def stop_epoch(self, epochs: int, patience: int) -> int:
        """The epoch after which a run of ``epochs`` and ``patience`` from the start stops, as far as the
        history shows (its last epoch: no stop before it)."""
        return stop_epoch(self.history[1:], epochs, patience, self.history[0]["dev_ndcg10"], self.epoch)


def stop_epoch(history: Sequence[Mapping[str, Any]], epochs: int, patience: int, start: float, last: int) -> int:
    """The epoch after which a run of ``epochs`` and ``patience`` stops, as far as ``history`` (its trained
    epochs in order, each's ``epoch`` and ``dev_ndcg10``) shows: ``start`` is the dev score to beat before
    the first, ``last`` the epochs trained (no stop before it: ``last``)."""
    best, since = start, 0
    for h in history:
        if h["epoch"] > epochs or since >= patience:
            return h["epoch"] - 1
        best, since = (h["dev_ndcg10"], 0) if h["dev_ndcg10"] > best else (best, since + 1)
    return last


def what_is_left(epoch: int, since: int, best_epoch: int, stop: int, epochs: int, patience: int) -> str:
    """A resumed run's prospect, for its note: saved after ``epoch`` (``since`` epochs after its best, epoch
    ``best_epoch``), where a run of ``epochs`` and ``patience`` stops after ``stop`` (:func:`stop_epoch`)."""
    if stop < epoch:  # epochs or patience lowered: the saved run went on past them
        return (f"trained to epoch {epoch}, past epoch {stop} where --epochs {epochs} and --patience {patience} stop: "
                f"the best of all {epoch} is kept"
                + (f" (epoch {best_epoch}: not what a run of these settings ends with)" if best_epoch > stop else ""))
    if since >= patience:
        return f"stopped early: no better dev nDCG@10 in {counted(since, 'epoch')} (--patience)"
    if epoch >= epochs:
        return f"all {epochs} epochs are done" if epochs > 1 else "its one epoch is done"
    return f"epoch {epoch + 1} of {epochs} next"


def fresh_note(path: Path, resume: bool) -> str | None:
    """A run that resumes nothing, in one line: ``resume`` found no state at ``path``, or a new run replaces it."""
    if resume:
        return f"nothing to resume ({path} does not exist): training from epoch 1"
    if path.is_file():
        return f"{path} holds an earlier run's state: training from epoch 1 replaces it (--resume continues it)"
    return None


def rng_state(model: nn.Module) -> dict[str, Any]:
    """The RNG states a training step of ``model`` draws from: torch's CPU generator and, for a model on a
    CUDA device, that device's (None elsewhere). Not ``torch.cuda.get_rng_state_all()``: it initialised
    CUDA for a run on the CPU, and its list, by device index, could not be restored where fewer are seen."""
    device = next(model.parameters()).device
    return {"torch_rng": torch.get_rng_state(),
            "cuda_rng": torch.cuda.get_rng_state(device) if device.type == "cuda" else None}


def restore_rng(saved: Mapping[str, Any], model: nn.Module) -> None:
    """Sets the generators :func:`rng_state` saved (a CUDA state only for a model on a CUDA device). A state
    saved by earlier versions holds every CUDA device's generator in a list: the model's device's is taken."""
    torch.set_rng_state(saved["torch_rng"])
    device, cuda = next(model.parameters()).device, saved.get("cuda_rng")
    if isinstance(cuda, list):
        cuda = cuda[device.index or 0] if device.type == "cuda" and (device.index or 0) < len(cuda) else None
    if cuda is not None and device.type == "cuda":
        torch.cuda.set_rng_state(cuda, device)


@dataclass(frozen=True)
class StageState:
    """The state file of one stage: ``fingerprint`` is what a resumed run must share with the saved
    one; ``resume`` whether to continue from it (else a new run replaces it)."""

    path: Path
    fingerprint: str
    resume: bool = False

    def save(self, model: nn.Module, optimizer, progress: StageProgress) -> None:
        payload = {
            "fingerprint": self.fingerprint,
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            **rng_state(model),
            "progress": {"epoch": progress.epoch, "best": progress.best, "since": progress.since,
                         "history": progress.history},
            "best_state": progress.best_state,
        }
        save_torch(payload, self.path)

    def restore(self, model: nn.Module, optimizer) -> StageProgress | None:
        """Model, optimizer and RNG as saved, and the stage's progress; None when not resuming or
        there is no state to resume."""
        if not (self.resume and self.path.is_file()):
            return None
        refused = CkqtiError("the saved training state has other settings or data; rerun without --resume", self.path)
        try:
            payload = torch.load(self.path, map_location="cpu", weights_only=True)
        except Exception as err:  # a damaged file raises many types
            raise CkqtiError(f"cannot read the training state ({type(err).__name__}); rerun without --resume",
                             self.path) from None
        if not isinstance(payload, dict) or payload.get("fingerprint") != self.fingerprint:
            raise refused
        try:
            model.load_state_dict(payload["model"])
            optimizer.load_state_dict(payload["optimizer"])
            saved = payload["progress"]
            progress = StageProgress(int(saved["epoch"]), float(saved["best"]), int(saved["since"]),
                                     list(saved["history"]), payload["best_state"])
        except (RuntimeError, ValueError, KeyError, TypeError):
            raise refused from None
        restore_rng(payload, model)
        return progress

    def note(self, progress: StageProgress | None, epochs: int, patience: int) -> str | None:
        """What the run does with the state, in one line: resumes (after which epoch, and what is left),
        finds nothing to resume, or replaces an earlier run's state."""
        if progress is not None:
            best = (f"best dev nDCG@10 {progress.best:.4f} at epoch {progress.best_epoch}" if progress.best_epoch
                    else f"no epoch beat the start's dev nDCG@10 {progress.best:.4f}")
            left = what_is_left(progress.epoch, progress.since, progress.best_epoch,
                                progress.stop_epoch(epochs, patience), epochs, patience)
            return f"resuming from {self.path} after epoch {progress.epoch} ({best}): {left}"
        return fresh_note(self.path, self.resume)

def show(note: str | None, progress: bool) -> None:
    if note is not None and progress:
        print(f"note: {note}", file=sys.stderr, flush=True)


def resume_settings(config: Mapping[str, Any], exclude: tuple[str, ...] = ()) -> dict[str, Any]:
    """``config`` (a training config's dict) without the settings a resumed stage may change."""
    return {k: v for k, v in config.items() if k not in RESUMABLE_SETTINGS + exclude}
