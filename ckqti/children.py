"""Child processes that end with the process that started them, and leave Ctrl-C to it.

ckqti starts children only for BM25: training's BM25 stage runs in a child (:func:`call_in_child`), which
starts Anserini's ``java`` indexer and Pyserini's JVM in children of its own (:mod:`ckqti.bm25`). Each
child, as it starts, calls :func:`child_started`:

* it asks Linux to kill it when its parent ends (``prctl(PR_SET_PDEATHSIG, SIGKILL)``), so that a
  killed ``ckqti train`` leaves no JVM behind (elsewhere nothing is set). Linux sends the signal when
  the *thread* that started the child ends: start children from a thread that outlives them (ckqti
  starts them from the calling thread, and waits for them there);
* it ignores Ctrl-C (SIGINT, which a terminal sends to the whole process group): the parent alone
  stops, ends its children, and says so on one line; the children print no traceback of their own.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _prctl() -> Callable | None:
    """libc's ``prctl`` on Linux, else ``None``."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def die_with_parent(parent_pid: int, prctl: Callable | None = None) -> None:
    """Have the kernel SIGKILL this process when its parent ends (Linux; a no-op elsewhere). A parent
    that ended before this call (``parent_pid`` is no longer this process's parent) ends it now."""
    prctl = prctl or _prctl()
    if prctl is None or prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) != 0:
        return
    if os.getppid() != parent_pid:
        os._exit(1)


def child_started(parent_pid: int) -> None:
    """Called first in a child that ``parent_pid`` started (with :func:`start_child`): ignore Ctrl-C,
    die with the parent."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C held back since the start is dropped
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    die_with_parent(parent_pid)


def start_child(proc) -> None:
    """``proc.start()`` for a :mod:`multiprocessing` process (the spawn way) whose target calls
    :func:`child_started` first. SIGINT is blocked in this thread meanwhile, so the child starts with
    it blocked (a signal mask is inherited): a Ctrl-C while the child imports its modules, before
    :func:`child_started`, shows no traceback from it. A Ctrl-C meanwhile still reaches this process,
    once the child has started (:func:`_ctrl_c_after`).

    multiprocessing's resource tracker is started first: the first spawn-way child of a process
    starts it, and starting it *unblocks* SIGINT in the calling thread (``ensure_running`` blocks
    SIGINT and SIGTERM for the tracker's start, then unblocks them, whatever the mask was), so the
    first child started with SIGINT unblocked."""
    if not hasattr(signal, "pthread_sigmask"):
        proc.start()
        return
    from multiprocessing import resource_tracker

    resource_tracker.ensure_running()  # now, not inside proc.start(): a no-op there while it runs
    held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        with _ctrl_c_after():
            proc.start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


@contextlib.contextmanager
def _ctrl_c_after():
    """Python's SIGINT handler (``KeyboardInterrupt``) runs after the block, not inside it. Blocking
    SIGINT in this thread does not keep it out: another thread (torch's, numba's) takes the Ctrl-C,
    and Python runs the handler in the main thread all the same. It raised inside ``proc.start()``,
    after the child was started but before its data was sent or its pid kept: the child died on
    ``EOFError: Ran out of input`` (its traceback), and the caller could not kill it. Only the main
    thread runs Python's handlers: elsewhere, and where the handler is not Python's, nothing changes."""
    previous = signal.getsignal(signal.SIGINT)
    if threading.current_thread() is not threading.main_thread() or not callable(previous):
        yield
        return
    caught = []
    signal.signal(signal.SIGINT, lambda signum, frame: caught.append(frame))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught:
        previous(signal.SIGINT, caught[0])


def preexec_die_with_parent() -> Callable[[], None] | None:
    """A ``preexec_fn`` for :mod:`subprocess` that makes the program die with the calling process
    (Linux; ``None`` elsewhere). ``prctl`` is looked up here, not between fork and exec."""
    prctl = _prctl()
    if prctl is None:
        return None
    parent = os.getpid()
    return lambda: die_with_parent(parent, prctl)


def call_in_child(ended: str, fn: Callable, *args):
    """``fn(*args)`` in a child process started the ``spawn`` way; its result or exception is
    returned or raised here (the child's traceback as its cause). The child ignores Ctrl-C; whatever
    ends this call (Ctrl-C here, an error) kills it, and its own children die with it.

    Args:
        ended: the error's message when the child dies without answering.
    Raises:
        CkqtiError: ``ended``.
    """
    import multiprocessing

    from ckqti.errors import CkqtiError

    ctx = multiprocessing.get_context("spawn")
    receive, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_answer, args=(send, os.getpid(), fn, args))  # not a daemon: it starts children
    answered = False
    try:
        start_child(proc)
        send.close()
        status, value, trace = answer_of(receive)
        answered = True
    except EOFError:
        raise CkqtiError(ended) from None
    finally:
        send.close()
        receive.close()
        if proc.pid is not None:
            if answered:
                proc.join(timeout=10)
            proc.kill()  # interrupted (Ctrl-C, an error here), or too slow to end: it has nothing left to do
            proc.join()
    if status == "error":
        raise value from ChildTraceback(trace)
    return value


def answer_of(conn, poll_seconds: float = 0.25):
    """``conn.recv()``, waiting in polls of ``poll_seconds``: a process-directed Ctrl-C may be taken by
    another thread of this process (torch's and numba's native threads; the calling thread itself blocks
    SIGINT while a child starts), and then does not interrupt a blocking read in the calling thread,
    which would wait for the child, which ignores Ctrl-C; between polls Python raises it here.

    Raises:
        EOFError: the child closed its end (it ended) without answering.
    """
    while not conn.poll(poll_seconds):
        pass
    return conn.recv()


class ChildTraceback(Exception):
    """The traceback of an exception raised in a child, as text (the cause of the one raised here)."""

    def __str__(self) -> str:
        return "\n\n" + self.args[0]


def _answer(conn, parent_pid: int, fn: Callable, args: tuple) -> None:
    """Child process of :func:`call_in_child`: send ``(status, value, traceback)``."""
    import traceback

    child_started(parent_pid)
    try:
        answer = ("ok", fn(*args), "")
    except Exception as err:
        answer = ("error", err, traceback.format_exc())
    try:
        conn.send(answer)
    except Exception as err:  # a result or exception that does not pickle (nothing was sent)
        conn.send(("error", RuntimeError(f"{answer[1]!r} could not be sent back from the child process: {err}"),
                   answer[2]))
    conn.close()
