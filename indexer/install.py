"""Installing a finished build at ``OUT``, and recovering from an install that was killed.

Every rename happens inside ``OUT``'s parent folder: the finished index is first moved beside
``OUT`` (``.OUT.ckqti-tmp-PID-XXXX``), then swapped with the old index in one atomic exchange
(Linux ``renameat2(RENAME_EXCHANGE)``). Renaming a folder into another folder rewrites its
``..`` entry, which needs write permission on the folder itself; a rename within one parent
does not, so an old index whose folder is read-only (mode 0555) is replaced as well.

Without the exchange (another system, a file system without it) the swap is two renames,
``OUT -> OUT.old-PID`` then ``.OUT.ckqti-tmp-... -> OUT``. A build killed between them leaves no
``OUT``: the old index, still the committed one, waits in ``OUT.old-PID``. The next open or
build of ``OUT`` (:func:`recover`) renames it back; once ``OUT`` exists again, an
``OUT.old-PID`` of a process that is gone is only a leftover of a finished swap and is deleted.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import re
import sys
from pathlib import Path

from ckqti.errors import CkqtiError
from ckqti.files import alive, remove_stale, remove_tree, temp_beside

_RENAME_EXCHANGE, _AT_FDCWD = 2, -100
_REFUSALS = (errno.EACCES, errno.EPERM, errno.EROFS)


def install(final: Path, out: Path, force: bool) -> None:
    """Rename the finished index ``final`` into place at ``out``; an existing index is replaced
    only with ``force``, in one atomic exchange where the system has it, while holding the old
    index's writer lock (an append or compaction of it finishes first).

    Raises:
        CkqtiError: ``out`` exists without ``force``, or its folder refuses the renames.
    """
    if not out.exists():
        _rename(out, os.replace, final, out)
        return
    if not force:
        raise CkqtiError("output exists; pass --force (Python: force=True) to replace it", out)
    staged = temp_beside(out)
    _rename(out, os.replace, final, staged)  # beside out: the swap renames within one folder
    try:
        with old_index_lock(out):
            if _rename(out, exchange, staged, out):
                remove_tree(staged)  # the old index, now at the staged name
                return
            old = out.with_name(out.name + f".old-{os.getpid()}")  # a kill between the two renames leaves it there
            _rename(out, os.replace, out, old)
            try:
                os.replace(staged, out)
            except BaseException:
                os.replace(old, out)
                raise
    except BaseException:
        remove_tree(staged)
        raise
    remove_tree(old)


def _rename(out: Path, rename, source: Path, target: Path) -> bool:
    """``rename(source, target)`` (False: not done); a refusal by permissions is a one-line error
    naming ``out`` and the folder that refused it."""
    try:
        return rename(source, target) is not False
    except OSError as e:
        if e.errno in _REFUSALS:
            folder = out.absolute().parent
            raise CkqtiError(f"cannot install the index here: its folder {folder} refuses renames "
                             f"({os.strerror(e.errno)})", out) from None
        raise


@contextlib.contextmanager
def old_index_lock(out: Path):
    """The writer lock of the index a build replaces (an append or compaction of it finishes first);
    none where its folder cannot be written in (read-only: no append or compaction can be writing it)."""
    from indexer.append import writer_lock

    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(writer_lock(out, wait=True))
        except OSError as e:
            if e.errno not in _REFUSALS:
                raise
        yield


def exchange(a: Path, b: Path) -> bool:
    """Swap two existing paths in one atomic step (Linux ``renameat2(RENAME_EXCHANGE)``): no moment
    without either. False where the C library or the filesystem lacks it (then nothing moved), and
    on other systems (on Windows, ``ctypes.CDLL(None)`` is a TypeError)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return False
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), str(a), None, str(b))


def recover(out: Path) -> None:
    """Undo what a killed install of ``out`` left: with no ``out``, the old index an interrupted
    two-rename swap left in ``OUT.old-PID`` is renamed back (it is still the committed index);
    with ``out`` there, such folders (a finished swap's leftovers) and staged new indexes
    (``.OUT.ckqti-tmp-PID-*``) of processes that are gone are deleted. Folders that cannot be
    renamed or deleted (a read-only parent) are left as they are."""
    for old in stranded(out):
        with contextlib.suppress(OSError):
            if not out.exists() and not out.is_symlink():
                os.rename(old, out)
            else:
                remove_tree(old)
    with contextlib.suppress(OSError):
        remove_stale(out)


def stranded(out: Path) -> list[Path]:
    """The ``OUT.old-PID`` folders of processes that are gone (sorted): with no ``out``, the old
    index an interrupted two-rename swap left; none where ``out``'s parent cannot be listed."""
    pattern = re.compile(re.escape(out.name) + r"\.old-(\d+)")
    try:
        return sorted(p for p in out.parent.iterdir() if (m := pattern.fullmatch(p.name)) and not alive(int(m.group(1))))
    except OSError:
        return []
