"""Files written whole or not at all."""

from __future__ import annotations

import glob
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def replacing(path: Path) -> Iterator[Path]:
    """A temporary path beside ``path`` (its folders made) to write to; renamed to ``path`` when the
    block ends without error, removed otherwise: readers never see a half-written ``path``. The
    temporary name is hidden and unique, so two writers of one path never write into each other's
    file (the last to finish wins, whole)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale(path)
    tmp = path.with_name(f".{path.name}.ckqti-tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def remove_stale(path: Path) -> None:
    """Delete temporary files of ``path`` left by writers that were killed (their process is gone)."""
    for old in path.parent.glob(f".{glob.escape(path.name)}.ckqti-tmp-*"):
        pid = old.name.rsplit("-", 2)[-2]
        if pid.isdigit() and not alive(int(pid)):
            old.unlink(missing_ok=True)


def alive(pid: int) -> bool:
    """Whether a process ``pid`` exists (on this machine)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):  # another user's, or a platform without signal 0
        return True
    return True
