"""The saved state of a re-ranker's training stage (ckqti.train.stage_state)."""

from __future__ import annotations

import errno
import io

import pytest
import torch

from ckqti.errors import DiskFullError
from ckqti.train.stage_state import StageProgress, StageState


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


def progress_of(devs: list[float]) -> StageProgress:
    history = [{"epoch": e, "dev_ndcg10": d} for e, d in enumerate(devs)]
    best = max(devs)
    return StageProgress(len(devs) - 1, best, len(devs) - 1 - devs.index(best), history, {})


def test_a_resume_with_fewer_epochs_or_less_patience_than_the_saved_run_used_says_what_it_keeps(tmp_path):
    """Four epochs saved (the best the third), resumed with --epochs 2: the note said 'all 2 epochs are done' and
    kept epoch 3's model, which a run of 2 epochs never reaches (another checkpoint id); --patience 1 said
    'stopped early' where a run of that patience stopped after epoch 1, keeping the start."""
    path = tmp_path / "state.pt"
    path.write_bytes(b"")
    saved = progress_of([0.53, 0.53, 0.78, 0.91, 0.90])
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
    assert state.note(progress_of([0.5, 0.4, 0.3]), 5, 2).endswith("stopped early: no better dev nDCG@10 in 2 epochs "
                                                                   "(--patience)")
