"""A re-ranker stage's saved epochs (:mod:`ckqti.train.stage_state`): what is saved comes back, what
is not this run's is refused, and the note says what a run does with the file."""

from __future__ import annotations

import copy
import errno
import io

import pytest
import torch
from torch import nn

from ckqti.errors import CkqtiError, DiskFullError
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


def full_disk_after(limit: int):
    """An ``open`` whose files refuse, as a full disk does (ENOSPC), the bytes past ``limit``."""
    real = open

    class Full(io.RawIOBase):
        def __init__(self, path, mode="r", *args, **kwargs):
            self.f, self.written = real(path, mode, buffering=0), 0

        def writable(self):
            return True

        def write(self, b):
            if self.written + len(b) > limit:
                raise OSError(errno.ENOSPC, "No space left on device")
            self.written += len(b)
            return self.f.write(b)

        def close(self):
            self.f.close()
            super().close()

    return Full


def test_a_full_disk_while_saving_the_state_is_a_one_line_error_naming_it(tmp_path, monkeypatch):
    """torch wrote through its own file writer, and a full disk surfaced as its RuntimeError ('[enforce fail at
    inline_container.cc:672] . unexpected pos 704 vs 598'), a traceback from ``ckqti train``, naming no cause."""
    import ckqti.files

    model = torch.nn.Linear(64, 64)
    optimizer = torch.optim.Adam(model.parameters())
    progress = StageProgress(1, 0.5, 0, [{"epoch": 0}, {"epoch": 1}], model.state_dict())
    path = tmp_path / "state.pt"
    monkeypatch.setattr(ckqti.files, "open", full_disk_after(4096), raising=False)
    with pytest.raises(DiskFullError, match=rf"^no space left on device writing {path}$"):
        StageState(path, "fp").save(model, optimizer, progress)
    assert list(tmp_path.iterdir()) == []  # no state, no temporary file
    monkeypatch.undo()
    StageState(path, "fp").save(model, optimizer, progress)
    assert StageState(path, "fp", resume=True).restore(model, optimizer).history == progress.history


def progress_from(devs: list[float]) -> StageProgress:
    history = [{"epoch": e, "dev_ndcg10": d} for e, d in enumerate(devs)]
    best = max(devs)
    return StageProgress(len(devs) - 1, best, len(devs) - 1 - devs.index(best), history, {})


def test_a_resume_with_fewer_epochs_or_less_patience_than_the_saved_run_used_says_what_it_keeps(tmp_path):
    """Four epochs saved (the best the third), resumed with --epochs 2: the note said 'all 2 epochs are done' and
    kept epoch 3's model, which a run of 2 epochs never reaches (another checkpoint id); --patience 1 said
    'stopped early' where a run of that patience stopped after epoch 1, keeping the start."""
    path = tmp_path / "state.pt"
    path.write_bytes(b"")
    saved = progress_from([0.53, 0.53, 0.78, 0.91, 0.90])
    assert saved.best_epoch == 3 and saved.stop_epoch(2, 10) == 2 and saved.stop_epoch(4, 1) == 1
    state = StageState(path, "fp", resume=True)
    assert state.note(saved, 2, 10).endswith(
        "trained to epoch 4, past epoch 2 where --epochs 2 and --patience 10 stop: the best of all 4 is kept "
        "(epoch 3: not what a run of these settings ends with)")
    assert state.note(saved, 4, 1).endswith("past epoch 1 where --epochs 4 and --patience 1 stop: the best of all 4 "
                                            "is kept (epoch 3: not what a run of these settings ends with)")
    assert state.note(saved, 3, 10).endswith("past epoch 3 where --epochs 3 and --patience 10 stop: the best of all 4 "
                                             "is kept")  # epoch 3 is that run's best too
    assert state.note(saved, 4, 10).endswith("all 4 epochs are done")
    assert state.note(saved, 4, 1 + 0).startswith(f"resuming from {path} after epoch 4")
    assert state.note(saved, 6, 2).endswith("epoch 5 of 6 next") and state.note(saved, 6, 1).endswith(
        "past epoch 1 where --epochs 6 and --patience 1 stop: the best of all 4 is kept "
        "(epoch 3: not what a run of these settings ends with)")
    assert state.note(progress_from([0.5, 0.4, 0.3]), 5, 2).endswith("stopped early: no better dev nDCG@10 in 2 epochs "
                                                                   "(--patience)")
