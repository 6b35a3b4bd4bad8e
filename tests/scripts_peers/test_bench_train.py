"""scripts/bench_train.py times ckqti train's own steps: its rows follow the training data, and its
stand-in candidates are fixed by the seed."""

from __future__ import annotations

import json
import math
import shlex

import pytest
import torch

from scripts import bench_train


def test_random_candidates_are_distinct_documents_fixed_by_the_seed():
    docids = [f"d{i}" for i in range(500)]
    a = bench_train.random_candidates(docids, ["q2", "q1"])
    assert list(a) == ["q1", "q2"]
    assert all(len(c) == bench_train.CANDIDATES == len(set(c)) and set(c) <= set(docids) for c in a.values())
    assert a == bench_train.random_candidates(docids, ["q1", "q2"])
    assert a != bench_train.random_candidates(docids, ["q1", "q2"], seed=1)


def test_a_tk_row_times_real_steps_of_scifact_train(data_dir, monkeypatch):
    from ckqti.train import reranker_epoch
    from indexer.readers import read_qrels, read_queries

    steps = []
    real = reranker_epoch.train_epoch

    def counting(score, loss_fn, model, optimizer, data, config, epoch, device):
        before = [p.detach().clone() for p in model.parameters()]
        out = real(score, loss_fn, model, optimizer, data, config, epoch, device)
        steps.append(out["steps"])
        assert any(not torch.equal(b, p) for b, p in zip(before, model.parameters()))  # the steps trained it
        return out

    monkeypatch.setattr(reranker_epoch, "train_epoch", counting)
    scifact = data_dir / "scifact"
    queries, qrels = read_queries(scifact / "queries.jsonl"), read_qrels(scifact / "qrels" / "train.tsv")
    [row] = bench_train.bench_rerankers("tk", torch.device("cpu"), 3, queries, qrels)
    assert steps == [2, 3]  # untimed, then timed
    assert row["documents_per_step"] == 2 * 16  # a positive and a negative per triple, 16 triples
    # an epoch: one triple for each training claim (90% of them; dev is carved out), 16 a step
    assert math.ceil(0.85 * len(qrels) / 16) <= row["epoch_steps"] <= math.ceil(0.9 * len(qrels) / 16)
    assert row["steps_per_second"] > 0
    assert row["epoch_seconds"] == pytest.approx(row["epoch_steps"] * row["seconds_per_step"])


def test_the_recorded_command_keeps_arguments_with_spaces_whole(tmp_path, data_dir, monkeypatch, capsys):
    """The command was joined with spaces unquoted: '--out "my results/x.json"' read back as two
    arguments. The timed training is a stand-in here (it takes minutes); the report is the script's."""
    def row(m, device, steps, queries, qrels):
        assert steps == 1 and queries and qrels  # the script's parsed options and SciFact's training data
        return [dict(model=m, stage="train", device=str(device), steps_per_second=1.0, documents_per_second=32.0,
                     epoch_seconds=9.0, peak_cuda_gib=None)]

    monkeypatch.setattr(bench_train, "bench_rerankers", row)
    monkeypatch.setattr(bench_train, "bench_ndrm3", lambda *a: row("ndrm3", *a))
    out = tmp_path / "my results" / "it's here.json"
    argv = ["--models", "ndrm3,tk", "--devices", "cpu", "--steps", "1", "--out", str(out)]
    bench_train.main(argv)
    report = json.loads(out.read_text())
    assert shlex.split(report["command"]) == ["python", "scripts/bench_train.py", *argv]
    assert [r["model"] for r in report["rows"]] == ["ndrm3", "tk"]
    capsys.readouterr()
