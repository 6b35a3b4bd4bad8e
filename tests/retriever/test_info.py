import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ckqti.errors import IndexFormatError
from indexer.stamps import STAMPS_FILE
from retriever.index import Index
from retriever.info import index_info


def test_counts_match_the_opened_index(scifact_index):
    info = index_info(scifact_index)
    idx = Index(scifact_index)
    assert info.num_docs == idx.num_docs == sum(s.num_docs for s in idx.shards) == 600
    assert info.num_postings == sum(int(s.postings.size) for s in idx.shards)
    assert [s["docs"] for s in info.shards] == [s.num_docs for s in idx.shards]
    assert [s["postings"] for s in info.shards] == [int(s.postings.size) for s in idx.shards]
    assert len(info.shards) == 3 and info.vocab_size == len(idx.terms)
    assert info.model["id"] == idx.model_id == "ndrm2-untrained"
    assert info.channels == list(idx.quantizer.weights) and info.analyzer == idx.manifest.analyzer
    assert info.unfinished is None and not info.verified


def test_bytes_add_up_to_the_files_on_disk(scifact_index):
    b = index_info(scifact_index).bytes
    on_disk = sum(f.stat().st_size for f in scifact_index.rglob("*") if f.is_file() and f.name != STAMPS_FILE)
    docs = sum(f.stat().st_size for f in scifact_index.rglob("docs.arrow"))
    assert b["total"] == on_disk
    assert b["documents"] == docs > 0 and b["postings"] > 0 and b["vocabulary"] > 0
    assert b["postings"] + b["documents"] + b["vocabulary"] < b["total"]  # the manifest too


def test_verify_finds_a_corrupted_file_that_the_summary_does_not_read(tmp_path, scifact_index):
    out = tmp_path / "idx"
    shutil.copytree(scifact_index, out)
    f = out / "shard-00002" / "postings.arrow"
    data = bytearray(f.read_bytes())
    data[-50] ^= 0xFF
    f.write_bytes(bytes(data))
    assert index_info(out).num_docs == 600  # the manifest alone
    with pytest.raises(IndexFormatError, match="shard-00002/postings.arrow: index file corrupted"):
        index_info(out, verify=True)
    assert index_info(scifact_index, verify=True).verified


def test_unfinished_builds_are_named(tmp_path, scifact_index):
    out = tmp_path / "idx"
    shutil.copytree(scifact_index, out)
    (tmp_path / "idx.partial").mkdir()
    assert index_info(out).unfinished == str(tmp_path / "idx.partial")
    (tmp_path / "new.partial").mkdir()
    with pytest.raises(IndexFormatError, match="unfinished build is in new.partial/"):
        index_info(tmp_path / "new")
    with pytest.raises(IndexFormatError, match="no such index directory"):
        index_info(tmp_path / "other")
    # the work folder itself, given as the index: said to be one, with what resumes it (was "manifest.json missing")
    with pytest.raises(IndexFormatError, match=r"new.partial: not an index but a build's work folder; an unfinished build "
                                               r"is in it; the same ckqti index command resumes it \(the index will be \S+/new\)$"):
        Index(tmp_path / "new.partial")
    (tmp_path / ".partial").mkdir()
    with pytest.raises(IndexFormatError, match="manifest.json missing"):
        Index(tmp_path / ".partial")


def test_a_build_running_now_is_not_called_interrupted(tmp_path, scifact_index):
    """``info`` and search called a build still running "an interrupted build; the same ckqti index
    command resumes it", and that command then failed: another build is writing this index. A
    build's ``OUT.lock`` names its process; a killed build's names one that is gone."""
    shutil.copytree(scifact_index, tmp_path / "idx")
    for name in ("idx", "new"):
        (tmp_path / f"{name}.partial").mkdir()
        (tmp_path / f"{name}.lock").write_text(str(os.getpid()))  # a live process: this one
    info = index_info(tmp_path / "idx")
    assert info.unfinished == str(tmp_path / "idx.partial") and info.building == os.getpid()
    with pytest.raises(IndexFormatError, match=rf"a build \(process {os.getpid()}\) is writing it in new.partial/$"):
        index_info(tmp_path / "new")
    with pytest.raises(IndexFormatError, match=rf"a build \(process {os.getpid()}\) is writing it in \S+new.partial$"):
        Index(tmp_path / "new")
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    for name in ("idx", "new"):
        (tmp_path / f"{name}.lock").write_text(gone.stdout.strip())  # what a killed build leaves
    assert index_info(tmp_path / "idx").building is None
    with pytest.raises(IndexFormatError, match="unfinished build is in new.partial/; the same ckqti index command resumes it"):
        index_info(tmp_path / "new")


def test_a_missing_file_is_named_without_verify(tmp_path, scifact_index):
    idx = tmp_path / "idx"
    shutil.copytree(scifact_index, idx)
    shutil.rmtree(idx / "shard-00001")
    with pytest.raises(IndexFormatError, match=r"shard-00001/\w+\.arrow: index file missing"):
        index_info(idx)


def dead_pid() -> int:
    """The id of a process that has ended."""
    proc = subprocess.Popen([sys.executable, "-c", ""])
    proc.wait()
    return proc.pid


def with_leftovers(tmp_path, scifact_index, pid: int) -> Path:
    """A copy of the index holding what an append (process ``pid``) killed before its commit leaves:
    its work directory, a shard and a vocabulary file moved in that the manifest does not name; and
    an index of someone's own in a folder named like a shard, which is no leftover."""
    idx = tmp_path / "idx"
    shutil.copytree(scifact_index, idx)
    (idx / f".append-{pid}" / "shard-00004").mkdir(parents=True)
    (idx / f".append-{pid}" / "shard-00004" / "postings.arrow").write_bytes(b"p" * 1000)
    (idx / "shard-00003").mkdir()
    (idx / "shard-00003" / "docs.arrow").write_bytes(b"d" * 300)
    (idx / "vocab-00001.arrow").write_bytes(b"v" * 30)
    shutil.copytree(scifact_index, idx / "shard-00009")  # holds a manifest: an index, not a leftover
    return idx


def test_leftovers_of_an_interrupted_append_are_named_and_counted(tmp_path, scifact_index):
    """An append or compaction killed before its commit leaves files inside the index that the next
    one removes: info names them and counts their bytes in the total (it left both out)."""
    clean = index_info(scifact_index)
    assert clean.leftovers == [] and clean.writing is None and clean.bytes["leftovers"] == 0
    pid = dead_pid()
    info = index_info(with_leftovers(tmp_path, scifact_index, pid))
    assert info.leftovers == [f".append-{pid}", "shard-00003", "vocab-00001.arrow"] and info.writing is None
    assert info.bytes["leftovers"] == 1330
    assert info.bytes["total"] == clean.bytes["total"] + 1330
    assert index_info(with_leftovers(tmp_path / "live", scifact_index, os.getpid())).writing == os.getpid()


def test_clipped_impacts_and_appends_are_the_manifest_s(tmp_path, scifact_index):
    """Impacts stored as 255 though above it (at build with forced steps, and by each append) are
    reported as the manifest records them: the build's and appends' together, and the appends' alone."""
    from indexer.format import Manifest

    idx = tmp_path / "idx"
    shutil.copytree(scifact_index, idx)
    m = Manifest.read(idx)
    m.clipped_impacts, m.appends = 12, [{"clipped_impacts": 3}, {"docs": 5}, {"clipped_impacts": 4}]
    m.write(idx)
    info = index_info(idx)
    assert (info.clipped_impacts, info.appended_clipped_impacts, info.appends) == (12, 7, 3)


def test_appends_clicks_are_listed_and_a_missing_count_leaves_the_total_unknown(tmp_path, scifact_index):
    """Each append's ORCAS file and count (an append's own ``corpus`` record) is listed; the total
    adds the build's, and is None where a manifest lacks a count (older builds) or no file was given."""
    from indexer.format import Manifest

    idx = tmp_path / "idx"
    shutil.copytree(scifact_index, idx)
    assert (index_info(idx).appended_orcas, index_info(idx).clicked_documents) == ([], None)
    m = Manifest.read(idx)
    m.appends = [{"corpus": {"orcas": "/a.tsv", "orcas_documents": 5}}, {"docs": 5},
                 {"corpus": {"path": "/c.tsv", "orcas": None}}, {"corpus": {"orcas": "/b.tsv", "orcas_documents": 2}}]
    m.write(idx)
    info = index_info(idx)
    assert info.appended_orcas == [{"append": 1, "orcas": "/a.tsv", "documents": 5},
                                   {"append": 4, "orcas": "/b.tsv", "documents": 2}]
    assert info.clicked_documents == 7
    m.corpus = m.corpus | {"orcas": "/build.tsv"}  # a build's file without its count
    m.write(idx)
    assert index_info(idx).clicked_documents is None
    m.corpus["orcas_documents"] = 10
    m.write(idx)
    assert index_info(idx).clicked_documents == 17


def test_appends_clicks_are_grouped_by_file_and_a_missing_count_leaves_that_files_unknown(tmp_path, scifact_index):
    """``ckqti info``'s clicks lines (:meth:`IndexInfo.appended_orcas_files`): each file once, in the order first
    given, with the appends that gave it and the documents its clicks reached over them (None: a count is missing)."""
    from dataclasses import replace

    appended = [{"append": 1, "orcas": "/a.tsv", "documents": 5}, {"append": 2, "orcas": "/b.tsv", "documents": None},
                {"append": 3, "orcas": "/a.tsv", "documents": 2}, {"append": 4, "orcas": "/b.tsv", "documents": 3},
                {"append": 5, "orcas": "/c.tsv", "documents": 4}, {"append": 6, "orcas": "/c.tsv", "documents": None}]
    files = replace(index_info(scifact_index), appended_orcas=appended).appended_orcas_files()
    assert list(files.items()) == [("/a.tsv", ([1, 3], 7)), ("/b.tsv", ([2, 4], None)), ("/c.tsv", ([5, 6], None))]


def test_verify_racing_a_rebuild_in_place_describes_the_new_index_not_a_corruption(tmp_path, scifact_index,
                                                                                  scifact_rebuilt, monkeypatch):
    """`ckqti info --verify` while `ckqti index --out IDX --force` committed said 'index file corrupted
    (checksum mismatch); rebuild the index' of a sound index (49 of 1,966 calls beside a loop of installs,
    session 44): it hashed the new index's files against the old manifest. It reads the index again."""
    import indexer.format as format_mod
    from tests.retriever.test_index import rebuild_in_place

    idx = tmp_path / "idx"
    shutil.copytree(scifact_index, idx)
    real = format_mod.file_checksum
    raced = []

    def racing(path, *args):
        if not raced and Path(path).parent.name == "shard-00001":
            raced.append(path)
            rebuild_in_place(idx, scifact_rebuilt)
        return real(path, *args)

    monkeypatch.setattr(format_mod, "file_checksum", racing)
    got = index_info(idx, verify=True).to_dict()
    monkeypatch.undo()
    want = index_info(scifact_rebuilt, verify=True).to_dict()
    assert raced and got.pop("path") == str(idx) and want.pop("path") == str(scifact_rebuilt)
    assert got == want


def test_a_summary_racing_a_compaction_describes_the_compacted_index(tmp_path, scifact_index, monkeypatch):
    """The summary read the manifest, then the files' sizes, of which a compaction committing meanwhile
    had removed the old shards: 'index file missing' of an index that misses nothing."""
    import retriever.info as info_mod
    from ckqti import api

    idx = tmp_path / "idx"
    shutil.copytree(scifact_index, idx)
    real = info_mod.file_bytes
    raced = []

    def racing(path):
        if not raced:
            raced.append(path)
            api.compact(idx, 10_000)
        return real(path)

    monkeypatch.setattr(info_mod, "file_bytes", racing)
    got = index_info(idx)
    monkeypatch.undo()
    assert raced and not raced[0].exists()
    assert got.shards == index_info(idx).shards and len(got.shards) == 1 and got.bytes == index_info(idx).bytes


def test_leftovers_that_vanish_while_they_are_measured_count_nothing(tmp_path, monkeypatch):
    """A running append's work folder is removed when it commits: one of its folders removed between the
    listing of its parent and its own listing ended `ckqti info` in a FileNotFoundError traceback (1 call
    in 5,306 beside a loop of appends and compactions, session 44)."""
    import retriever.info as info_mod

    work = tmp_path / ".append-123"
    (work / "shard-00003").mkdir(parents=True)
    (work / "shard-00003" / "postings.arrow").write_bytes(b"x" * 10)
    (work / "vocab-00002.arrow").write_bytes(b"y" * 7)
    real = os.scandir

    def racing(path="."):
        if isinstance(path, (str, os.PathLike)) and Path(path) == work:  # the append commits just after its folder was listed
            entries = list(real(path))
            shutil.rmtree(work / "shard-00003")
            return ListedEntries(entries)
        return real(path)

    monkeypatch.setattr(os, "scandir", racing)
    assert info_mod.tree_bytes(work) == 7


class ListedEntries:
    """A listing as :func:`os.scandir` returns one: an iterator, and a context manager."""

    def __init__(self, entries):
        self.entries = iter(entries)

    def __iter__(self):
        return self

    def __next__(self):
        return next(self.entries)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None

    def close(self):
        return None
