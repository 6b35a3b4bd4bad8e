"""scripts/bench_serve.py's ``ckqti serve`` subprocess ends with the script, even a killed one; its report
records the command it ran with."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ckqti import api
from scripts import bench_serve
from tests.processes import gone_within, running

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a child dies with its parent on Linux only")
def test_a_killed_bench_leaves_no_server_running(tmp_path):
    """A kill -9 of the script left its ``ckqti serve`` running (and its port and index held)."""
    corpus = tmp_path / "c.tsv"
    corpus.write_text("d1\tcells divide\nd2\tmembranes hold\nd3\tproteins fold\nd4\towls hoot\n")
    api.index(corpus, tmp_path / "idx", model="ndrm2", progress=False)
    code = (
        "import sys, time; from pathlib import Path; from scripts.bench_serve import start_server; "
        "proc, port = start_server(Path(sys.argv[1]), None); print(proc.pid, flush=True); time.sleep(600)"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    bench = subprocess.Popen(
        [sys.executable, "-c", code, str(tmp_path / "idx")], stdout=subprocess.PIPE, text=True, cwd=ROOT, env=env
    )
    server = None
    try:
        line = bench.stdout.readline()
        assert line.strip().isdigit(), f"no server started (exit {bench.poll()})"
        server = int(line)
        assert running(server)
        bench.send_signal(signal.SIGKILL)
        bench.wait()
        assert gone_within(server, 30)
    finally:
        bench.kill()
        bench.wait()
        if server is not None and running(server):
            os.kill(server, signal.SIGKILL)


def test_the_recorded_command_is_main_argv_quoted(tmp_path, monkeypatch, capsys):
    """The command was this process's sys.argv (not main's argv) joined with spaces unquoted: an index
    in 'my index' read back as two arguments. The CLI check and the load levels are stand-ins here
    (they start ckqti subprocesses); one in-process level runs, and the report is the script's."""
    corpus = tmp_path / "c.tsv"
    corpus.write_text("d1\tcells divide\nd2\tmembranes hold\nd3\tproteins fold\nd4\towls hoot\n")
    api.index(corpus, tmp_path / "my index", model="ndrm2", progress=False)
    (tmp_path / "q.tsv").write_text("q1\tcells fold\nq2\towls\n")

    def one_level(index, args, texts, want, searcher):
        def client():
            return bench_serve.InProcessClient(searcher, args.k)
        return [bench_serve.closed_loop(client, texts, want, bench_serve.Level("in-process", 1), args.requests, 5.0)]

    monkeypatch.setattr(bench_serve, "measure", one_level)
    monkeypatch.setattr(bench_serve, "cli_answer", lambda index, query, k: bench_serve.InProcessClient(
        api.open_searcher(index), k).ask(query))
    monkeypatch.setattr(sys, "argv", ["elsewhere.py", "--other"])
    out = tmp_path / "it's here.json"
    argv = ["--index", str(tmp_path / "my index"), "--queries", str(tmp_path / "q.tsv"), "-k", "2",
            "--levels", "1", "--requests", "4", "--out", str(out)]
    assert bench_serve.main(argv) == 0
    report = json.loads(out.read_text())
    assert shlex.split(report["command"]) == ["python", "scripts/bench_serve.py", *argv]
    assert report["queries"]["distinct_searched"] == 2 and report["levels"][0]["requests"] == 4
    capsys.readouterr()
