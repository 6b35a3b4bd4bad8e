"""Opening an index: damaged files are one IndexFormatError, and an open that races a writer
(append, compact) opens the index the writer left."""

import dataclasses
import re
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import indexer.format as format_mod
import retriever.index as index_mod
from ckqti import api
from ckqti.errors import IndexFormatError
from indexer.format import POSTINGS_FILE
from indexer.stamps import STAMPS_FILE
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

    def racing(directory, name, *args):
        calls.append(name)
        if len(calls) == 1:  # the compaction commits between the manifest's read and this shard's files
            api.compact(directory, 10_000)
        return real(directory, name, *args)

    monkeypatch.setattr(index_mod, "open_shard", racing)
    opened = Index(idx)
    assert len(opened.manifest.shards) == 1 and len(opened.shards) == 1 and calls[-1] == opened.manifest.shards[0].name
    assert calls[0] == "shard-00000" != calls[-1]  # began with the old manifest's shards, ended with the new one's
    monkeypatch.undo()
    assert opened.num_docs == Index(scifact_index).num_docs


def test_an_open_whose_checksum_check_races_a_compaction_opens_the_compacted_index(tmp_path, scifact_index,
                                                                                  monkeypatch):
    """A file the old manifest names may go between the check that it exists and its hashing: that
    is a missing file (retried once the manifest changed), not a FileNotFoundError."""
    idx = copy_of(scifact_index, tmp_path)
    (idx / STAMPS_FILE).unlink(missing_ok=True)  # every file is hashed
    real = format_mod.file_checksum
    raced = []

    def racing(path, *args):
        if not raced and Path(path).parent.name == "shard-00001":  # the compaction commits just before
            raced.append(Path(path))
            api.compact(idx, 10_000)
        return real(path, *args)

    monkeypatch.setattr(format_mod, "file_checksum", racing)
    opened = Index(idx)
    monkeypatch.undo()
    assert raced and not raced[0].exists()  # the open did hash a file the compaction had removed
    assert len(opened.shards) == 1 and opened.num_docs == Index(scifact_index).num_docs


def rebuild_in_place(idx: Path, new: Path) -> None:
    """What `ckqti index --out IDX --force` does once its new index is finished: the new folder, staged
    beside IDX, is swapped with the old one (:func:`indexer.install.install`)."""
    from indexer.install import install

    staged = idx.with_name(idx.name + "-staged")
    shutil.copytree(new, staged)
    install(staged, idx, force=True)


def top_docids(index, query="cancer risk"):
    from retriever.search import Searcher

    return Searcher(index, engine="numpy").search(query, 10).docids


@pytest.mark.parametrize("verify", [True, False])
def test_an_open_racing_a_rebuild_in_place_opens_the_new_index_whole(tmp_path, scifact_index, scifact_rebuilt,
                                                                     monkeypatch, verify):
    """A rebuild in place installs files of the same names (and here shards of the same sizes): an open
    that had read the old manifest (and checked the old files' checksums) mapped the new index's shards
    without an error, and searched a mixture of the two (one search in 12 of a loop of fresh opens while
    a loop of installs ran; session 44). The open notices that the manifest it read was replaced while it
    opened the files, and opens the index again."""
    idx = copy_of(scifact_index, tmp_path)
    real = index_mod.open_shard
    raced = []

    def racing(directory, name, *args):
        if name == "shard-00001" and not raced:  # the rebuild commits between the first shard and the second
            raced.append(name)
            rebuild_in_place(idx, scifact_rebuilt)
        return real(directory, name, *args)

    monkeypatch.setattr(index_mod, "open_shard", racing)
    opened = Index(idx, verify=verify)
    monkeypatch.undo()
    assert raced
    fresh = Index(scifact_rebuilt)
    assert opened.manifest.to_json() == fresh.manifest.to_json() and opened.terms == fresh.terms
    for mine, theirs in zip(opened.shards, fresh.shards, strict=True):
        assert np.array_equal(mine.postings, theirs.postings) and mine.docs.equals(theirs.docs)
    assert top_docids(opened) == top_docids(fresh) != top_docids(Index(scifact_index))


def test_an_open_that_every_attempt_finds_replaced_says_so(tmp_path, scifact_index, scifact_rebuilt, monkeypatch):
    """Rebuilds committing during each of the open's attempts: one line saying the index kept changing."""
    idx = copy_of(scifact_index, tmp_path)
    real = index_mod.open_shard
    sources = iter([scifact_rebuilt, scifact_index] * format_mod.OPEN_ATTEMPTS)

    def racing(directory, name, *args):
        if name == "shard-00001":
            rebuild_in_place(idx, next(sources))
        return real(directory, name, *args)

    monkeypatch.setattr(index_mod, "open_shard", racing)
    with pytest.raises(IndexFormatError) as e:
        Index(idx)
    assert str(e.value) == (f"{idx}: the index was replaced while it was being read, {format_mod.OPEN_ATTEMPTS} "
                            "times (a build, append or compaction committing); open it again")


def test_an_open_whose_file_a_committing_writer_removed_opens_the_index_again(tmp_path, scifact_index, scifact_rebuilt,
                                                                               monkeypatch):
    """A file the open reads fails (as one an append or compaction removed does) while the manifest it began
    with was replaced: not a damaged index, so the open tries again and opens the new one whole."""
    idx = copy_of(scifact_index, tmp_path)
    real = index_mod.open_shard
    raced = []

    def removed(directory, name, *args):
        if name == "shard-00001" and not raced:
            raced.append(name)
            rebuild_in_place(idx, scifact_rebuilt)
            raise IndexFormatError("index file missing", directory / name)
        return real(directory, name, *args)

    monkeypatch.setattr(index_mod, "open_shard", removed)
    opened = Index(idx)
    monkeypatch.undo()
    assert raced and opened.manifest.to_json() == Index(scifact_rebuilt).manifest.to_json()


def test_a_missing_file_without_a_writer_is_not_retried_forever(tmp_path, scifact_index):
    idx = copy_of(scifact_index, tmp_path)
    (idx / "shard-00001" / POSTINGS_FILE).unlink()
    with pytest.raises(IndexFormatError, match="index file missing"):
        Index(idx)
    with pytest.raises(IndexFormatError, match="cannot read Arrow file"):
        Index(idx, verify=False)


def test_a_changed_vocabulary_file_is_refused_by_its_checksum(tmp_path, scifact_index):
    """The vocabulary file the manifest names (``vocab_file``) is checked like the shards' files:
    one letter of a term changed inside it leaves a file Arrow reads without complaint (only
    the checksum notices), and opening the index, or ``ckqti info --verify``, is a one-line
    checksum error naming the file."""
    from click.testing import CliRunner

    from ckqti.cli import cli
    from indexer.format import Manifest

    idx = copy_of(scifact_index, tmp_path)
    vocab = idx / Manifest.read(idx).vocab_file
    data = bytearray(vocab.read_bytes())
    at = data.find(b"cancer")
    assert at > 0
    data[at] = ord("d")  # cancer -> dancer, a term the analyzer could have made
    vocab.write_bytes(bytes(data))
    assert "dancer" in Index(idx, verify=False).term_ids  # Arrow alone does not notice
    want = f"{vocab}: index file corrupted (checksum mismatch); rebuild the index"
    with pytest.raises(IndexFormatError) as e:
        Index(idx)
    assert str(e.value) == want
    res = CliRunner().invoke(cli, ["info", "--index", str(idx), "--verify"])
    assert res.exit_code != 0 and res.output.strip().splitlines() == [f"Error: {want}"]
    assert CliRunner().invoke(cli, ["info", "--index", str(idx)]).exit_code == 0  # the summary reads the manifest only


def test_manifest_read_refuses_a_checksummed_manifest_that_does_not_add_up(tmp_path, scifact_index):
    """A manifest rewritten through :meth:`Manifest.write` carries a valid checksum of its own
    content, so only :meth:`Manifest.read`'s own checks stand between a bad value and the
    reader: documents that the shards do not hold (one too many as well as one too few), a
    vocabulary file outside the index directory, and a channel's quantization step of 0."""
    import copy

    from indexer.format import Manifest

    idx = copy_of(scifact_index, tmp_path)
    good = Manifest.read(idx)
    edits = {
        "one document too many": (lambda m: setattr(m, "num_docs", m.num_docs + 1), "its shards hold 600 documents, its num_docs says 601"),
        "one document too few": (lambda m: setattr(m, "num_docs", m.num_docs - 1), "its num_docs says 599"),
        "vocab_file outside": (lambda m: setattr(m, "vocab_file", "../x.arrow"), "vocab_file '../x.arrow' is not a file name inside"),
        "vocab_file in a folder": (lambda m: setattr(m, "vocab_file", "sub/vocab.arrow"), "is not a file name inside"),
        "step 0": (lambda m: m.channels[0].update(step=0.0), "channels are malformed"),
        "step -1": (lambda m: m.channels[0].update(step=-1.0), "channels are malformed"),
    }
    for edit, message in edits.values():
        m = copy.deepcopy(good)
        edit(m)
        m.write(idx)
        with pytest.raises(IndexFormatError, match=message):
            Manifest.read(idx)
        with pytest.raises(IndexFormatError, match=message):
            Index(idx)
    good.write(idx)
    assert Manifest.read(idx).to_json() == good.to_json() and Index(idx).num_docs == 600


@pytest.mark.parametrize("damage, file, message", [
    ("start", "segments.arrow", "segment offsets do not cover the postings"),
    ("seg_ptr", "terms.arrow", "list offsets do not cover the segments"),
    ("doc", "postings.arrow", "a posting names document"),
])
def test_offsets_out_of_bounds_are_refused_unverified_not_a_crash(tmp_path, scifact_index, damage, file, message):
    """Opened without checksums (verify=False), one flipped byte in a shard's offsets made the Numba
    kernels read out of bounds: the process died of a segmentation fault (helper-22)."""
    import numpy as np
    import pyarrow as pa

    idx = tmp_path / "idx"
    shutil.copytree(scifact_index, idx)
    path = idx / "shard-00000" / file
    table = pa.ipc.open_file(str(path)).read_all()
    values = table.column(damage).to_numpy().copy()
    values[len(values) // 2] = np.iinfo(values.dtype).max if damage == "doc" else values[-1] + 10**6
    damaged = table.set_column(table.schema.get_field_index(damage), damage, pa.array(values, table.schema.field(damage).type))
    if damage == "doc":  # the largest document the file records stays in bounds: only a scan finds the damage
        assert int(damaged.schema.metadata[b"max_doc"]) < 250
    with pa.ipc.new_file(str(path), damaged.schema) as writer:
        writer.write_table(damaged)
    with pytest.raises(IndexFormatError, match=message) as info:
        Index(idx, verify=False)
    assert str(path) in str(info.value)


def with_column(table: pa.Table, name: str, values: pa.Array | None, rename: str | None = None) -> pa.Table:
    """``table`` with column ``name`` holding ``values`` instead, or renamed ``rename``."""
    if rename is not None:
        return table.rename_columns([rename if c == name else c for c in table.column_names])
    return table.set_column(table.schema.get_field_index(name), name, values)


@pytest.mark.parametrize("file, name, damage, message", [
    ("shard-00000/segments.arrow", "start", "renamed", "no column 'start'"),
    ("shard-00001/terms.arrow", "seg_ptr", "renamed", "no column 'seg_ptr'"),
    ("shard-00000/postings.arrow", "doc", "null", "column 'doc' is not numbers without nulls (uint32)"),
    ("shard-00002/segments.arrow", "impact", "text", "column 'impact' is not numbers without nulls (string)"),
    ("vocab.arrow", "df", "renamed", "no column 'df'"),
    ("vocab.arrow", "offset", "null", "column 'offset' is not numbers without nulls (float)"),
])
def test_a_damaged_column_read_unverified_is_one_error_naming_its_file(tmp_path, scifact_index, file, name, damage,
                                                                        message):
    """Opened without checksums (``verify=False``, ``api.open_searcher``'s option), a file whose column is missing
    was a KeyError traceback (shards' and the vocabulary's alike), and a shard's column with a null or of text was
    "INDEX: a shard is damaged (Needed to copy 1 chunks with 1 nulls, but zero_copy_only was True)", naming neither
    the file nor the column. Each is an IndexFormatError naming both; a verified open names the checksum."""
    idx = copy_of(scifact_index, tmp_path)
    path = idx / file
    table = pa.ipc.open_file(str(path)).read_all()
    values = table.column(name).to_pylist()
    if damage == "null":
        values[len(values) // 2] = None
    changed = {"renamed": lambda: with_column(table, name, None, rename=name + "_"),
               "null": lambda: with_column(table, name, pa.array(values, table.schema.field(name).type)),
               "text": lambda: with_column(table, name, pa.array([str(v) for v in values]))}[damage]()
    with pa.ipc.new_file(str(path), changed.schema) as writer:
        writer.write_table(changed)
    for open_unverified in (lambda: Index(idx, verify=False), lambda: api.open_searcher(idx, verify=False)):
        with pytest.raises(IndexFormatError) as e:
            open_unverified()
        assert str(e.value) == f"{path}: damaged: {message}"
    with pytest.raises(IndexFormatError, match=f"^{re.escape(str(path))}: index file corrupted \\(checksum mismatch\\)"):
        Index(idx)


@pytest.mark.parametrize("key, value, unknown", [("stemmer", "lancaster", "unknown stemmer 'lancaster'; this ckqti has 'krovetz' and 'none')"),
                                                 ("stopwords", "french",
                                                  "unknown stopword list 'french'; this ckqti has 'english' and 'none')")])
def test_an_analyzer_this_version_does_not_know_is_one_line_naming_the_manifest(tmp_path, scifact_index, key, value,
                                                                                unknown):
    """A manifest (its checksum its content's) naming a stemmer or stopword list this ckqti lacks, as a newer or
    another program's may: opening it for search is one error naming manifest.json and what is unknown, and
    ``ckqti search`` one line, exit 1; ``ckqti info``, which reads no text, still describes the index."""
    from click.testing import CliRunner

    from ckqti.cli import cli
    from tests.indexer.test_format import edited

    idx = copy_of(scifact_index, tmp_path)
    edited(idx, lambda m: m["analyzer"].update({key: value}))
    want = f"{idx / format_mod.MANIFEST}: manifest's analyzer is not one this ckqti has ({unknown}"
    with pytest.raises(IndexFormatError) as e:
        Index(idx)
    assert str(e.value).startswith(want)
    res = CliRunner().invoke(cli, ["search", "cells", "--index", str(idx)])
    assert res.exit_code == 1 and isinstance(res.exception, SystemExit) and res.output.startswith(f"Error: {want}")
    assert res.output.count("\n") == 1
    info = CliRunner().invoke(cli, ["info", "--index", str(idx)])
    assert info.exit_code == 0 and f"{key} {value}" in info.output


def rewrite_postings(idx, name, docs=None, metadata=None):
    """Rewrite shard ``name``'s postings file, with documents ``docs`` (default: its own) and schema
    metadata ``metadata`` (None: none, as before ``max_doc`` was recorded), and the manifest's
    checksum of it, so that a verified open reads it as a writer's."""
    import pyarrow as pa

    from indexer.format import Manifest, file_checksum

    path = idx / name / POSTINGS_FILE
    table = pa.ipc.open_file(str(path)).read_all()
    docs = table.column("doc").to_numpy() if docs is None else docs
    table = pa.table({"doc": pa.array(docs, pa.uint32())}, metadata=metadata)
    with pa.ipc.new_file(str(path), table.schema) as writer:
        writer.write_table(table)
    manifest = Manifest.read(idx)
    next(s for s in manifest.shards if s.name == name).files[POSTINGS_FILE] = file_checksum(path)
    manifest.write(idx)
    return path


def test_a_verified_open_bounds_the_postings_by_their_recorded_largest_document(tmp_path, scifact_index):
    """A verified open does not scan every posting for the largest document (a pass over all the
    postings' pages, which their checksum has just vouched for): it reads the largest that the
    postings file records. A recorded document beyond the shard's is refused, though the postings
    themselves are in bounds, which only the recorded value can tell; an unverified open, which
    cannot trust it, scans them and opens."""
    from indexer.format import MAX_DOC_KEY

    idx = copy_of(scifact_index, tmp_path)
    path = rewrite_postings(idx, "shard-00001", metadata={MAX_DOC_KEY: "250"})
    with pytest.raises(IndexFormatError) as e:
        Index(idx)
    assert str(e.value) == f"{path}: damaged: a posting names document 250 of 250"
    assert Index(idx, verify=False).shards[1].num_docs == 250


def test_an_index_written_before_the_largest_document_was_recorded_opens_and_is_scanned(tmp_path, scifact_index):
    """Postings files without ``max_doc`` (every index written before session 29) open as before,
    with the same results, and their postings are scanned: a posting beyond the shard's documents,
    its checksum rewritten to match, is refused."""
    from retriever.search import Searcher

    idx = copy_of(scifact_index, tmp_path)
    for name in ("shard-00000", "shard-00001", "shard-00002"):
        rewrite_postings(idx, name)
    want = Searcher(scifact_index).search("cancer cells", 20).hits
    assert Searcher(Index(idx)).search("cancer cells", 20).hits == want
    docs = Index(idx).shards[0].postings.copy()
    docs[len(docs) // 2] = 250
    path = rewrite_postings(idx, "shard-00000", docs)
    with pytest.raises(IndexFormatError) as e:
        Index(idx)
    assert str(e.value) == f"{path}: damaged: a posting names document 250 of 250"


def mapped_files(directory) -> set[str]:
    """Files under ``directory`` that this process has memory-mapped now (Linux)."""
    with open("/proc/self/maps") as f:
        return {line.split(maxsplit=5)[5].strip() for line in f if str(directory) in line}


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads the process's memory maps (Linux)")
def test_close_unmaps_the_files_and_a_later_search_is_a_clear_error(tmp_path, scifact_index):
    """Closing an index (or leaving its ``with`` block) unmaps its files at once, not at garbage
    collection, so they can be deleted or replaced; searching it afterwards raises IndexClosedError
    instead of running the Numba kernels over released arrays, and closing twice is harmless."""
    from ckqti.errors import IndexClosedError
    from retriever.search import Searcher

    idx = copy_of(scifact_index, tmp_path)
    with Index(idx) as index:
        searcher = Searcher(index)
        assert searcher.search("cancer cells", 5).hits
        assert any(name.endswith("postings.arrow") for name in mapped_files(idx))
    assert index.closed and mapped_files(idx) == set()
    for call in (lambda: searcher.search("cancer cells", 5), lambda: searcher.search_many(["cancer", "cell"]),
                 lambda: searcher.topk_arrays(np.array([5]), None, 5), lambda: index.df):
        with pytest.raises(IndexClosedError, match=f"^{re.escape(str(idx))}: the index is closed"):
            call()
    index.close()
    shutil.rmtree(idx)  # replaced by another index at the same path, which opens and searches as the first did
    shutil.copytree(scifact_index, idx)
    with Index(idx) as again:
        assert Searcher(again).search("cancer cells", 5).hits



@pytest.mark.parametrize("count", [3, index_mod.TAKE_FROM + 1, 200])
def test_docids_of_many_rows_are_each_rows_docid_in_every_shard(scifact_index, count):
    """A run's docids come a query at a time, one by one or beyond ``TAKE_FROM`` in one Arrow call (repeats and a
    strided view of the rows included); across the index's shards each is the docid of its own shard's row."""
    index = Index(scifact_index)
    rng = np.random.default_rng(count)
    assert len(index.shards) > 1
    stored = [shard.docs.column("docid").to_pylist() for shard in index.shards]
    for shard, names in zip(index.shards, stored):
        rows = rng.integers(0, shard.num_docs, 2 * count)[::2]  # a strided view, with repeats
        assert shard.docids(rows) == [names[i] for i in rows.tolist()] == [shard.docid(i) for i in rows.tolist()]
    shards = rng.integers(0, len(index.shards), count)
    rows = np.array([rng.integers(0, index.shards[s].num_docs) for s in shards.tolist()], np.int64)
    assert index.docids(shards, rows) == [stored[s][r] for s, r in zip(shards.tolist(), rows.tolist())]
    assert index.titles(shards, rows) == [index.shards[s].document(r)["title"] for s, r in zip(shards.tolist(), rows.tolist())]


def test_docids_of_a_shard_whose_docid_column_is_in_several_chunks(scifact_index):
    """A docid column read in several chunks is combined, not cut to its first chunk."""
    shard = Index(scifact_index).shards[0]
    stored = shard.docs.column("docid").to_pylist()
    chunked = dataclasses.replace(shard, docs=pa.Table.from_batches(shard.docs.to_batches(max_chunksize=shard.num_docs // 3)))
    assert chunked.docs.column("docid").num_chunks > 1
    for rows in (np.array([shard.num_docs - 1, 0, shard.num_docs // 2]), np.arange(shard.num_docs)[::-1]):
        assert chunked.docids(rows) == [stored[i] for i in rows.tolist()]
    assert chunked.docid(shard.num_docs - 1) == stored[-1]
    titles = shard.docs.column("title").to_pylist()
    assert chunked.titles(np.arange(shard.num_docs)[::-1]) == titles[::-1]


def test_sorted_docids_find_every_docid_in_python_string_order():
    """``serve``'s docid lookups bisect a shard's docids as Arrow sorts them (UTF-8 bytes): that order
    must be Python's, code points, for every docid to be found, non-ASCII and case included."""
    import pyarrow as pa

    from retriever.index import SortedDocids

    ids = ["b", "B", "é", "ä", "z", "10", "9", "Ω-1", "a\u00e9", "ab", "a", "日本", "\U0001f600", "~"]
    found = SortedDocids(pa.array(ids, pa.string()))
    assert [found[i] for i in range(len(found))] == sorted(ids)
    assert [found.row(d) for d in ids] == list(range(len(ids)))
    assert [found.row(d) for d in ("", "c", "a\u00e8", "aa", "日", "\U0001f601")] == [None] * 6
    assert SortedDocids(pa.array([], pa.string())).row("x") is None


@pytest.mark.parametrize("seg_start, seg_impact, seg_ptr, message", [
    ([0, 2, 3], [5, 4], [0, 2], None),  # three postings in two segments of one list: in bounds
    ([0, 2], [5], [0, 1], "segment offsets do not cover the postings"),  # the last posting in no segment
    ([0, 2, 3], [5], [0, 2], "segment offsets do not cover the postings"),  # a segment without its impact
    ([0, 2, 3], [5, 4], [0, 1], "list offsets do not cover the segments"),
])
def test_offsets_must_cover_every_posting_and_segment(tmp_path, seg_start, seg_impact, seg_ptr, message):
    """Offsets that stop short of the postings or a segment without an impact: the kernels would
    read past an array (``check_offsets`` on hand-built arrays)."""
    args = (np.array([0, 1, 2], np.uint32), np.array(seg_start, np.int64), np.array(seg_impact, np.uint8),
            np.array(seg_ptr, np.int64), 3)
    if message is None:
        index_mod.check_offsets(tmp_path, *args)
    else:
        with pytest.raises(IndexFormatError, match=message):
            index_mod.check_offsets(tmp_path, *args)


def test_collection_idf_is_the_vocabularys_formula_and_zero_for_the_reserved_ids():
    """Ids 0 (padding) and 1 (unknown) have df 0, which the formula would give the largest idf."""
    idf = index_mod.collection_idf(np.array([0, 0, 1, 10]), 10)
    assert idf.tolist() == [0.0, 0.0, pytest.approx(np.log(9.5 / 1.5)), 0.0]


def test_locate_finds_every_shards_first_and_last_document(scifact_index):
    idx = Index(scifact_index)
    for si, shard in enumerate(idx.shards):
        for row in (0, shard.num_docs - 1):
            assert idx.locate(shard.docid(row)) == (si, row)
    assert idx.locate("no such docid") is None


def test_check_compatible_refuses_another_analyzer_or_model_exactly(scifact_index):
    """An id that merely begins the index's model id (or a shorter one), or an analyzer differing in
    one setting, is another model or analysis."""
    idx = Index(scifact_index)
    assert idx.model_id
    idx.check_compatible(dict(idx.manifest.analyzer), idx.model_id)
    idx.check_compatible()
    for model_id in (idx.model_id[:-1], idx.model_id + "0", "ndrm3-" + idx.model_id):
        with pytest.raises(IndexFormatError, match="index was built with model"):
            idx.check_compatible(model_id=model_id)
    other = {**idx.manifest.analyzer, "lowercase": not idx.manifest.analyzer["lowercase"]}
    with pytest.raises(IndexFormatError, match="index was built with analyzer"):
        idx.check_compatible(analyzer=other)


@pytest.mark.parametrize("change", [-1, 1])
def test_a_shard_holding_other_than_its_manifest_count_is_refused(tmp_path, scifact_index, change):
    """The manifest's per-shard counts, rewritten with a total that adds up, against the documents
    each shard holds: one too few as well as one too many."""
    from indexer.format import Manifest

    idx = copy_of(scifact_index, tmp_path)
    m = Manifest.read(idx)
    m.shards[0].num_docs += change
    m.num_docs += change
    m.collection["num_docs"] = m.num_docs
    m.write(idx)
    with pytest.raises(IndexFormatError, match="shard shard-00000 does not match the manifest"):
        Index(idx)
