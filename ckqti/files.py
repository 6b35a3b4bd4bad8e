"""Files written whole or not at all."""

from __future__ import annotations

import contextlib
import errno
import glob
import os
import shutil
import stat
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ckqti.errors import DiskFullError


@contextmanager
def replacing(path: Path) -> Iterator[Path]:
    """A temporary path beside ``path`` (its folders made) to write to; renamed to ``path`` when the
    block ends without error, removed otherwise: readers never see a half-written ``path``. The
    temporary name is hidden and unique, so two writers of one path never write into each other's
    file (the last to finish wins, whole)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale(path)
    tmp = temp_beside(path)
    try:
        with naming_full_disk(path):
            yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


@contextmanager
def scratch_dir(path: Path) -> Iterator[Path]:
    """A new, empty, hidden folder beside ``path`` (``.NAME.ckqti-tmp-PID-XXXX``) to build ``path``
    in, removed with what is left in it when the block ends; those a killed writer left are
    removed first (:func:`remove_stale`)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale(path)
    tmp = temp_beside(path)
    tmp.mkdir()
    try:
        yield tmp
    finally:
        remove_tree(tmp)


def temp_beside(path: Path) -> Path:
    """A hidden name beside ``path`` for a writer of it: ``.NAME.ckqti-tmp-PID-XXXX``, which
    :func:`remove_stale` removes once that process is gone."""
    return path.with_name(f".{path.name}.ckqti-tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")


@contextmanager
def naming_full_disk(path: Path) -> Iterator[None]:
    """A full disk (or quota) while the block writes ``path`` raises :class:`DiskFullError`
    ``"no space left on device writing PATH"`` (the operating system's error names no file)."""
    try:
        yield
    except OSError as e:
        if e.errno in (errno.ENOSPC, errno.EDQUOT):
            raise DiskFullError(f"{os.strerror(e.errno).lower()} writing {path}") from None
        raise


def remove_stale(path: Path) -> None:
    """Delete temporary files (or folders) of ``path`` left by writers that were killed (their
    process is gone)."""
    for old in path.parent.glob(f".{glob.escape(path.name)}.ckqti-tmp-*"):
        pid = old.name.rsplit("-", 2)[-2]
        if pid.isdigit() and not alive(int(pid)):
            remove_tree(old)


def remove_tree(path: Path) -> None:
    """Delete the folder ``path``, making read-only folders in it writable first where they are this
    user's (a replaced index whose folders were made read-only); what cannot be deleted stays."""
    if not path.is_dir() or path.is_symlink():
        with contextlib.suppress(OSError):
            path.unlink()
        return
    for folder, _, _ in os.walk(path):
        with contextlib.suppress(OSError):
            mode = os.lstat(folder).st_mode
            if not mode & stat.S_IWUSR:
                os.chmod(folder, mode | stat.S_IWUSR | stat.S_IXUSR)
    shutil.rmtree(path, ignore_errors=True)


def alive(pid: int) -> bool:
    """Whether a process ``pid`` exists (on this machine)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):  # another user's, or a platform without signal 0
        return True
    return True
