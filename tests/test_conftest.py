"""The suite's own guard: under ``CKQTI_NO_SKIPS=1`` (CI) a skipped test fails the run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def skipping_suite(tmp_path) -> Path:
    (tmp_path / "conftest.py").write_text("from tests.conftest import pytest_sessionfinish  # noqa: F401\n")
    (tmp_path / "test_one.py").write_text(
        "import pytest\n\ndef test_runs():\n    pass\n\ndef test_needs_data():\n    pytest.skip('../shared/data is not present')\n")
    return tmp_path


def run_suite(folder: Path, no_skips: str | None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "CKQTI_NO_SKIPS"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    if no_skips is not None:
        env["CKQTI_NO_SKIPS"] = no_skips
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(folder)],
                          cwd=folder, env=env, capture_output=True, text=True, timeout=120)


def test_a_skip_fails_the_run_only_where_skips_are_forbidden(skipping_suite):
    allowed = run_suite(skipping_suite, None)
    assert allowed.returncode == 0, allowed.stdout
    assert "1 passed, 1 skipped" in allowed.stdout
    assert run_suite(skipping_suite, "0").returncode == 0
    forbidden = run_suite(skipping_suite, "1")
    assert forbidden.returncode == 1, forbidden.stdout
    assert "CKQTI_NO_SKIPS=1: 1 skipped test(s) fail this run: Skipped: ../shared/data is not present" in forbidden.stdout


def test_ci_forbids_skips():
    """``.ci/run`` sets the guard before the README's test command."""
    ci = (ROOT / ".ci" / "run").read_text()
    assert ci.index("export CKQTI_NO_SKIPS=1") < ci.index("make test")
