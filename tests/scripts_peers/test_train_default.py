"""scripts/train_default.py evaluates and indexes on the device its --device names."""

from __future__ import annotations

import shutil

import pytest
import torch

from ckqti.models.specs import DEFAULT_CHECKPOINT
from scripts import train_default


class Reached(Exception):
    """Raised by a stand-in once it has seen the device it was given (nothing more of the script runs)."""


def test_device_reaches_the_test_reranking_and_the_fullrank_index(data_dir, tmp_path, monkeypatch):
    """``--device cpu`` on a machine with CUDA (simulated): the test reranking and ``--fullrank``'s learned
    index run on the CPU as training does (they took CUDA whenever present, whatever ``--device`` said)."""
    seen = {}

    def stand_in(what: str):
        def reached(*args, **kwargs):  # load_for_indexing(path, device), api.index(corpus, out, ..., device=)
            seen[what] = str(kwargs.get("device", args[1] if what == "rerank" else None))
            raise Reached
        return reached

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr("ckqti.bm25.bm25_candidates", lambda *args, **kwargs: {})
    monkeypatch.setattr("ckqti.models.checkpoint.load_for_indexing", stand_in("rerank"))
    monkeypatch.setattr("ckqti.api.index", stand_in("index"))
    argv = ["--eval-only", "--out", str(shutil.copy(DEFAULT_CHECKPOINT, tmp_path / "m.pt")), "--work",
            str(tmp_path / "work"), "--device", "cpu"]
    with pytest.raises(Reached):
        train_default.main(argv)
    monkeypatch.setattr(train_default, "test_runs", lambda *args, **kwargs: {})  # on to the index
    with pytest.raises(Reached):
        train_default.main([*argv, "--fullrank"])
    assert seen == {"rerank": "cpu", "index": "cpu"}
