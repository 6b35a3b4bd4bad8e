"""scripts/bench_serve.py's ``ckqti serve`` subprocess ends with the script, even a killed one."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ckqti import api
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
