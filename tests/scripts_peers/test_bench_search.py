"""scripts/bench_search.py's options: a --workdir that does not exist yet is made."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest


class Reached(Exception):
    """Raised by the stand-in for the first step that works in the work folder."""


def test_a_missing_workdir_is_made_with_its_parents(tmp_path, monkeypatch):
    """--workdir took existing folders only: a new one was refused at parsing ('no such directory')."""
    bench = importlib.import_module("scripts.bench_search")
    seen: list[Path] = []

    def first_step(work: Path):
        seen.append(work.parent)
        raise Reached

    monkeypatch.setattr(bench, "scifact", first_step)
    workdir = tmp_path / "new" / "work"
    with pytest.raises(Reached):
        bench.main(["--workdir", str(workdir), "--peers", "", "--out", str(tmp_path / "bench.json")])
    assert seen == [workdir] and workdir.is_dir()
    assert list(workdir.iterdir()) == []  # the temporary folder inside it is gone
