"""Opening an index: damaged files are one IndexFormatError, and an open that races a writer
(append, compact) opens the index the writer left."""

import shutil

import pytest

import retriever.index as index_mod
from ckqti import api
from ckqti.errors import IndexFormatError
from indexer.format import POSTINGS_FILE
from retriever.index import Index


def copy_of(src, tmp_path):
    dst = tmp_path / "idx"
    shutil.copytree(src, dst)
    return dst


def flip(path, offset_from_end):
    data = bytearray(path.read_bytes())
    data[len(data) - offset_from_end] ^= 1
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("offset", [12, 9, 40])
def test_a_damaged_arrow_footer_is_an_index_error_even_unverified(tmp_path, scifact_index, offset):
    idx = copy_of(scifact_index, tmp_path)
    flip(idx / "shard-00000" / POSTINGS_FILE, offset)
    with pytest.raises(IndexFormatError, match="checksum mismatch"):
        Index(idx)
    try:
        Index(idx, verify=False)  # a flip Arrow does not notice may open: never anything but IndexFormatError
    except IndexFormatError:
        pass


def test_an_open_racing_a_compaction_opens_the_compacted_index(tmp_path, scifact_index, monkeypatch):
    idx = copy_of(scifact_index, tmp_path)
    real = index_mod.open_shard
    calls = []

    def racing(directory, name):
        calls.append(name)
        if len(calls) == 1:  # the compaction commits between the manifest's read and this shard's files
            api.compact(directory, 10_000)
        return real(directory, name)

    monkeypatch.setattr(index_mod, "open_shard", racing)
    opened = Index(idx)
    assert len(opened.manifest.shards) == 1 and len(opened.shards) == 1 and calls[-1] == opened.manifest.shards[0].name
    assert calls[0] == "shard-00000" != calls[-1]  # began with the old manifest's shards, ended with the new one's
    monkeypatch.undo()
    assert opened.num_docs == Index(scifact_index).num_docs


def test_a_missing_file_without_a_writer_is_not_retried_forever(tmp_path, scifact_index):
    idx = copy_of(scifact_index, tmp_path)
    (idx / "shard-00001" / POSTINGS_FILE).unlink()
    with pytest.raises(IndexFormatError, match="index file missing"):
        Index(idx)
    with pytest.raises(IndexFormatError, match="cannot read Arrow file"):
        Index(idx, verify=False)
