"""Progress bars draw on a terminal only: a log or a pipe gets no carriage-return lines."""

from __future__ import annotations

import io
import subprocess
import sys

from click.testing import CliRunner

from ckqti.cli import cli
from ckqti.progress import on_terminal, progress_bar


class Terminal(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def test_a_bar_draws_on_a_terminal_only_and_when_shown():
    tty, log = Terminal(), io.StringIO()
    assert sum(progress_bar(range(3), desc="steps", file=tty, mininterval=0)) == 3
    assert "steps" in tty.getvalue() and "\r" in tty.getvalue()
    assert sum(progress_bar(range(3), desc="steps", file=log, mininterval=0)) == 3  # iterates all the same
    assert log.getvalue() == ""
    hidden = Terminal()
    bar = progress_bar(total=3, desc="steps", file=hidden, show=False)
    bar.update(3)
    bar.close()
    assert hidden.getvalue() == "" and bar.disable


def test_the_default_output_is_the_current_stderr(monkeypatch):
    monkeypatch.setattr(sys, "stderr", Terminal())
    assert on_terminal() and not progress_bar(total=1).disable
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert not on_terminal() and progress_bar(total=1).disable
    closed = io.StringIO()
    closed.close()
    assert not on_terminal(closed) and not on_terminal(object())


def test_index_writes_no_bar_to_a_captured_stderr(tmp_path):
    corpus = tmp_path / "c.tsv"
    corpus.write_text("".join(f"d{i}\tcells divide and grow number {i}\n" for i in range(40)))
    res = CliRunner().invoke(cli, ["index", str(corpus), "--out", str(tmp_path / "i"), "--model", "ndrm2"])
    assert res.exit_code == 0, res.output
    assert res.stderr == "" and "indexed 40 documents" in res.stdout


def test_a_piped_stderr_gets_no_bar(tmp_path):
    corpus = tmp_path / "c.tsv"
    corpus.write_text("".join(f"d{i}\tcells divide and grow number {i}\n" for i in range(40)))
    cmd = [sys.executable, "-m", "ckqti", "index", str(corpus), "--out", str(tmp_path / "i"), "--model", "ndrm2"]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert "\r" not in res.stderr and "impacts" not in res.stderr and "analyze" not in res.stderr, res.stderr
