"""Writer locks (indexer.locks) where the system lacks what Linux has: no ``fcntl`` (Windows), no
``os.pread`` (Windows), simulated here on Linux."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import subprocess
import sys

import pytest

from ckqti.errors import CkqtiError
from indexer import locks


def test_the_holder_is_named_without_os_pread(tmp_path, monkeypatch):
    monkeypatch.delattr(os, "pread")
    path = tmp_path / "out.lock"
    with locks.exclusive(path, "busy"):
        with pytest.raises(CkqtiError, match=rf"busy \(process {os.getpid()}\)"):
            with locks.exclusive(path, "busy"):
                pass


class WindowsLocks:
    """``msvcrt.locking`` as Windows keeps it (a byte locked by one open file is refused to any other),
    and ``os.unlink`` refusing a file that is open, as Windows does."""

    LK_UNLCK, LK_NBLCK = 0, 2

    def __init__(self):
        self.locked: dict[tuple[int, int, int], int] = {}  # (device, inode, offset) -> fd
        self.seen: set[int] = set()

    def locking(self, fd: int, mode: int, nbytes: int) -> None:
        assert nbytes == 1
        st = os.fstat(fd)
        key = (st.st_dev, st.st_ino, os.lseek(fd, 0, os.SEEK_CUR))
        self.seen.add(fd)
        if mode == self.LK_UNLCK:
            assert self.locked.pop(key) == fd
        elif key in self.locked:
            raise PermissionError(errno.EACCES, "Permission denied")
        else:
            self.locked[key] = fd

    def unlink(self, real):
        def unlink(path, *args, **kwargs):
            st = os.stat(path)
            for fd in self.seen:
                try:
                    held = os.fstat(fd)
                except OSError:
                    continue
                if (held.st_dev, held.st_ino) == (st.st_dev, st.st_ino):
                    raise PermissionError(errno.EACCES, "The process cannot access the file", str(path))
            real(path, *args, **kwargs)
        return unlink


def test_without_flock_a_lock_is_a_msvcrt_byte_past_the_process_id(tmp_path, monkeypatch):
    """Windows: the lock is msvcrt's on a byte past the process id (which stays readable), and the
    file is removed after it is closed (Windows refuses to remove an open file)."""
    windows = WindowsLocks()
    monkeypatch.setattr(locks, "fcntl", None)
    monkeypatch.setitem(sys.modules, "msvcrt", windows)
    monkeypatch.setattr(os, "unlink", windows.unlink(os.unlink))
    out = tmp_path / "idx"
    path = locks.build_lock_path(out)
    for _ in range(2):  # taken, released, taken again
        with locks.exclusive(path, "busy"):
            assert locks.running_build(out) == os.getpid()
            assert [offset for _, _, offset in windows.locked] == [locks.MSVCRT_BYTE]
            with pytest.raises(CkqtiError, match=rf"busy \(process {os.getpid()}\)"):
                with locks.exclusive(path, "busy"):
                    pass
        assert not windows.locked and not path.exists()


SEARCH_WITHOUT_FCNTL = """
import json, sys
sys.modules["fcntl"] = None  # as on Windows: importing it fails
from ckqti import api
result = api.search("vitamin deficiency", sys.argv[1], k=5)
print(json.dumps([[h.docid, h.score] for h in result.hits]))
print(api.info(sys.argv[1]).num_docs)
"""


def test_searching_needs_no_fcntl(scifact_index):
    """Reading an index (search, info) imports nothing Windows lacks: ``fcntl`` failed every command
    that opens an index there."""
    from ckqti import api

    proc = subprocess.run([sys.executable, "-c", SEARCH_WITHOUT_FCNTL, str(scifact_index)], capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})  # as the tests run
    assert proc.returncode == 0, proc.stderr
    hits, num_docs = proc.stdout.splitlines()[-2:]
    expected = api.search("vitamin deficiency", scifact_index, k=5).hits
    assert json.loads(hits) == [[h.docid, pytest.approx(h.score)] for h in expected] and len(expected) == 5
    assert int(num_docs) == api.info(scifact_index).num_docs


def test_a_lock_names_its_holder_alone_and_is_removed_on_release(tmp_path):
    """A leftover file naming a longer process id is overwritten, not written over in part (which
    would name another process); the file goes with the release."""
    out = tmp_path / "idx"
    path = locks.build_lock_path(out)
    path.write_text("9" * 12)
    with locks.exclusive(path, "busy"):
        assert path.read_text() == str(os.getpid()) and locks.running_build(out) == os.getpid()
    assert not path.exists()


def test_a_lock_file_naming_a_process_that_is_gone_is_no_running_build(tmp_path):
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    out = tmp_path / "idx"
    for content in (done.stdout.strip(), "0", "", "not a number"):
        locks.build_lock_path(out).write_text(content)
        assert locks.running_build(out) is None, content


def test_a_lock_file_its_holder_removed_before_it_was_locked_is_not_the_one_held(tmp_path, monkeypatch):
    """Opened, then removed by its holder's release before this process locked it: the lock taken
    is on the file the path names afterwards, which names this process."""
    out = tmp_path / "idx"
    path = locks.build_lock_path(out)
    real, locked = locks._lock, []

    def racing(fd):
        if not locked:
            path.unlink()  # the holder's release, between this process's open and its lock
        locked.append(fd)
        return real(fd)

    monkeypatch.setattr(locks, "_lock", racing)
    with locks.exclusive(path, "busy"):
        assert len(locked) == 2 and locks.running_build(out) == os.getpid()


def test_a_rebuild_s_release_leaves_the_lock_of_a_writer_of_the_new_index(tmp_path, monkeypatch):
    """A rebuild's install holds the old index's writer lock while it swaps the new index in and deletes
    the old one (seconds for a large index). An append of the new index starting meanwhile locks the new
    index's lock file, which the install's release then removed, by its path: a third writer made a new
    lock file, locked it, and wrote the index beside the append."""
    from indexer import install as install_mod
    from indexer.append import writer_lock

    out, final = tmp_path / "idx", tmp_path / "final"
    for folder in (out, final):
        folder.mkdir()
        (folder / "manifest.json").write_text("{}")
    appending = contextlib.ExitStack()
    real = install_mod.remove_tree

    def removing(path):
        if path.name != out.name:  # the old index, swapped out: an append of the new one begins meanwhile
            appending.enter_context(writer_lock(out))
        real(path)

    monkeypatch.setattr(install_mod, "remove_tree", removing)
    with appending:
        install_mod.install(final, out, force=True)
        assert (out / "manifest.json").exists() and not final.exists()
        with pytest.raises(CkqtiError, match="another append, compaction or build is writing this index"):
            with writer_lock(out):
                pass
