"""scripts/latent_storage.py on a tiny collection: the report says how it was made and holds the printed rows;
overlap@100 is of what the exhaustive ranking holds when that is under 100."""

from __future__ import annotations

import json
from pathlib import Path

from scripts.latent_storage import main


def tiny_collection(root: Path, data_dir: Path) -> Path:
    """SciFact's first 30 abstracts, its claims, and the first 20 test judgements."""
    scifact = data_dir / "scifact"
    (root / "qrels").mkdir(parents=True)
    with open(scifact / "corpus.jsonl") as f:
        (root / "corpus.jsonl").write_text("".join(line for _, line in zip(range(30), f)))
    (root / "queries.jsonl").write_text((scifact / "queries.jsonl").read_text())
    with open(scifact / "qrels" / "test.tsv") as f:
        (root / "qrels" / "test.tsv").write_text("".join(line for _, line in zip(range(21), f)))  # header + 20
    return root


def test_report_records_the_options_it_ran_with(tmp_path, data_dir, capsys):
    data = tiny_collection(tmp_path / "data", data_dir)
    out = tmp_path / "latent storage.json"
    main(["--data", str(data), "--batch-size", "8", "--out", str(out)])
    report = json.loads(out.read_text())
    # the command used to be "python scripts/latent_storage.py" whatever the options
    assert report["command"] == f"python scripts/latent_storage.py --data {data} --batch-size 8 --out '{out}'"
    assert report["documents"] == 30
    # every ranking holds all 30 documents, so each policy's top 100 is the exhaustive one's (was 30 / 100)
    assert report["rows"] and all(r["overlap_at_100"] == 1.0 for r in report["rows"])
    printed = [line.split(" | ")[0].lstrip("| ") for line in capsys.readouterr().out.splitlines()[3:]]
    assert printed == [r["candidates"] for r in report["rows"]]
