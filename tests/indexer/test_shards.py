"""Writing a shard: postings in impact order, cut into segments (docs/INDEX.md, issue 2)."""

from __future__ import annotations

import numpy as np

from indexer.shards import ImpactPostings, as_documents_table, decode_segments, documents_table, segment_postings


def test_segments_order_postings_by_impact_then_document_whatever_the_input_order():
    """``ImpactPostings`` may come in any order: each list's postings are stored by impact descending,
    documents ascending inside an impact, one segment per distinct impact; zero impacts are dropped."""
    rng = np.random.default_rng(0)
    lists, docs = np.divmod(rng.choice(12 * 40, size=300, replace=False), 40)  # distinct (list, doc) pairs
    impacts = rng.integers(0, 4, lists.size)  # few levels: segments of several documents
    perm = rng.permutation(lists.size)  # documents out of order, as a caller may hand them
    p = ImpactPostings(lists[perm].astype(np.int32), docs[perm].astype(np.uint32), impacts[perm].astype(np.uint8))
    seg = segment_postings(p, 12)
    got = decode_segments(seg["postings"], seg["seg_start"], seg["seg_impact"], seg["seg_ptr"])
    want = sorted((int(t), -int(v), int(d)) for t, d, v in zip(lists, docs, impacts) if v > 0)
    assert [(int(t), -int(v), int(d)) for t, d, v in zip(*got)] == want
    assert seg["seg_ptr"].size == 13 and seg["seg_ptr"][-1] == seg["seg_start"].size - 1
    for t in range(12):  # one segment per distinct impact of the list, strictly descending
        levels = seg["seg_impact"][seg["seg_ptr"][t]: seg["seg_ptr"][t + 1]].tolist()
        assert levels == sorted({-v for tt, v, _ in want if tt == t}, reverse=True) and 0 not in levels


def test_segmenting_a_shard_holds_few_bytes_a_posting_beyond_its_input():
    """A shard's postings are sorted into impact order with counting sorts that copy documents and
    impacts (5 bytes a posting), not int64 permutations and int64 copies of every column (47 bytes
    a posting before: 4 GB for MS MARCO's ~85M postings a shard). Output, segments and per-list
    counts here come to ~11 bytes a posting. numpy's and Numba's arrays are counted by tracemalloc."""
    import tracemalloc

    rng = np.random.default_rng(0)
    lists = np.concatenate([np.sort(rng.choice(20_000, 100, replace=False)) for _ in range(2_000)]).astype(np.int32)
    docs = np.repeat(np.arange(2_000, dtype=np.uint32), 100)  # as a build hands them: documents ascending
    p = ImpactPostings(lists, docs, rng.integers(0, 16, lists.size).astype(np.uint8))
    want = segment_postings(p, 20_000)  # compiled (or loaded) before counting
    tracemalloc.start()
    try:
        got = segment_postings(p, 20_000)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert all(np.array_equal(got[k], want[k]) for k in want)
    assert peak / lists.size < 25, peak / lists.size


def test_shards_postings_concatenated_in_document_order_are_segmented_without_a_sort_by_document(monkeypatch):
    """Compaction hands two written shards' postings, decoded (by list, impact descending, document)
    and the second's documents numbered after the first's: every list's postings of one impact
    already ascend, so they are segmented as they come (a sort by document of every posting took a
    quarter of a compaction's time), into the same segments as documents in order give."""
    rng = np.random.default_rng(1)
    lists, docs = np.divmod(rng.choice(12 * 80, size=600, replace=False), 80)  # distinct (list, doc) pairs
    impacts = rng.integers(1, 4, lists.size)
    by_doc = ImpactPostings(*(a[np.argsort(docs, kind="stable")] for a in (lists.astype(np.int32), docs.astype(np.uint32),
                                                                             impacts.astype(np.uint8))))
    want = segment_postings(by_doc, 12)
    parts = []
    for half in (docs < 40, docs >= 40):  # two shards of 40 documents, written, then decoded
        seg = segment_postings(ImpactPostings(lists[half].astype(np.int32), (docs[half] % 40).astype(np.uint32),
                                              impacts[half].astype(np.uint8)), 12)
        parts.append(decode_segments(seg["postings"], seg["seg_start"], seg["seg_impact"], seg["seg_ptr"]))
    merged = ImpactPostings(np.concatenate([parts[0][0], parts[1][0]]), np.concatenate([parts[0][1], parts[1][1] + 40]),
                            np.concatenate([parts[0][2], parts[1][2]]))
    assert (np.diff(merged.docs.astype(np.int64)) < 0).any()  # not in document order as a whole

    def no_sort(*args, **kwargs):
        raise AssertionError("sorted by document")

    monkeypatch.setattr(np, "argsort", no_sort)
    got = segment_postings(merged, 12)
    assert all(np.array_equal(got[k], want[k]) for k in want)


def test_a_shards_document_store_is_merged_as_it_is_read():
    """Compaction joins the shards' stores as Arrow tables (their text never made Python strings): a
    store of the current schema is taken as it is, one written before ``prefix`` was kept gains it empty."""
    store = documents_table({"docid": ["d1", "d2"], "title": ["A", ""], "text": ["one", "two"], "length": [1, 1],
                             "prefix": ["q", ""]})
    assert as_documents_table(store) is store
    old = as_documents_table(store.drop_columns(["prefix"]))
    assert old.schema == store.schema and old.column("prefix").to_pylist() == ["", ""]
    assert old.drop_columns(["prefix"]).equals(store.drop_columns(["prefix"]))


def test_documents_handed_in_descending_order_ascend_inside_every_segment():
    """The sort by document is skipped only where each segment already ascends: documents handed in
    descending order (no pair ascends), and a segment whose first two documents alone are out of order,
    still come out ascending."""
    for docs in ([3, 2, 1, 0], [1, 0, 2, 3]):
        p = ImpactPostings(np.zeros(4, np.int32), np.array(docs, np.uint32), np.full(4, 7, np.uint8))
        seg = segment_postings(p, 1)
        assert seg["postings"].tolist() == [0, 1, 2, 3], docs
        assert seg["seg_start"].tolist() == [0, 4] and seg["seg_impact"].tolist() == [7, 0]


def test_a_term_id_outside_the_vocabulary_is_refused():
    """A posting list id at or past ``vocab_size`` (or negative) is a ValueError, not a write past the end
    of the per-list counts; an out-of-range list whose impacts are all 0 is dropped as any zero impact is."""
    import pytest

    for bad in (2, 3, -1):
        p = ImpactPostings(np.array([0, bad], np.int32), np.array([0, 1], np.uint32), np.array([1, 1], np.uint8))
        with pytest.raises(ValueError, match="outside the vocabulary"):
            segment_postings(p, 2)
    p = ImpactPostings(np.array([1, 2], np.int32), np.array([0, 1], np.uint32), np.array([1, 0], np.uint8))
    assert segment_postings(p, 2)["seg_ptr"].tolist() == [0, 0, 1]


def test_a_written_shard_records_every_files_checksum_and_its_counts(tmp_path):
    """``write_shard``'s manifest entry holds the sha256 of each of the shard's four files (what
    ``verify_files`` checks), its document and posting counts, and the postings file's ``max_doc``."""
    import hashlib

    import pyarrow as pa

    from indexer.format import MAX_DOC_KEY, POSTINGS_FILE, SHARD_FILES
    from indexer.shards import write_shard

    p = ImpactPostings(np.array([0, 1, 1, 3], np.int32), np.array([2, 0, 2, 1], np.uint32), np.array([5, 1, 0, 9], np.uint8))
    docs = {"docid": ["a", "b", "c"], "title": ["", "", ""], "text": ["x", "y", "z"], "length": [1, 1, 1]}
    info = write_shard(tmp_path, "shard-00000", p, 4, docs)
    d = tmp_path / "shard-00000"
    assert info.files == {f: hashlib.sha256((d / f).read_bytes()).hexdigest() for f in SHARD_FILES}
    assert (info.name, info.num_docs, info.num_postings) == ("shard-00000", 3, 3)
    assert info.bytes == sum((d / f).stat().st_size for f in SHARD_FILES)
    schema = pa.ipc.open_file(pa.memory_map(str(d / POSTINGS_FILE), "r")).schema
    assert schema.metadata[MAX_DOC_KEY.encode()] == b"2"
