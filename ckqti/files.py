"""Files written whole or not at all."""

from __future__ import annotations

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
    tmp = path.with_name(f".{path.name}.ckqti-tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
