"""scripts/channel_sweep.py's report records the command it ran with, quoted so that it runs again."""

from __future__ import annotations

import json
import shlex
from types import SimpleNamespace

import pyarrow as pa

from indexer.readers import read_qrels
from scripts import channel_sweep


def test_the_recorded_command_keeps_arguments_with_spaces_whole(tmp_path, data_dir, monkeypatch, capsys):
    """The command was joined with spaces unquoted: '--work "my work"' read back as two arguments.
    The index, search and BM25 are stand-ins here (the sweep's own runs take minutes); the qrels,
    the evaluation and the report are the script's."""
    docid = next(iter(next(iter(read_qrels(data_dir / "scifact" / "qrels" / "test.tsv").values()))))
    # a judged SciFact abstract, which every stand-in run retrieves alone
    index = SimpleNamespace(num_docs=1, shards=[SimpleNamespace(docs=pa.table({"docid": [docid]}))])
    monkeypatch.setattr(channel_sweep, "latent_index", lambda path: index)
    monkeypatch.setattr(channel_sweep, "Searcher", lambda index, channel_weights: channel_weights["one"])
    monkeypatch.setattr(channel_sweep, "fullrank", lambda weight, queries: {q: [(docid, weight)] for q in queries})
    monkeypatch.setattr(channel_sweep, "bm25_candidates", lambda corpus, queries, work, k: {q: [docid] for q in queries})
    (tmp_path / "my index").mkdir()
    argv = ["--index", str(tmp_path / "my index"), "--grid", "0.5,2", "--work", str(tmp_path / "my work"),
            "--out", str(tmp_path / "it's here.json")]
    assert channel_sweep.main(argv) == 0
    report = json.loads((tmp_path / "it's here.json").read_text())
    assert shlex.split(report["command"]) == ["python", "scripts/channel_sweep.py", *argv]
    assert set(report["dev"]) == {"0.5", "2.0"}
    capsys.readouterr()
