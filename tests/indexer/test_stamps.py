"""Verification stamps: an unchanged index opens without hashing its files again; a file written
since, stamped with another checksum, or too recent to stamp safely is hashed."""

import json
import shutil
import time

import pytest

import indexer.format as format_mod
import indexer.stamps as stamps
from ckqti import api
from ckqti.errors import IndexFormatError
from indexer.format import DOCS_FILE, POSTINGS_FILE, Manifest
from indexer.stamps import STAMPS_FILE
from retriever.index import Index
from retriever.info import index_info


@pytest.fixture
def idx(tmp_path, scifact_index):
    dst = tmp_path / "idx"
    shutil.copytree(scifact_index, dst)
    (dst / STAMPS_FILE).unlink(missing_ok=True)  # the shared index's own stamp: another copy's inodes
    return dst


def files_of(idx):
    """The files a verification hashes: the vocabulary and each shard's four."""
    return 1 + 4 * len(Manifest.read(idx).shards)


@pytest.fixture
def hashed(monkeypatch):
    """The files hashed, in order, by every verification from here on."""
    seen = []
    real = format_mod.file_checksum

    def counting(path, *args):
        seen.append(path.name)
        return real(path, *args)

    monkeypatch.setattr(format_mod, "file_checksum", counting)
    return seen


@pytest.fixture
def settled(monkeypatch):
    """Stamping as if the files were written long ago (the clock 10 s ahead of them)."""
    real = time.time_ns
    monkeypatch.setattr(stamps.time, "time_ns", lambda: real() + 10 * stamps.RACY_NS)


def test_an_unchanged_index_opens_without_hashing_again(idx, hashed, settled):
    Index(idx).close()
    assert len(hashed) == files_of(idx) and (idx / STAMPS_FILE).is_file()
    Index(idx).close()
    assert len(hashed) == files_of(idx)


def test_files_written_within_the_racy_window_are_not_stamped(idx, hashed, monkeypatch):
    for f in idx.rglob("*.arrow"):
        f.write_bytes(f.read_bytes())  # just written: the same bytes, a new ctime
    now = time.time_ns()
    monkeypatch.setattr(stamps.time, "time_ns", lambda: now)  # however slow the opens below (a busy machine)
    Index(idx).close()
    Index(idx).close()
    assert not (idx / STAMPS_FILE).exists() and len(hashed) == 2 * files_of(idx)


def test_a_write_after_stamping_is_caught_by_its_checksum(idx, hashed, settled):
    Index(idx).close()
    time.sleep(0.05)  # past the file system's timestamp granularity
    path = idx / "shard-00000" / POSTINGS_FILE
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 1  # same size, same inode: only the times tell
    with open(path, "r+b") as f:
        f.write(data)
    with pytest.raises(IndexFormatError, match="checksum mismatch"):
        Index(idx)
    assert not (idx / STAMPS_FILE).exists()  # nothing stays trusted after a mismatch


def test_a_write_while_hashing_leaves_the_stamp_stale_not_wrong(idx, monkeypatch, settled):
    real = format_mod.file_checksum
    path = idx / "shard-00000" / DOCS_FILE

    def then_written(p, *args):
        digest = real(p, *args)
        if p == path:  # hashed as it was, then damaged before the stamp is written
            time.sleep(0.05)
            data = bytearray(p.read_bytes())
            data[len(data) // 2] ^= 1
            with open(p, "r+b") as f:
                f.write(data)
        return digest

    monkeypatch.setattr(format_mod, "file_checksum", then_written)
    Index(idx).close()
    monkeypatch.setattr(format_mod, "file_checksum", real)
    with pytest.raises(IndexFormatError, match="checksum mismatch"):
        Index(idx)


def test_after_a_compaction_only_the_new_files_are_hashed(idx, hashed, settled):
    Index(idx).close()
    api.compact(idx, 10_000)  # a new manifest and shard; the vocabulary stays
    hashed.clear()
    Index(idx).close()
    assert sorted(hashed) == sorted(["postings.arrow", "segments.arrow", "terms.arrow", "docs.arrow"])
    hashed.clear()
    Index(idx).close()
    assert hashed == []


def test_a_file_stamped_with_another_checksum_is_hashed(idx, hashed, settled):
    Index(idx).close()
    body = json.loads((idx / STAMPS_FILE).read_text())
    body["files"]["vocab.arrow"]["sha256"] = "0" * 64  # as if stamped for another manifest's vocabulary
    (idx / STAMPS_FILE).write_text(json.dumps(body))
    hashed.clear()
    Index(idx).close()
    assert hashed == ["vocab.arrow"]


@pytest.mark.parametrize("content", ["not json", "[]", json.dumps({"version": 99, "files": {}}),
                                     "[" * 100_000 + "]" * 100_000])
def test_an_unreadable_stamp_means_hashing(idx, hashed, content):
    (idx / STAMPS_FILE).write_text(content)
    Index(idx).close()
    assert len(hashed) == files_of(idx)


def test_info_verify_hashes_whatever_the_stamp_says(idx, hashed, settled):
    Index(idx).close()
    hashed.clear()
    assert index_info(idx, verify=True).verified and len(hashed) == files_of(idx)


def test_an_index_that_cannot_be_written_to_still_opens(idx, hashed, settled, monkeypatch):
    def refused(path, **kwargs):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(stamps, "replacing", refused)
    Index(idx).close()
    Index(idx).close()
    assert not (idx / STAMPS_FILE).exists() and len(hashed) == 2 * files_of(idx)


def test_the_racy_window_counts_from_before_the_hashing(idx, monkeypatch):
    """A long hash must not age a file into being stamped: a write in its timestamp's tick after
    the stat, on a file system with coarse timestamps, would leave the same stat."""
    for f in idx.rglob("*.arrow"):
        f.write_bytes(f.read_bytes())  # just written
    clock = [time.time_ns()]
    monkeypatch.setattr(stamps.time, "time_ns", lambda: clock[0])
    real = format_mod.file_checksum

    def slow(path, *args):  # each file takes 10 s to hash
        clock[0] += 5 * stamps.RACY_NS
        return real(path, *args)

    monkeypatch.setattr(format_mod, "file_checksum", slow)
    Index(idx).close()
    assert not (idx / STAMPS_FILE).exists()


def test_an_index_removed_while_it_was_checked_is_not_made_again(idx, monkeypatch, settled):
    """The stamp is written into the index's folder as it is, never into a new one (a `rm -rf` or a
    replacement during the check would leave a folder holding only a stamp)."""
    real = format_mod.file_checksum
    last = idx / Manifest.read(idx).shards[-1].name / "docs.arrow"

    def then_removed(path, *args):
        digest = real(path, *args)
        if path == last:
            shutil.rmtree(idx)
        return digest

    monkeypatch.setattr(format_mod, "file_checksum", then_removed)
    format_mod.verify_files(idx, Manifest.read(idx))
    assert not idx.exists()


def test_a_file_whose_status_change_time_is_recent_is_not_stamped(tmp_path):
    """``utime`` can set a written file's modification time back, not its status-change time: the
    latest of the two decides whether a file is old enough to stamp."""
    now = 100 * stamps.RACY_NS
    old, recent = now - 2 * stamps.RACY_NS, now - stamps.RACY_NS // 2
    entries = {"a": {"sha256": "x", "stat": [1, 2, old, recent]}, "b": {"sha256": "y", "stat": [3, 4, old, old]}}
    assert stamps.record(tmp_path, entries, {}, now)
    assert set(stamps.read_stamps(tmp_path)) == {"b"}


def test_a_stat_differing_in_its_status_change_time_alone_is_not_trusted(tmp_path):
    (tmp_path / "f").write_text("data")
    stat = stamps.file_stat(tmp_path / "f")
    assert stamps.trusted({"f": {"sha256": "d", "stat": stat}}, tmp_path, "f", "d")
    assert not stamps.trusted({"f": {"sha256": "d", "stat": stat[:3] + [stat[3] - 1]}}, tmp_path, "f", "d")


def test_a_stamp_of_the_same_files_with_other_checksums_is_rewritten(tmp_path):
    entries = {"a": {"sha256": "new", "stat": [1, 2, 3, 4]}}
    old = {"a": {"sha256": "old", "stat": [1, 2, 3, 4]}}
    assert stamps.record(tmp_path, entries, old, 100 * stamps.RACY_NS)
    assert stamps.read_stamps(tmp_path) == entries
    assert not stamps.record(tmp_path, entries, entries, 100 * stamps.RACY_NS)  # unchanged: not written again


def test_a_stamp_of_another_version_is_not_read(tmp_path):
    body = {"files": {"a": {"sha256": "d", "stat": [1, 2, 3, 4]}}}
    for version, files in ((stamps.STAMPS_VERSION, {"a"}), (stamps.STAMPS_VERSION - 1, set()), (None, set())):
        (tmp_path / STAMPS_FILE).write_text(json.dumps({**body, "version": version}))
        assert set(stamps.read_stamps(tmp_path)) == files
