"""Progress bars draw on a terminal only: a log or a pipe gets no carriage-return lines, only a whole
line now and then for a long job."""

from __future__ import annotations

import io
import subprocess
import sys

from click.testing import CliRunner

import ckqti.progress
from ckqti.cli import cli
from ckqti.progress import LogLines, on_terminal, progress_bar


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


def test_a_hidden_bar_leaves_no_thread_behind(monkeypatch):
    """tqdm starts a monitor thread with a bar when none runs, and a disabled bar never stops it: every
    API call with ``progress=False`` left one behind."""
    import threading

    import tqdm.auto
    import tqdm.std

    from ckqti.progress import Hidden

    for cls in (tqdm.std.tqdm, tqdm.auto.tqdm, Hidden):  # as in a fresh process: no monitor running yet (a bar
        monkeypatch.setattr(cls, "monitor", None)  # of an earlier test may have left one on its own class)
    before = set(threading.enumerate())
    bar = progress_bar(range(3), show=False)
    assert sum(bar) == 3
    bar.close()
    assert set(threading.enumerate()) - before == set()


def test_the_default_output_is_the_current_stderr(monkeypatch):
    monkeypatch.setattr(sys, "stderr", Terminal())
    assert on_terminal() and not progress_bar(total=1).disable
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert not on_terminal() and isinstance(progress_bar(total=1), LogLines) and progress_bar(total=1, show=False).disable
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


def test_a_long_job_written_to_a_log_gets_a_whole_line_now_and_then(monkeypatch):
    """`ckqti train ... > log` wrote nothing until its first epoch ended (18 minutes on SciFact under load), which
    looks like a hang: a bar shown to a log writes a plain line every LOG_EVERY seconds, none for a shorter job,
    however often the loss is set (a training step), and nothing when it closes."""
    import time

    monkeypatch.setattr(ckqti.progress, "LOG_EVERY", 0.2)
    log = io.StringIO()
    bar = progress_bar(range(24), desc="epoch 1/3", unit="step", file=log)
    for i in bar:
        time.sleep(0.025)
        bar.set_postfix(loss=f"{i / 10:.2f}")
    lines = log.getvalue().split("\n")
    assert lines[-1] == "" and 1 <= len(lines) - 1 <= 3 and "\r" not in log.getvalue(), lines  # 0.6 s: 0.2 s apart
    assert all(line.startswith("epoch 1/3: ") and "/24 [" in line and "loss=" in line for line in lines[:-1])
    assert int(lines[0].split("/24")[0].split()[-1]) >= 6  # the count as it is, not as it was at the start
    quick = io.StringIO()
    hand = progress_bar(total=5, desc="impacts", file=quick)
    hand.update(5)
    hand.close()
    assert sum(progress_bar(range(3), desc="quick", file=quick)) == 3 and quick.getvalue() == ""
