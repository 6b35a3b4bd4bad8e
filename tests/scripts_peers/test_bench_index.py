"""scripts/bench_index.py end to end on a few documents: the report names the corpus it built, and a
failed build stops the run with the build's own one-line error."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def bench_index(*argv: str) -> subprocess.CompletedProcess:
    return bench_index_with(["--models", "ndrm2"], *argv)


def bench_index_with(models: list[str], *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "scripts" / "bench_index.py"), *models,
                           "--modes", "single", "--threads", "1", *argv], capture_output=True, text=True,
                          cwd=REPO, timeout=300)


def test_report_names_scifact_and_the_documents_cut_from_it(tmp_path, data_dir):
    out = tmp_path / "bench_index.json"
    done = bench_index("--docs", "5", "--out", str(out))
    assert done.returncode == 0, done.stderr
    report = json.loads(out.read_text())
    # it used to name the temporary copy of the first 5 documents, deleted by then
    assert report["corpus"] == "../shared/data/scifact/corpus.jsonl (first 5 documents)"
    assert [(r["mode"], r["docs"]) for r in report["rows"]] == [("single", 5)]


def test_a_failed_build_is_one_line_naming_the_file(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"_id": "1", "text": "protein folding"}\nnot json\n')
    out = tmp_path / "bench_index.json"
    done = bench_index("--corpus", str(corpus), "--out", str(out))
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr == f"bench_index.py: error: the ndrm2 single build failed: {corpus}:2: bad JSON (Expecting value at column 1)\n"
    assert not out.exists()


def test_a_checkpoint_is_built_in_the_work_folder_and_recorded_relative(tmp_path):
    models = tmp_path / "models"
    models.mkdir()
    checkpoint = models / "m.pt"
    shutil.copyfile(REPO / "ckqti" / "data" / "models" / "ndrm3-scifact.pt", checkpoint)
    out = tmp_path / "bench_index.json"
    done = bench_index_with(["--models", str(checkpoint)], "--docs", "3", "--out", str(out))
    assert done.returncode == 0, done.stderr
    # the index went to <checkpoint>-single, beside the checkpoint (the work folder joined to an absolute path)
    assert sorted(p.name for p in models.iterdir()) == ["m.pt"]
    report = json.loads(out.read_text())
    label = os.path.relpath(checkpoint, REPO)  # was the absolute path
    assert [r["model"] for r in report["rows"]] == [label]
    assert report["invocations"][0]["models"] == label


def test_merge_refuses_a_report_of_another_corpus_or_shard_size_before_building(tmp_path):
    out = tmp_path / "bench_index.json"
    earlier = {"corpus": "../shared/data/scifact/corpus.jsonl (first 5 documents)", "shard_size": 500,
               "invocations": [], "rows": [{"model": "ndrm2", "mode": "single", "torch_threads": 1, "docs": 5,
                                            "shards": 1}]}
    out.write_text(json.dumps(earlier))
    # the merged report used to keep the 5-document rows under this run's label, "first 3 documents"
    done = bench_index("--docs", "3", "--merge", "--out", str(out))
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr == (f"bench_index.py: error: {out}: --merge keeps rows of ../shared/data/scifact/corpus.jsonl "
                           "(first 5 documents) in shards of 500, not of ../shared/data/scifact/corpus.jsonl (first 3 "
                           "documents) in shards of 500: pick another --out\n")
    done = bench_index("--docs", "5", "--shard-size", "2", "--merge", "--out", str(out))
    assert done.returncode == 1 and "in shards of 500, not of ../shared/data/scifact/corpus.jsonl (first 5 documents) " \
                                    "in shards of 2" in done.stderr
    assert json.loads(out.read_text()) == earlier
