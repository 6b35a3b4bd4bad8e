"""Verification stamps: what the files of an index looked like (inode, size, modification and
status-change times) when their checksums last matched the manifest, so that opening an unchanged
index does not hash every byte again.

Hashing is what a verified open costs at scale: sha256 reads about 1.5 GB/s here, so an index of a
few GB takes seconds before each ``ckqti search``. A stamp is kept in ``INDEX/.verified.json`` with,
for each file, the checksum it matched and its stat then. A file the manifest names with that
checksum and that still has that stat is taken as matching (after an append only the new files are
hashed). Any write to a file moves its status-change time (``ctime``, on Linux and macOS; on Windows
it is the creation time), which programs cannot set (``utime`` sets only the access and modification
times), and a replaced file has another inode: only damage below the file system (a failing disk)
escapes a stamp, and ``ckqti info --verify`` hashes every file whatever the stamp says.

A file changed within :data:`RACY_NS` of being stamped could keep its times on a file system with
coarse timestamps (git's "racy clean" problem), so files that recent are never stamped: they are
hashed at each open until they are older. Writing the stamp is best effort: an index in a
read-only folder is hashed at every open, as before stamps existed.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path

from ckqti.errors import CkqtiError
from ckqti.files import replacing

STAMPS_FILE = ".verified.json"
STAMPS_VERSION = 2
RACY_NS = 2_000_000_000  # files changed this recently (ns) are not stamped


def file_stat(path: Path) -> list[int] | None:
    """``[inode, size, mtime_ns, ctime_ns]`` of ``path``, None when it cannot be read."""
    try:
        st = path.stat()
    except OSError:
        return None
    return [st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def read_stamps(directory: Path) -> dict[str, dict]:
    """``{name: {"sha256": digest, "stat": stat}}`` of ``directory``'s stamp ({} when there is none,
    or one this ckqti cannot read)."""
    try:
        stamps = json.loads((directory / STAMPS_FILE).read_text())
    except (OSError, ValueError, RecursionError):
        return {}
    files = stamps.get("files") if isinstance(stamps, dict) and stamps.get("version") == STAMPS_VERSION else None
    if not isinstance(files, dict):
        return {}
    return {name: e for name, e in files.items() if isinstance(e, dict) and isinstance(e.get("stat"), list)}


def trusted(stamps: dict[str, dict], directory: Path, name: str, digest: str) -> bool:
    """Whether file ``name`` (relative to ``directory``) was stamped with checksum ``digest`` and
    has not been written since (the stat recorded then)."""
    e = stamps.get(name)
    return e is not None and e.get("sha256") == digest and e["stat"] == file_stat(directory / name)


def record(directory: Path, entries: dict[str, dict], old: dict[str, dict], now_ns: int | None = None) -> bool:
    """Write ``entries`` (``{name: {"sha256", "stat"}}``, each stat taken before its file was hashed,
    so a write during the hashing leaves it stale) as ``directory``'s stamp, leaving out files
    changed within :data:`RACY_NS` of ``now_ns`` (default: now; a check passes the time before its
    first stat, so that a long hash does not age a file into being stamped). Nothing is written
    when that is what ``old`` holds already, or when ``directory`` cannot be written to or is gone
    (removed or replaced during the check: it is not made again). Returns whether the stamp was
    written."""
    now_ns = time.time_ns() if now_ns is None else now_ns
    keep = {name: e for name, e in entries.items() if e["stat"] is not None and max(e["stat"][2:]) <= now_ns - RACY_NS}
    if keep == old:
        return False
    body = {"version": STAMPS_VERSION, "files": keep}
    with contextlib.suppress(OSError, CkqtiError):  # a read-only folder, a full disk: hash again next time
        with replacing(directory / STAMPS_FILE, make_folders=False) as tmp:
            tmp.write_text(json.dumps(body, indent=1, sort_keys=True))
        return True
    return False


def forget(directory: Path) -> None:
    """Remove ``directory``'s stamp (a file failed its checksum: nothing stays trusted)."""
    with contextlib.suppress(OSError):
        os.unlink(directory / STAMPS_FILE)
