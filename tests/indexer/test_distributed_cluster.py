"""Joining Ray (indexer.distributed_cluster): a local Ray a build starts ends with it, the actors'
PYTHONPATH, and how many actors a cluster holds."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("ray")

from tests.processes import children, descendants, gone_within, running  # noqa: E402


@pytest.mark.slow  # a local Ray started and ended
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc is Linux's")
def test_the_local_ray_a_build_starts_ends_with_it():
    """``kill -9`` of a process that started a local Ray (``connect``): Ray's head processes, which
    ``ray.init`` starts with PR_SET_PDEATHSIG, end with it, and the workers with the raylet. (The
    raylet's two agents follow on their own about a minute later: docs/SCALE.md.)"""
    code = "import time\nfrom indexer.distributed_cluster import connect\nconnect(None)\nprint('up', flush=True)\ntime.sleep(600)\n"
    driver = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              text=True, env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    started = []
    try:
        assert driver.stdout.readline() == "up\n"
        head, started = children(driver.pid), descendants(driver.pid)
        assert head
        driver.kill()
        driver.wait()
        assert [pid for pid in head if not gone_within(pid, 30)] == []
    finally:
        driver.kill()
        driver.wait()
        driver.stdout.close()
        for pid in started:  # what outlives the test (the agents, or all of it on failure) is ended here
            if running(pid):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("root, extra", [("/usr/local/lib/python3.11/dist-packages", False),
                                         ("/venv/lib/python3.11/site-packages", False), ("/home/u/ckqti", True)])
def test_workers_get_the_code_on_their_path_only_from_a_checkout(root, extra, monkeypatch, tmp_path):
    """An install by Debian's pip (dist-packages) put that whole folder first on the actors'
    PYTHONPATH, ahead of a virtual environment's packages, and kept the actors out of Ray's
    running workers; an install is importable there as it is."""
    from indexer import distributed_cluster

    monkeypatch.setattr(distributed_cluster, "ROOT", Path(root))
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PYTHONPATH", raising=False)
    assert distributed_cluster.worker_env() == ({"PYTHONPATH": root} if extra else {})


@pytest.mark.parametrize("device, slots", [(None, (2, True)), ("cuda", (2, True)), ("cpu", (8, False))])
def test_a_cpu_build_on_a_cluster_with_gpus_uses_its_cpus(monkeypatch, device, slots):
    from indexer import distributed_cluster

    class Cluster:
        @staticmethod
        def cluster_resources():
            return {"GPU": 2.0, "CPU": 8.0}

    monkeypatch.setattr(distributed_cluster, "import_ray", lambda: Cluster)
    assert distributed_cluster.cluster_slots(device) == slots
