"""One writer at a time: exclusive locks on lock files, held by the operating system.

A lock is ``flock`` on a small file that names its holder's process id (on Windows, which has no
``flock``, a ``msvcrt`` lock on a byte past that id: there other processes cannot read a locked byte). The
system drops it when the holder's process ends, however it ends (``kill -9``, a reboot), so a lock
is never left behind: a leftover file is only a file, taken over by the next writer. The file is
removed on release; a writer that locked a file its holder had just removed notices (the path no
longer names what it locked) and locks the new one.

Used by builds (``OUT.lock`` beside the index they will install) and by appends and compactions
(``INDEX/.writer.lock``); installing a rebuilt index over an old one takes the old one's writer
lock too, so a build never swaps an index out from under an append.
"""

from __future__ import annotations

import contextlib
import errno
import os
import time
from collections.abc import Iterator
from pathlib import Path

from ckqti.errors import CkqtiError
from ckqti.files import alive

try:
    import fcntl
except ImportError:  # Windows: msvcrt's locks (imported when one is taken), and reading an index needs neither
    fcntl = None

WAIT_POLL_S = 0.2
MSVCRT_BYTE = 1024
"""Where a lock is taken without ``flock`` (Windows): the byte at this offset, past the process id
written at the start of the file, which other processes read (:func:`running_build`)."""


@contextlib.contextmanager
def exclusive(path: Path, busy: str, where: Path | None = None, wait: bool = False) -> Iterator[None]:
    """Hold the lock ``path`` while the block runs. Held by another process: a :class:`CkqtiError`
    ``"{busy} (process N)"`` naming ``where`` (default ``path``), or with ``wait``, wait for it."""
    fd = _acquire(path, busy, where or path, wait)
    try:
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        yield
    finally:
        _release(fd, path)


def build_lock_path(out: Path) -> Path:
    """The lock a build of ``out`` holds while it runs: ``OUT.lock`` beside it."""
    return out.with_name(out.name + ".lock")


def running_build(out: Path) -> int | None:
    """The process id of a build of ``out`` running now, else ``None``: the process its lock file
    names, when alive (a killed build leaves the file, naming a process that is gone). Only read:
    taking the lock to test it could refuse a build starting at that moment."""
    try:
        pid = int(build_lock_path(out).read_text().strip() or "0")
    except (OSError, ValueError):
        return None
    return pid if pid > 0 and alive(pid) else None


def _acquire(path: Path, busy: str, where: Path, wait: bool) -> int:
    while True:
        fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)
        if not _lock(fd):
            holder = _holder(fd)
            os.close(fd)
            if not wait:
                raise CkqtiError(f"{busy} (process {holder})" if holder else busy, where) from None
            time.sleep(WAIT_POLL_S)
            continue
        if _same_file(fd, path):
            return fd
        os.close(fd)  # locked a file its holder removed on release: lock the one the path names now


def _lock(fd: int) -> bool:
    """Lock the open file ``fd`` without waiting; False: another process holds it."""
    if fcntl is not None:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True
    import msvcrt

    os.lseek(fd, MSVCRT_BYTE, os.SEEK_SET)
    try:
        msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
    except OSError as e:
        if e.errno in (errno.EACCES, errno.EDEADLOCK):  # held by another
            return False
        raise
    finally:
        os.lseek(fd, 0, os.SEEK_SET)
    return True


def _release(fd: int, path: Path) -> None:
    """Remove the lock file and unlock it. With ``flock`` the file is removed first, while locked:
    removed after, it could be another writer's lock by then. It is removed only while ``path`` still
    names it: a rebuild that swapped its new index in holds the old one's lock at the path of the new
    one's, which an append of the new index may hold by then. Windows refuses to remove an open
    file, so there it is unlocked and closed first, and left where another process has opened it
    meanwhile (that one locks it next)."""
    if fcntl is not None:
        if _same_file(fd, path):
            path.unlink(missing_ok=True)
        os.close(fd)
        return
    import msvcrt

    mine = _same_file(fd, path)
    try:
        os.lseek(fd, MSVCRT_BYTE, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)
    finally:
        os.close(fd)
    if mine:
        with contextlib.suppress(OSError):
            path.unlink(missing_ok=True)


def _holder(fd: int) -> int | None:
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        return int(os.read(fd, 32).decode().strip() or "0") or None
    except (OSError, ValueError):
        return None


def _same_file(fd: int, path: Path) -> bool:
    try:
        now = os.stat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino)
