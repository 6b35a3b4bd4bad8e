"""A re-ranker stage's saved epochs (:mod:`ckqti.train.stage_state`): what is saved comes back, what
is not this run's is refused, and the note says what a run does with the file."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from ckqti.errors import CkqtiError
from ckqti.train.stage_state import StageProgress, StageState, resume_settings


def model_and_optimizer(seed: int = 0):
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(4, 3), nn.Dropout(0.5), nn.Linear(3, 1))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.1)
    model(torch.randn(5, 4)).sum().backward()
    optimizer.step()
    return model, optimizer


def progress_of(model, epoch=2, best=0.5, since=1) -> StageProgress:
    history = [{"epoch": e, "dev_ndcg10": v} for e, v in enumerate([0.25, best, best - 0.1][: epoch + 1])]
    return StageProgress(epoch, best, since, history, copy.deepcopy(model.state_dict()))


def test_a_saved_state_restores_model_optimizer_rng_and_progress(tmp_path):
    model, optimizer = model_and_optimizer()
    state = StageState(tmp_path / "state.pt", "fp", resume=True)
    state.save(model, optimizer, progress_of(model))
    after = torch.rand(3)  # what the RNG draws next, as saved
    other, other_opt = model_and_optimizer(seed=1)
    got = state.restore(other, other_opt)
    assert torch.equal(torch.rand(3), after)
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), other.state_dict().values()))
    assert other_opt.state_dict()["state"][0]["step"] == optimizer.state_dict()["state"][0]["step"]
    assert (got.epoch, got.best, got.since, got.best_epoch) == (2, 0.5, 1, 1)
    assert StageState(tmp_path / "state.pt", "fp", resume=False).restore(other, other_opt) is None  # not resuming
    assert StageState(tmp_path / "none.pt", "fp", resume=True).restore(other, other_opt) is None  # nothing saved


def test_a_state_of_other_settings_or_a_damaged_one_is_refused(tmp_path):
    model, optimizer = model_and_optimizer()
    StageState(tmp_path / "state.pt", "fp").save(model, optimizer, progress_of(model))
    with pytest.raises(CkqtiError, match="other settings or data; rerun without --resume"):
        StageState(tmp_path / "state.pt", "another", resume=True).restore(model, optimizer)
    wider = nn.Sequential(nn.Linear(4, 5), nn.Dropout(0.5), nn.Linear(5, 1))  # the same fingerprint, another shape
    with pytest.raises(CkqtiError, match="other settings or data"):
        StageState(tmp_path / "state.pt", "fp", resume=True).restore(wider, torch.optim.Adam(wider.parameters()))
    (tmp_path / "state.pt").write_bytes((tmp_path / "state.pt").read_bytes()[:100])
    with pytest.raises(CkqtiError, match=r"cannot read the training state \(.*\); rerun without --resume"):
        StageState(tmp_path / "state.pt", "fp", resume=True).restore(model, optimizer)


def test_the_note_says_what_the_run_does_with_the_state(tmp_path):
    model, _ = model_and_optimizer()
    path = tmp_path / "state.pt"
    assert StageState(path, "fp").note(None, 3, 2) is None  # a new run, nothing saved
    assert StageState(path, "fp", resume=True).note(None, 3, 2) == (
        f"nothing to resume ({path} does not exist): training from epoch 1")
    path.write_bytes(b"x")
    assert StageState(path, "fp").note(None, 3, 2) == (
        f"{path} holds an earlier run's state: training from epoch 1 replaces it (--resume continues it)")
    resumed = StageState(path, "fp", resume=True)
    assert resumed.note(progress_of(model, since=0), 3, 2) == (
        f"resuming from {path} after epoch 2 (best dev nDCG@10 0.5000 at epoch 1): epoch 3 of 3 next")
    assert resumed.note(progress_of(model, since=0), 2, 2).endswith(": all 2 epochs are done")
    assert resumed.note(progress_of(model, since=2), 3, 2).endswith(
        ": stopped early: no better dev nDCG@10 in 2 epochs (--patience)")
    start_best = StageProgress(1, 0.25, 1, [{"epoch": 0, "dev_ndcg10": 0.25}, {"epoch": 1, "dev_ndcg10": 0.25}], {})
    assert "(no epoch beat the start's dev nDCG@10 0.2500)" in resumed.note(start_best, 3, 2)  # epoch 1 tied: not better


def test_resume_settings_leave_out_what_a_resumed_run_may_change():
    config = {"epochs": 3, "patience": 2, "seed": 0, "lr_rest": 1e-3, "device": "cpu", "progress": True,
              "selector_loss": "lambda"}
    assert resume_settings(config) == {"seed": 0, "lr_rest": 1e-3, "selector_loss": "lambda"}
    assert resume_settings(config, ("selector_loss",)) == {"seed": 0, "lr_rest": 1e-3}
