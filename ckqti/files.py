"""Files written whole or not at all."""

from __future__ import annotations

import contextlib
import errno
import glob
import os
import re
import shutil
import stat
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ckqti.errors import DiskFullError, InputError

UNNAMED_STALE_AFTER = 24 * 3600
"""Seconds without a change after which :func:`scratch_dir` deletes a BM25 scratch folder named the
way of builds before session 28, ``NAME.ckqti-tmp-XXXXXXXX`` (``tempfile``'s 8 characters, no pid):
its writer cannot be checked alive, but a live build writes into it (the collection, then Lucene's
segments) far more often than that."""


@contextmanager
def replacing(path: Path, make_folders: bool = True) -> Iterator[Path]:
    """A temporary path beside ``path`` (its folders made, unless not ``make_folders``: then a
    missing folder is a :class:`FileNotFoundError`) to write to; renamed to ``path`` when the
    block ends without error, removed otherwise: readers never see a half-written ``path``. The
    temporary name is hidden and unique, so two writers of one path never write into each other's
    file (the last to finish wins, whole)."""
    path = Path(path)
    if make_folders:
        path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale(path)
    tmp = temp_beside(path)
    try:
        with naming_full_disk(path):
            yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def save_torch(obj: object, path: Path) -> None:
    """``torch.save(obj)`` to ``path`` as :func:`replacing` writes it. Torch's own file writer turns an
    operating system's refusal (a full disk) into a RuntimeError that names no cause ("[enforce fail at
    inline_container.cc:672] . unexpected pos 704 vs 598"); written through a Python file, the refusal is
    raised as itself (a full disk: :class:`DiskFullError` naming ``path``)."""
    import torch

    with replacing(path) as tmp, naming_full_disk(path), open(tmp, "wb") as f:
        writer = _Writes(f)
        try:
            torch.save(obj, writer)
        except RuntimeError:
            if writer.error is not None:
                raise writer.error from None
            raise


class _Writes:
    """A file's ``write`` that keeps the :class:`OSError` it raised (torch wraps it in a RuntimeError)."""

    def __init__(self, f) -> None:
        self.f, self.error = f, None

    def write(self, data) -> int:
        try:
            return self.f.write(data)
        except OSError as e:
            self.error = e
            raise

    def flush(self) -> None:
        self.f.flush()


def check_folder_of(path: str | Path, what: str) -> None:
    """Before any work for a writer of ``path``: the nearest existing path above it must be a folder
    (the folders below it are made), not a file, of which ``mkdir`` would say only "File exists" or
    "Not a directory", after the work and naming another path. ``what``: the output, as the
    :class:`InputError` names it ("the run")."""
    blocking = next((d for d in Path(path).absolute().parents if d.exists()), None)
    if blocking is not None and not blocking.is_dir():
        raise InputError(f"cannot write {what}: {blocking} is a file, not a directory", path)


def check_not_input(out: str | Path, inputs: dict[str, str | Path | None]) -> None:
    """``out`` must be none of the files a command reads (``inputs``: what each is, e.g. "candidates
    run", -> its path or None), which writing ``out`` would replace: an :class:`InputError` naming it."""
    for what, path in inputs.items():
        if path is not None and same_file(out, path):
            raise InputError(f"is also the {what} this command reads; choose another output (writing it would "
                             "replace that input)", out)


def same_file(a: str | Path, b: str | Path) -> bool:
    """Whether ``a`` and ``b`` are paths of one existing file (by device and inode: links and other
    spellings too); an input given as data (a mapping of queries) is none."""
    if not all(isinstance(p, (str, os.PathLike)) for p in (a, b)):
        return False
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):  # either missing, or a name the system refuses (a NUL byte)
        return False


@contextmanager
def scratch_dir(path: Path) -> Iterator[Path]:
    """A new, empty, hidden folder beside ``path`` (``.NAME.ckqti-tmp-PID-XXXX``) to build ``path``
    in, removed with what is left in it when the block ends; those a killed writer left are
    removed first (:func:`remove_stale`, :func:`remove_unnamed_scratch`)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale(path)
    remove_unnamed_scratch(path)
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


def remove_unnamed_scratch(path: Path) -> None:
    """Delete the scratch folders of ``path`` named as before session 28 (no pid, see
    :data:`UNNAMED_STALE_AFTER`) in which nothing changed for that long."""
    unnamed = re.compile(re.escape(path.name) + r"\.ckqti-tmp-[a-z0-9_]{8}")
    for old in path.parent.glob(f"{glob.escape(path.name)}.ckqti-tmp-*"):
        if not (unnamed.fullmatch(old.name) and old.is_dir() and not old.is_symlink()):
            continue
        with contextlib.suppress(FileNotFoundError):  # removed meanwhile by another build of ``path``
            if time.time() - last_change(old) > UNNAMED_STALE_AFTER:
                remove_tree(old)


def last_change(folder: Path) -> float:
    """The latest modification time of ``folder`` and of anything in it (seconds since the epoch)."""
    latest = folder.lstat().st_mtime
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            with contextlib.suppress(OSError):
                latest = max(latest, os.lstat(os.path.join(root, name)).st_mtime)
    return latest


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
    if sys.platform == "win32":
        return _alive_windows(pid)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):  # another user's, or a platform without signal 0
        return True
    return True


_PROCESS_QUERY_LIMITED_INFORMATION, _STILL_ACTIVE = 0x1000, 259


def _alive_windows(pid: int) -> bool:
    """:func:`alive` on Windows, where ``os.kill(pid, 0)`` checks nothing: signal 0 is ``CTRL_C_EVENT``,
    and it can send a Ctrl-C to every process of the console, this one included. A process that cannot be opened
    for another reason than not existing (another user's) counts as alive."""
    import _winapi

    try:
        handle = _winapi.OpenProcess(_PROCESS_QUERY_LIMITED_INFORMATION, False, pid)
    except OSError as e:
        return getattr(e, "winerror", None) != 87  # ERROR_INVALID_PARAMETER: no such process
    try:
        return _winapi.GetExitCodeProcess(handle) == _STILL_ACTIVE
    finally:
        _winapi.CloseHandle(handle)
