"""Files written whole or not at all (ckqti.files.replacing)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ckqti.errors import InputError
from ckqti.files import check_not_input, replacing, same_file


def test_the_old_file_stays_whole_when_writing_fails(tmp_path):
    path = tmp_path / "run.trec"
    path.write_text("old\n")
    with pytest.raises(OSError), replacing(path) as tmp:
        tmp.write_text("half")
        raise OSError("disk full")
    assert path.read_text() == "old\n" and sorted(p.name for p in tmp_path.iterdir()) == ["run.trec"]


def test_two_writers_of_one_path_never_share_a_temporary_file(tmp_path):
    """A fixed temporary name let a second writer (another process, or a thread) write into, rename
    or delete the first one's half-written file."""
    path = tmp_path / "sub" / "model.pt"
    with replacing(path) as first, replacing(path) as second:
        assert first != second and first.parent == path.parent and first.name.startswith(".")
        first.write_text("first")
        second.write_text("second")
    assert path.read_text() == "first"  # the outer block finished last: its file, whole
    assert [p.name for p in path.parent.iterdir()] == ["model.pt"]


def test_a_killed_writer_s_temporary_file_is_removed_by_the_next_write(tmp_path):
    """Unique temporary names are not overwritten by a rerun: a kill -9 mid-write left one for good
    (helper-22: a 2.9 MB hidden run file beside the good one)."""
    import os
    import subprocess

    gone = subprocess.Popen(["true"])
    gone.wait()
    path = tmp_path / "run.trec"
    stale = tmp_path / f".run.trec.ckqti-tmp-{gone.pid}-deadbeef"
    live = tmp_path / f".run.trec.ckqti-tmp-{os.getpid()}-cafe0000"  # a writer still at work: kept
    other = tmp_path / f".other.trec.ckqti-tmp-{gone.pid}-deadbeef"  # another file's: kept
    for p in (stale, live, other):
        p.write_text("half")
    with replacing(path) as tmp:
        tmp.write_text("whole")
    assert path.read_text() == "whole" and not stale.exists() and live.exists() and other.exists()


@pytest.mark.parametrize(("code", "said"), [("ENOSPC", "no space left on device"), ("EDQUOT", "disk quota exceeded")])
def test_a_full_disk_or_quota_names_the_file_being_written(tmp_path, code, said):
    """The operating system's error names no file ('[Errno 28] No space left on device')."""
    import errno

    from ckqti.errors import DiskFullError

    path = tmp_path / "run.trec"
    with pytest.raises(DiskFullError, match=rf"^{said} writing {path}$"):
        with replacing(path):
            raise OSError(getattr(errno, code), "the system's message")
    assert list(tmp_path.iterdir()) == []


def test_a_killed_writer_s_temporary_folder_is_removed_even_read_only(tmp_path):
    """A killed --force install leaves a staged index (or the old one it swapped out) as a hidden
    folder; the next write of the path removes it, its read-only folders too."""
    import subprocess

    gone = subprocess.Popen(["true"])
    gone.wait()
    path = tmp_path / "idx"
    stale = tmp_path / f".idx.ckqti-tmp-{gone.pid}-deadbeef"
    (stale / "shard-00000").mkdir(parents=True)
    (stale / "shard-00000" / "postings.arrow").write_text("x")
    for folder in (stale / "shard-00000", stale):
        folder.chmod(0o555)
    with replacing(path) as tmp:
        tmp.write_text("whole")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["idx"]


def test_an_old_unnamed_bm25_scratch_folder_is_removed_once_unchanged_for_a_day(tmp_path):
    """Builds before session 28 staged in ``NAME.ckqti-tmp-XXXXXXXX`` (no pid): a killed one's
    folder (its collection, half index) was never removed. It is once nothing in it changed for
    ``UNNAMED_STALE_AFTER``; a recent one may be an old build at work and is kept."""
    import os
    import time

    from ckqti.files import UNNAMED_STALE_AFTER, scratch_dir

    def folder(name: str, age: float) -> Path:
        old = tmp_path / name
        (old / "index").mkdir(parents=True)
        (old / "index" / "_0.cfs").write_text("segment")
        when = time.time() - age
        for p in (old / "index" / "_0.cfs", old / "index", old):
            os.utime(p, (when, when))
        return old

    day = UNNAMED_STALE_AFTER
    stale = folder("bm25.ckqti-tmp-k3_x9q0a", day + 60)
    recent = folder("bm25.ckqti-tmp-p0q1r2s3", day - 60)  # an old-version build could still be at work
    touched = folder("bm25.ckqti-tmp-abcdefgh", day + 60)
    (touched / "index" / "_1.cfs").write_text("written just now")  # deep inside: kept
    other = folder("bm25x.ckqti-tmp-k3_x9q0a", day + 60)  # another path's
    mine = folder("bm25.ckqti-tmp-k3_x9q0a.keep", day + 60)  # not tempfile's name
    with scratch_dir(tmp_path / "bm25"):
        pass
    assert not stale.exists() and recent.exists() and touched.exists() and other.exists() and mine.exists()


def test_an_old_unnamed_scratch_folder_another_build_removes_meanwhile_is_passed_over(tmp_path, monkeypatch):
    """Two builds of one path may both find a stale pre-session-28 scratch folder: the one that
    removes it second found it gone while reading its modification times, and failed on
    FileNotFoundError instead of building."""
    import os
    import pathlib
    import shutil
    import time

    from ckqti.files import UNNAMED_STALE_AFTER, scratch_dir

    old = tmp_path / "bm25.ckqti-tmp-k3_x9q0a"
    (old / "index").mkdir(parents=True)
    when = time.time() - UNNAMED_STALE_AFTER - 60
    for p in (old / "index", old):
        os.utime(p, (when, when))
    is_dir = pathlib.Path.is_dir

    def seen_then_removed(self):
        seen = is_dir(self)
        if seen and self == old:  # the other build removes it right after this one saw it
            shutil.rmtree(old)
        return seen

    monkeypatch.setattr(pathlib.Path, "is_dir", seen_then_removed)
    with scratch_dir(tmp_path / "bm25") as tmp:
        assert tmp.is_dir()
    assert list(tmp_path.iterdir()) == []


def test_same_file_knows_a_file_by_any_spelling_and_data_is_no_file(tmp_path):
    (tmp_path / "a.tsv").write_text("q\tx\n")
    (tmp_path / "b").symlink_to(tmp_path / "a.tsv")
    assert same_file(tmp_path / "a.tsv", tmp_path / "." / "a.tsv") and same_file(tmp_path / "b", str(tmp_path / "a.tsv"))
    assert not same_file(tmp_path / "a.tsv", tmp_path / "missing") and not same_file(tmp_path / "a.tsv", {"q": "x"})
    check_not_input(tmp_path / "new", {"queries file": tmp_path / "a.tsv", "corpus": None})
    with pytest.raises(InputError, match=f"^{tmp_path / 'b'}: is also the queries file this command reads"):
        check_not_input(tmp_path / "b", {"queries file": tmp_path / "a.tsv"})
    # a name the system refuses (a NUL byte: os.stat's ValueError) is no file of the inputs, not a traceback
    assert not same_file(tmp_path / "a.tsv", str(tmp_path / "a\0.tsv")) and not same_file("x\0", tmp_path / "a.tsv")
    check_not_input(str(tmp_path / "out\0.trec"), {"queries file": tmp_path / "a.tsv"})


def test_without_make_folders_a_missing_folder_is_an_error_not_made(tmp_path):
    with pytest.raises(FileNotFoundError):
        with replacing(tmp_path / "gone" / "out.txt", make_folders=False) as tmp:
            tmp.write_text("x")
    assert not (tmp_path / "gone").exists()


def test_an_output_below_a_file_is_refused_before_any_work(tmp_path):
    from ckqti.files import check_folder_of

    (tmp_path / "taken").write_text("a file")
    with pytest.raises(InputError, match=f"cannot write the run: {tmp_path / 'taken'} is a file, not a directory"):
        check_folder_of(tmp_path / "taken" / "sub" / "run.trec", "the run")
    check_folder_of(tmp_path / "new" / "sub" / "run.trec", "the run")  # folders yet to be made are fine


def test_a_process_of_another_user_counts_as_alive(monkeypatch):
    """Signal 0 to another user's process is refused (EPERM): it exists, so its temporary files stay."""
    import os

    from ckqti.files import alive

    def refused(pid, sig):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "kill", refused)
    assert alive(12345)


def test_on_windows_alive_asks_the_process_table_and_sends_no_signal(monkeypatch):
    """On Windows ``os.kill(pid, 0)`` is no check: signal 0 is CTRL_C_EVENT, a Ctrl-C to the console's
    processes. ``alive`` opens the process instead (Windows' ``_winapi``, simulated here)."""
    import os
    import sys
    import types

    import ckqti.files
    from ckqti.files import alive

    exit_codes = {10: 259, 11: 0}  # 259: STILL_ACTIVE

    def refused(cls, code, message, winerror):
        error = cls(code, message)
        error.winerror = winerror  # OSError sets it from its 4th argument on Windows only
        return error

    def open_process(access, inherit, pid):
        if pid == 12:
            raise refused(PermissionError, 13, "Access is denied", 5)  # another user's
        if pid not in exit_codes:
            raise refused(OSError, 22, "The parameter is incorrect", 87)
        return pid

    winapi = types.SimpleNamespace(OpenProcess=open_process, GetExitCodeProcess=exit_codes.get,
                                   CloseHandle=lambda handle: None)

    def signalled(pid, sig):
        raise AssertionError(f"signal {sig} sent to {pid}")

    monkeypatch.setattr(ckqti.files, "sys", types.SimpleNamespace(platform="win32"), raising=False)
    monkeypatch.setitem(sys.modules, "_winapi", winapi)
    monkeypatch.setattr(os, "kill", signalled)
    assert [alive(pid) for pid in (10, 11, 12, 13)] == [True, False, True, False]
