"""Watching processes in tests that kill a parent and check its children end (Linux ``/proc``)."""

from __future__ import annotations

import os
import signal
import time


def running(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie (one whose parent died waits to be reaped)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (FileNotFoundError, ProcessLookupError):
        return False


def gone_within(pid: int, seconds: float) -> bool:
    """Whether process ``pid`` has ended (or is a zombie) within ``seconds``: a generous deadline for a
    kernel's signal to land on a loaded machine, not a measured time."""
    deadline = time.monotonic() + seconds
    while running(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not running(pid)


def children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (read from every ``/proc/N/stat``)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        found.append(int(entry))
            except (FileNotFoundError, ProcessLookupError, ValueError, IndexError):
                continue
    return found


def descendants(pid: int) -> list[int]:
    """``pid``'s children, their children, and so on."""
    found, todo = [], [pid]
    while todo:
        kids = children(todo.pop())
        found += kids
        todo += kids
    return found


def sigint_from_a_terminal() -> None:
    """A ``preexec_fn`` for a child a test sends SIGINT: it starts with SIGINT's default action, as a
    command typed at a terminal does. A script's background job (``make test &``, ``nohup ... &``) starts
    with SIGINT ignored and a child inherits that; Python then raises no ``KeyboardInterrupt``, and the
    test's Ctrl-C is lost (its child ran to the test's timeout, or exited 0)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
