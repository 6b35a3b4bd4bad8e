"""scripts/bench_rerank.py's options: a checkpoint is timed under its option's name only when it
is a model of that kind."""

from __future__ import annotations

from pathlib import Path

import pytest

from scripts import bench_rerank

NDRM3 = Path(__file__).resolve().parents[2] / "ckqti" / "data" / "models" / "ndrm3-scifact.pt"


def test_a_checkpoint_of_another_kind_is_a_usage_error(tmp_path, capsys):
    # an NDRM3 given as --tk used to be timed and reported as TK
    with pytest.raises(SystemExit) as stop:
        bench_rerank.parse_args(["--tk", str(NDRM3), "--models", "TK", "--devices", "cpu",
                                 "--out", str(tmp_path / "out.json")])
    assert stop.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1].endswith(
        f" error: TK: {NDRM3} is a checkpoint of kind NDRM3, not TK")


def test_a_checkpoint_of_its_kind_is_loaded_once_at_parsing(tmp_path):
    args = bench_rerank.parse_args(["--ndrm3", str(NDRM3), "--models", "NDRM3", "--devices", "cpu",
                                    "--out", str(tmp_path / "out.json")])
    assert {name: c.kind for name, c in args.checkpoints.items()} == {"NDRM3": "ndrm3"}
