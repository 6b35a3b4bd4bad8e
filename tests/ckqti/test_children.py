"""Child processes (ckqti.children): answers and errors come back; children die with their parent."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from ckqti.children import ChildTraceback, call_in_child, die_with_parent
from ckqti.errors import CkqtiError
from tests.processes import gone_within, running

LINUX = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG and /proc are Linux's")


def test_call_in_child_returns_the_result():
    assert call_in_child("ended", divmod, 17, 5) == (3, 2)


def test_call_in_child_raises_the_childs_error_with_its_traceback():
    with pytest.raises(ValueError, match="invalid literal") as caught:
        call_in_child("ended", int, "x")
    assert isinstance(caught.value.__cause__, ChildTraceback) and "ValueError" in str(caught.value.__cause__)


def test_a_child_that_dies_without_answering_is_a_one_line_error():
    with pytest.raises(CkqtiError, match="^the child ended$"):
        call_in_child("the child ended", os._exit, 3)


def test_die_with_parent_asks_for_sigkill_and_goes_on_where_refused():
    calls = []
    die_with_parent(-1, prctl=lambda *args: calls.append(args) or -1)  # -1: refused, this process goes on
    assert calls == [(1, int(signal.SIGKILL), 0, 0, 0)]


@LINUX
def test_a_child_whose_parent_already_ended_exits_at_once():
    """The parent may die before the child asks to die with it: the child then sees another parent."""
    code = "from ckqti.children import die_with_parent\ndie_with_parent(1)\nprint('still here')\n"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    assert done.returncode == 1 and done.stdout == ""


@LINUX
def test_a_program_started_with_preexec_die_with_parent_dies_with_it(tmp_path):
    """What Anserini's ``java`` indexer gets (ckqti.bm25.run_index_collection): killing the process
    that started it ends it too."""
    code = ("import subprocess\n"
            "from ckqti.children import preexec_die_with_parent\n"
            "p = subprocess.Popen(['sleep', '600'], preexec_fn=preexec_die_with_parent())\n"
            "print(p.pid, flush=True)\n"
            "p.wait()\n")
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                              env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    child = int(parent.stdout.readline())
    try:
        assert running(child)  # it runs while its parent does (asked to die with the parent, not with its parent's)
        parent.kill()
        parent.wait()
        assert gone_within(child, 30)
    finally:
        if running(child):
            os.kill(child, signal.SIGKILL)
        parent.stdout.close()


WAIT_WHILE_ANOTHER_THREAD_TAKES_CTRL_C = '''
import os, signal, sys, threading, time
from multiprocessing import Pipe
from ckqti.children import answer_of

signal.signal(signal.SIGINT, signal.default_int_handler)  # a shell's background job starts with SIGINT ignored
receive, send = Pipe(duplex=False)  # nothing is ever sent: as a child that ignores Ctrl-C and works on
threading.Thread(target=lambda: (time.sleep(0.5), os.kill(os.getpid(), signal.SIGINT)), daemon=True).start()
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})  # so the kernel hands the signal to the other thread
try:
    answer_of(receive)
except KeyboardInterrupt:
    sys.exit(130)
'''


@pytest.mark.skipif(not hasattr(signal, "pthread_sigmask"), reason="a thread's signal mask")
def test_a_ctrl_c_taken_by_another_thread_still_ends_the_wait_for_a_child(tmp_path):
    """A process-directed SIGINT is handled by any thread not blocking it (torch's native threads in
    ckqti train); a blocking recv in the calling thread then waited for the child, which ignores
    Ctrl-C: ``ckqti train`` hung in CI. Waiting in polls raises the KeyboardInterrupt between them."""
    script = tmp_path / "wait.py"
    script.write_text(WAIT_WHILE_ANOTHER_THREAD_TAKES_CTRL_C)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.Popen([sys.executable, str(script)], env=env, stderr=subprocess.PIPE)
    try:
        assert proc.wait(timeout=60) == 130, proc.stderr.read().decode()
    finally:
        proc.kill()
        proc.wait()


CTRL_C_WHILE_THE_CHILD_IMPORTS = '''
import os, signal

if __name__ == "__mp_main__":  # the spawn way imports this script again in the child, before its target runs
    os.kill(os.getpid(), signal.SIGINT)

if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.default_int_handler)  # a shell's background job starts with SIGINT ignored
    from ckqti.children import call_in_child

    print(call_in_child("the child ended", divmod, 17, 5))
'''


@pytest.mark.skipif(not hasattr(signal, "pthread_sigmask"), reason="a thread's signal mask")
def test_a_ctrl_c_while_the_first_child_imports_its_modules_is_dropped(tmp_path):
    """The child starts with SIGINT blocked, and ignores it from its first call on. The first
    spawn-way child of a process starts multiprocessing's resource tracker, which unblocked SIGINT in
    the starting thread: that child (training's BM25 stage) started with SIGINT unblocked, and a
    Ctrl-C while it imported its modules showed its KeyboardInterrupt traceback. A fresh process,
    so that its child is the first."""
    script = tmp_path / "first.py"
    script.write_text(CTRL_C_WHILE_THE_CHILD_IMPORTS)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    assert (done.returncode, done.stdout, done.stderr) == (0, "(3, 2)\n", "")


CTRL_C_RIGHT_AFTER_THE_CHILD_STARTS = '''
import _thread, signal, sys
from multiprocessing import util

if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.default_int_handler)  # a shell's background job starts with SIGINT ignored
    spawn = util.spawnv_passfds

    def spawn_then_ctrl_c(path, args, passfds):  # as when another thread (torch's) takes a Ctrl-C then
        pid = spawn(path, args, passfds)
        if "--multiprocessing-fork" in args:  # the child, not the resource tracker
            _thread.interrupt_main(signal.SIGINT)
        return pid

    util.spawnv_passfds = spawn_then_ctrl_c
    from ckqti.children import call_in_child

    try:
        call_in_child("the child ended", divmod, 17, 5)
    except KeyboardInterrupt:
        sys.exit(130)
'''


@pytest.mark.skipif(not hasattr(signal, "pthread_sigmask"), reason="a thread's signal mask")
def test_a_ctrl_c_while_the_child_starts_ends_it_without_a_traceback_from_it(tmp_path):
    """A Ctrl-C that another thread takes while the calling thread (which blocks SIGINT) starts the
    child raised KeyboardInterrupt inside ``proc.start()``, before the child's data was sent: the
    child died on ``EOFError: Ran out of input`` with its traceback, and the caller had no pid to kill.
    (Its stderr is this one's: the output ends when the child has ended too.)"""
    script = tmp_path / "start.py"
    script.write_text(CTRL_C_RIGHT_AFTER_THE_CHILD_STARTS)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    assert (done.returncode, done.stderr) == (130, "")
