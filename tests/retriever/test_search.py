"""Search over a real (SciFact) NDRM2 index: exactness, anytime, query handling."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import numpy as np
import pytest

from ckqti import api
from ckqti.errors import IndexClosedError, IndexFormatError, QueryError
from retriever.chunks import BATCH_CHUNK, CHUNKS_PER_THREAD, MAX_CHUNK_HITS, batch_chunk
from retriever.index import Index, Shard
from retriever.kernel_saat import brute_force_scores
from retriever.results import SHOWN_IN_REPR, search_json, trec_ranking
from retriever.search import Searcher


def brute_force(idx: Index, terms, weights, k):
    rows = []
    for si, sh in enumerate(idx.shards):
        s = brute_force_scores(sh.postings, sh.seg_start, sh.seg_impact, sh.seg_ptr, terms, weights, sh.num_docs)
        rows += [(int(v), si, d) for d, v in enumerate(s) if v > 0]
    rows.sort(key=lambda x: (-x[0], x[1], x[2]))
    return rows[:k]


@pytest.mark.parametrize("heavy", [False, True])
def test_exact_mode_equals_brute_force_on_random_queries(scifact_index, heavy):
    """Light weights fit uint16 accumulators; heavy ones (scores past 65,535) take uint32."""
    idx = Index(scifact_index)
    searcher = Searcher(idx)
    rng = np.random.default_rng(0)
    df = np.asarray(idx.df)
    common = np.flatnonzero(df > 20)
    for q in range(60):
        pool = common if q % 2 else np.flatnonzero(df > 0)
        terms = np.unique(rng.choice(pool, size=rng.integers(1, 8)))
        weights = rng.integers(200, 400, terms.size) if heavy else rng.integers(1, 3, terms.size)
        got, _ = searcher.search_ids(terms, weights, 10)
        assert got == brute_force(idx, terms, weights, 10)


@pytest.mark.parametrize("threads", [1, 2])
def test_batch_search_equals_one_query_at_a_time_across_shards(scifact_index, threads):
    searcher = Searcher(scifact_index)
    assert len(searcher.index.shards) > 1
    rng = np.random.default_rng(1)
    df = np.asarray(searcher.index.df)
    pool = np.flatnonzero(df > 0)
    lists, weights = [], []
    for q in range(150):  # several chunks at either thread count (batch_chunk), so threads share the work
        n = 0 if q % 37 == 5 else int(rng.integers(1, 8))  # some empty queries
        t = np.unique(rng.choice(pool, size=n)) if n else np.zeros(0, np.int64)
        lists.append(t.astype(np.int64))
        heavy = q % 37 == 3  # a chunk holding one takes uint32 accumulators, the others uint16
        weights.append(rng.integers(200, 400, t.size) if heavy else rng.integers(1, 3, t.size).astype(np.int64))
    vals, shards, docs, counts, processed = searcher.topk_batch(lists, weights, 10, threads=threads)
    assert vals.shape == (150, 10) and counts.shape == (150,)
    for i, (t, w) in enumerate(zip(lists, weights)):
        v, s, d, n = searcher.topk_arrays(t, w, 10)
        c = counts[i]
        assert (vals[i, :c].tolist(), shards[i, :c].tolist(), docs[i, :c].tolist()) == (v.tolist(), s.tolist(), d.tolist())
        assert np.all(vals[i, c:] == -1) and processed[i] == n
        if t.size:
            assert list(zip(vals[i, :c].tolist(), shards[i, :c].tolist(), docs[i, :c].tolist())) == brute_force(
                searcher.index, t, w, 10)


def test_batch_helpers_are_no_more_than_the_chunks_left():
    """``threads`` far beyond the chunks starts no idle helpers: ``--threads 100000000`` on two
    queries asked the pool for that many threads, until memory ran out."""
    from retriever.chunks import run_chunks

    asked, done = [], []

    def submit(worker, n):
        asked.append(n)
        for _ in range(n):
            worker()
        return []

    run_chunks(done.append, [0, 64], 10**8, submit)
    assert asked == [1] and sorted(done) == [0, 64]
    run_chunks(done.append, list(range(10)), 3, submit)
    assert asked == [1, 2] and len(done) == 12


def test_batch_chunks_few_per_thread_and_bounded_in_memory():
    assert batch_chunk(300, 1, 1, 10) == BATCH_CHUNK  # one thread: no hand-offs to save
    for nq, threads in ((300, 2), (7, 2), (1, 4), (10_000, 3)):
        size = batch_chunk(nq, threads, 1, 1000)
        assert -(-nq // size) == min(nq, CHUNKS_PER_THREAD * threads)  # so many chunks, each thread takes its share
    size = batch_chunk(1_000_000, 2, 4, 1000)  # several shards: the chunk's hit arrays stay bounded
    assert size * 4 * 1000 <= MAX_CHUNK_HITS and size >= 1
    # however deep k goes, a chunk's hits stay bounded, down to one query a chunk (at one thread too):
    # 2,000 one-document shards at k = 1,000 took 2.3 GB for 200 queries
    assert batch_chunk(1_000_000, 2, 8, 100_000) == MAX_CHUNK_HITS // 800_000
    assert batch_chunk(300, 1, 4, 100_000) * 4 * 100_000 <= MAX_CHUNK_HITS
    assert batch_chunk(10, 1, 2, 10**7) == 1


def test_search_takes_plain_lists_and_default_weights(scifact_index):
    searcher = Searcher(scifact_index)
    rng = np.random.default_rng(4)
    pool = np.flatnonzero(np.asarray(searcher.index.df) > 0)
    lists = [np.unique(rng.choice(pool, size=int(rng.integers(1, 6)))).tolist() for _ in range(40)] + [[]]
    ones = searcher.topk_batch([np.asarray(x, np.int64) for x in lists], [np.ones(len(x), np.int64) for x in lists], 10)
    plain = searcher.topk_batch(lists, None, 10)
    assert all(np.array_equal(a, b) for a, b in zip(ones, plain))
    assert plain[3][-1] == 0  # the empty query: no hits
    for x in lists[:10]:  # one query a call, too
        t = np.asarray(x, np.int64)
        a, b = searcher.topk_arrays(t, None, 10), searcher.topk_arrays(t, np.ones(t.size, np.int64), 10)
        assert all(np.array_equal(u, v) for u, v in zip(a[:3], b[:3])) and a[3] == b[3]
    with pytest.raises(ValueError, match="weights"):
        searcher.topk_batch(lists[:2], [[1], []], 10)  # two queries hold at least 2 ids


def test_batch_helper_threads_are_kept_grown_and_closed(scifact_index):
    searcher = Searcher(Index(scifact_index))  # the caller's index: close() stops the helpers and leaves it open
    rng = np.random.default_rng(2)
    pool = np.flatnonzero(np.asarray(searcher.index.df) > 0)
    lists = [np.unique(rng.choice(pool, size=4)).astype(np.int64) for _ in range(80)]
    weights = [np.ones(t.size, np.int64) for t in lists]
    ref = searcher.topk_batch(lists, weights, 10, threads=1)
    results, pools = [], []
    for threads in (2, 2, 4, 2):
        results.append(searcher.topk_batch(lists, weights, 10, threads=threads))
        pools.append((searcher._pool, searcher._pool_size))
    assert pools[0] == pools[1] and pools[0][1] == 1  # kept from one batch to the next
    assert pools[2] == pools[3] and pools[2][0] is not pools[0][0] and pools[2][1] == 3  # grown for 4 threads
    searcher.close()
    assert searcher._pool is None
    results.append(searcher.topk_batch(lists, weights, 10, threads=2))  # a batch after close starts new helpers
    for got in results:
        assert all(np.array_equal(a, b) for a, b in zip(got, ref))
    searcher.close()


def test_close_from_another_thread_never_breaks_a_running_batch(scifact_index):
    """close() may run at any time: it used to shut the pool down between a batch choosing it and
    submitting to it (RuntimeError 'cannot schedule new futures after shutdown', hundreds of
    times in 10 s)."""
    import threading
    import time

    searcher = Searcher(Index(scifact_index))  # the caller's index: close() stops the helpers and leaves it open
    queries = ["cell growth cancer treatment", "diffusion tensor imaging"] * 20
    expected = [[h.docid for h in r.hits] for r in searcher.search_many(queries, 5)]
    errors, stop = [], threading.Event()

    def batches():
        while not stop.is_set():
            try:
                got = searcher.search_many(queries, 5, threads=4)
                assert [[h.docid for h in r.hits] for r in got] == expected
            except Exception as e:  # noqa: BLE001 - any failure is the finding
                errors.append(e)
                return

    worker = threading.Thread(target=batches)
    worker.start()
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline and not errors:
        searcher.close()
    stop.set()
    worker.join()
    searcher.close()
    assert errors == []


def test_searcher_is_a_context_manager_and_takes_any_iterable(scifact_index):
    """search_many of a generator used to return [] (the parse read it up); `with` closes the helpers."""
    queries = ["cell growth cancer treatment", "diffusion tensor imaging"]
    with Searcher(scifact_index) as searcher:
        listed = [[h.docid for h in r.hits] for r in searcher.search_many(queries, 5, threads=2)]
        assert searcher._pool is not None
        generated = [[h.docid for h in r.hits] for r in searcher.search_many((q for q in queries), 5)]
        assert generated == listed and len(listed) == 2
        assert repr(searcher) == f"Searcher({str(searcher.index.path)!r}, mode='exact')"
        with pytest.raises(QueryError, match="takes a list of query strings, got NoneType"):
            searcher.search_many(None)
    assert searcher._pool is None


def test_search_many_equals_search_and_returns_errors_in_place(scifact_index):
    searcher = Searcher(scifact_index)
    queries = ["cell growth cancer treatment", "the of and", "diffusion tensor imaging", "zzqx unknownword"]
    got = searcher.search_many(queries, 5, threads=2)
    assert isinstance(got[1], QueryError)
    for q, r in zip(queries, got):
        if not isinstance(r, QueryError):
            one = searcher.search(q, 5)
            assert [(h.docid, h.score) for h in r.hits] == [(h.docid, h.score) for h in one.hits]
            assert r.oov == one.oov and r.postings == one.postings



def test_results_and_hits_are_hashable_and_equal_by_value(scifact_index):
    """Users keep hits and whole results in sets and as dict keys: a result's list fields made
    its generated hash raise TypeError. Equal results hash alike; a different one is a new key."""
    searcher = Searcher(scifact_index)
    first, again = searcher.search("cell growth cancer", 5), searcher.search("cell growth cancer", 5)
    other = searcher.search("diffusion tensor imaging", 5)
    assert first == again and first is not again and hash(first) == hash(again)
    assert len({first, again, other}) == 2
    seen = {first: "a", other: "b"}
    assert seen[again] == "a" and seen[searcher.search_many(["diffusion tensor imaging"], 5)[0]] == "b"
    assert len(set(first.hits) | set(again.hits)) == len(first.hits) == 5

def test_scores_are_dequantized_sums_plus_offsets(scifact_index):
    searcher = Searcher(scifact_index)
    res = searcher.search("diffusion tensor imaging of white matter", 5)
    q = searcher.parse("diffusion tensor imaging of white matter")
    plan = searcher.plan(q)
    top, _ = searcher.search_ids(plan.lists, plan.weights, 5)
    assert [h.score for h in res.hits] == pytest.approx([v * plan.unit + plan.base for v, _, _ in top])
    assert res.hits[0].score >= res.hits[-1].score
    # NDRM2: one "idf" channel; each term's weight is n * step * idf(t) in units, rounded
    idx = searcher.index
    assert idx.quantizer.weights == ("idf",) and plan.base == 0.0
    assert plan.lists.tolist() == q.terms.tolist()
    f = q.weights * idx.quantizer.step * idx.idf[q.terms]
    assert plan.weights.max() == searcher.resolution
    assert np.all(np.abs(plan.weights * plan.unit - f) <= 0.5 * plan.unit + 1e-12)


def test_a_documents_score_looked_up_is_the_one_search_gives(scifact_index):
    """``document_score`` (what ``ckqti explain`` shows beside a model's own score) sums the document's
    stored impacts list by list: equal to search's score for every hit of every shard."""
    searcher = Searcher(scifact_index)
    query = "cell growth and cancer treatment"
    hits = searcher.search(query, 600).hits
    assert len({h.shard for h in hits}) == 3
    for h in hits:
        assert searcher.document_score(query, h.docid) == h.score
    assert searcher.document_score(query, "no-such-document") is None


def test_a_location_outside_the_index_is_a_query_error(scifact_index):
    """``score_at`` and ``document`` of a (shard, row) the index does not hold: a row past a shard's end
    scored just the query's offsets, a negative row read another document, a shard past the last an
    IndexError."""
    searcher = Searcher(scifact_index)
    hit = searcher.search("cell growth", 1).hits[0]
    assert searcher.document(hit)["docid"] == hit.docid
    assert searcher.score_at("cell growth", (hit.shard, hit.doc)) == hit.score
    last = len(searcher.index.shards) - 1
    for shard, row in ((0, -1), (last, searcher.index.shards[last].num_docs), (last + 1, 0)):
        with pytest.raises(QueryError, match=f"no document at shard {shard}, row {row}"):
            searcher.score_at("cell growth", (shard, row))
        with pytest.raises(QueryError, match=f"no document at shard {shard}, row {row}"):
            searcher.document(replace(hit, shard=shard, doc=row))
        with pytest.raises(QueryError, match=f"no document at shard {shard}, row {row}"):
            searcher.titles([hit, replace(hit, shard=shard, doc=row)])


def test_search_json_takes_the_hits_titles_without_reading_whole_documents(scifact_index, monkeypatch):
    """``search_json`` (``ckqti search --json``, every ``ckqti serve`` answer) read each hit's whole document
    for its title: 100 queries at k 1,000 spent 2.6 s there against 0.7 s searching. Its titles, now taken per
    shard in one Arrow call, are each hit's own document's, in every shard, deep and shallow."""
    searcher = Searcher(scifact_index)
    deep, shallow = searcher.search("cell growth and cancer treatment", 600), searcher.search("cancer", 3)
    assert len({h.shard for h in deep.hits}) == 3
    expected = {r.query: [searcher.document(h)["title"] for h in r.hits] for r in (deep, shallow)}
    assert len(set(expected[deep.query])) > 100
    monkeypatch.setattr(Searcher, "document", lambda self, hit: pytest.fail("read a whole document"))
    monkeypatch.setattr(Shard, "document", lambda self, i: pytest.fail("read a whole document"))
    for r in (deep, shallow):
        answer = search_json(searcher, r)
        assert [h["title"] for h in answer["hits"]] == expected[r.query]
        assert [h["docid"] for h in answer["hits"]] == [h.docid for h in r.hits]
    assert search_json(searcher, replace(deep, hits=[]))["hits"] == []


def test_a_deep_results_repr_shows_its_first_hits_and_counts_the_rest(scifact_index):
    """A SearchResult of 1,000 hits printed every one (78,000 characters), a TopK all its columns."""
    searcher = Searcher(scifact_index)
    result, top = searcher.search("cancer", 1000), searcher.topk_many(["cancer"], 1000)[0]
    more = f"... {len(result.hits) - SHOWN_IN_REPR:,} more"
    assert len(result.hits) > 2 * SHOWN_IN_REPR
    assert repr(result).startswith("SearchResult(query='cancer', terms=['cancer'], hits=[Hit(rank=1, ")
    assert f"{result.hits[SHOWN_IN_REPR - 1]!r}, {more}], oov=[]" in repr(result) and len(repr(result)) < 1000
    assert f"shards=array([{top.shards[0]}, " in repr(top) and repr(top).count(more) == 4 and len(repr(top)) < 1000
    short = searcher.search("cancer", 2)
    assert repr(short) == (f"SearchResult(query='cancer', terms=['cancer'], hits={short.hits!r}, oov=[], "
                           f"postings={short.postings}, unweighted=[])")


def test_a_result_has_its_hits_docids_and_scores_as_columns(scifact_index):
    """A bm25s user holds a query's results as docids and scores; a SearchResult had only ``hits[i]``:
    its ``docids`` and ``scores`` are ``topk_many``'s columns, read-only (the result is hashable)."""
    searcher = Searcher(scifact_index)
    result, top = searcher.search("cancer cells", 50), searcher.topk_many(["cancer cells"], 50)[0]
    assert len(result.hits) == 50 and result.docids == top.docids and result.scores == top.scores
    assert result.docids == [h.docid for h in result.hits] and result.scores == [h.score for h in result.hits]
    with pytest.raises(AttributeError):
        result.docids = []
    assert result.scores[0] > result.scores[-1] and hash(result) == hash(searcher.search("cancer cells", 50))


def test_anytime_mode_with_a_large_budget_is_exact(scifact_index):
    exact = Searcher(scifact_index)
    anytime = Searcher(scifact_index, mode="anytime", budget=10**9)
    small = Searcher(scifact_index, mode="anytime", budget=50)
    q = "cell growth cancer treatment"
    assert [h.docid for h in exact.search(q, 10).hits] == [h.docid for h in anytime.search(q, 10).hits]
    assert small.search(q, 10).postings < exact.search(q, 10).postings


def test_workspace_accumulators_widen_only_when_scores_need_it():
    from retriever.workspace import ACC16_MAX, Workspace

    ws = Workspace(100, 10)
    assert ws.acc(ACC16_MAX).dtype == np.uint16 and ws.acc(ACC16_MAX + 1).dtype == np.uint32
    assert ws.acc(10) is ws.acc(255) and ws.acc(10).shape == (100,)


def test_anytime_slack_prunes_sooner_and_is_checked(scifact_index):
    exact = Searcher(scifact_index)
    loose = Searcher(scifact_index, mode="anytime", budget=10**9, slack=0.3)
    full = Searcher(scifact_index, mode="anytime", budget=10**9, slack=1.0)
    q = "cell growth cancer treatment tumour protein expression"
    want = exact.search(q, 10)
    assert [h.docid for h in full.search(q, 10).hits] == [h.docid for h in want.hits]
    assert loose.search(q, 10).postings <= want.postings
    for bad in (0.0, 1.5, -1.0, None, "0.5", True):
        with pytest.raises(ValueError, match="slack"):
            Searcher(scifact_index, mode="anytime", slack=bad)
    assert Searcher(scifact_index, mode="anytime", slack=np.float32(0.5)).slack == 0.5  # any real, not only float
    with pytest.raises(ValueError, match="anytime"):
        Searcher(scifact_index, slack=0.5)


def test_out_of_vocabulary_terms_are_skipped_and_reported(scifact_index):
    res = Searcher(scifact_index).search("xyzzyqq cancer", 5)
    assert res.oov == ["xyzzyqq"] and res.terms == ["cancer"] and res.hits


def test_why_empty_says_why_a_search_retrieved_nothing(scifact_index):
    """``why_empty`` (a public method; ``ckqti run``'s and ``rerank``'s notes): no word in the index vocabulary (a
    stopword beside them is not listed), or known words no document scores above 0 for (NDRM2 gives "cell", in
    half of the 600 abstracts, idf 0; an unknown word beside it named too, as a run's notes name no unknown word
    elsewhere); a result with hits has no reason, where
    it said "no document scores above 0 for vitamin deficiency". TopK's and TopKColumns' say the same."""
    s = Searcher(scifact_index)
    cases = {"zzzqqq xxyyzz": "not in the index vocabulary: zzzqqq xxyyzz",
             "the zzzqqq": "not in the index vocabulary: zzzqqq",
             "cell": "no document scores above 0 for cell",
             "zzzqqq cell": "no document scores above 0 for cell (zzzqqq: not in the index vocabulary)",
             "vitamin deficiency": ""}
    for query, why in cases.items():
        result = s.search(query, 5)
        assert bool(result.hits) == (why == "") and result.why_empty() == why, query
    for many in (s.topk_many(list(cases), 5), s.topk_columns(list(cases), 5)):
        assert [top.why_empty() for top in many] == list(cases.values())


def test_empty_and_stopword_queries_give_a_clear_error(scifact_index):
    s = Searcher(scifact_index)
    for q in ["", "   ", "who is the", "?!"]:
        with pytest.raises(QueryError, match="no searchable terms"):
            s.search(q)


def test_corrupted_and_missing_shards_are_refused(tmp_path, scifact_small):
    from ckqti import api

    out = tmp_path / "idx"
    api.index(scifact_small, out, model="ndrm2", shard_size=300, progress=False)
    f = out / "shard-00001" / "postings.arrow"
    data = bytearray(f.read_bytes())
    data[-100] ^= 0xFF
    f.write_bytes(bytes(data))
    with pytest.raises(IndexFormatError, match="shard-00001/postings.arrow: index file corrupted"):
        Index(out)
    f.unlink()
    with pytest.raises(IndexFormatError, match="shard-00001/postings.arrow: index file missing"):
        Index(out)


def test_index_built_with_another_model_or_analyzer_is_refused(scifact_index):
    idx = Index(scifact_index)
    with pytest.raises(IndexFormatError, match="built with model 'ndrm2-untrained'"):
        idx.check_compatible(model_id="ndrm3-something")
    with pytest.raises(IndexFormatError, match="built with analyzer"):
        idx.check_compatible(analyzer={"stemmer": "none", "stopwords": "english", "lowercase": True})
    idx.check_compatible(analyzer=idx.manifest.analyzer, model_id="ndrm2-untrained")


def test_channel_weights_scale_a_channel_and_reject_unknown_channels(scifact_index):
    from retriever.query import channel_multipliers

    plain = Searcher(scifact_index)
    doubled = Searcher(scifact_index, channel_weights={"idf": 2.0})  # NDRM2: one "idf" channel
    q = "cell growth cancer treatment"
    a, b = plain.search(q, 10), doubled.search(q, 10)
    assert [h.docid for h in a.hits] == [h.docid for h in b.hits]
    assert [h.score for h in b.hits] == pytest.approx([2 * h.score for h in a.hits])
    with pytest.raises(ValueError, match="channels are"):
        Searcher(scifact_index, channel_weights={"one": 2.0})
    for bad in (-1.0, "2", None, float("nan"), float("inf"), True):
        with pytest.raises(ValueError, match="must be a finite number >= 0"):
            Searcher(scifact_index, channel_weights={"idf": bad})
    # beyond 1e6 the weights overflowed (scores inf, --json's invalid Infinity); below 1e-6 (1e-320) the
    # unit underflowed and the weights were not integers (a histogram "dimension exceeded" traceback)
    for bad in (1e308, 2e6, 1e-320, 5e-7):
        with pytest.raises(ValueError, match="must be 0 or between 1e-06 and 1e"):
            Searcher(scifact_index, channel_weights={"idf": bad})
    for edge in (1e-6, 1e6):
        assert all(np.isfinite(h.score) for h in Searcher(scifact_index, channel_weights={"idf": edge}).search(q, 5).hits)
    with pytest.raises(ValueError, match="all 0 .*nothing would score"):  # NDRM2's one channel off: nothing left
        Searcher(scifact_index, channel_weights={"idf": 0})
    with pytest.raises(ValueError, match="a mapping of channel name to weight, got list"):
        Searcher(scifact_index, channel_weights=[("idf", 2.0)])
    # two channels: only the named one moves
    assert channel_multipliers(("one", "idf"), {"one": 4.0}).tolist() == [4.0, 1.0]
    assert channel_multipliers(("one", "idf"), None).tolist() == [1.0, 1.0]
    assert channel_multipliers(("one", "idf"), {"one": 0}).tolist() == [0.0, 1.0]
    with pytest.raises(ValueError, match="all 0"):
        channel_multipliers(("one", "idf"), {"one": 0, "idf": 0.0})


def test_hand_edited_manifests_are_one_line_errors(tmp_path, scifact_index):
    """A manifest that is not an object, names an analyzer this ckqti lacks, or lists shards that
    do not hold its documents is refused as an index format error, not a traceback."""
    import json
    import shutil

    edits = {
        "list": lambda m: [],
        "stemmer": lambda m: {**m, "analyzer": {**m["analyzer"], "stemmer": "porter"}},
        "shards": lambda m: {**m, "shards": []},
    }
    for name, edit in edits.items():
        idx = shutil.copytree(scifact_index, tmp_path / name)
        path = idx / "manifest.json"
        path.write_text(json.dumps(edit(json.loads(path.read_text()))))
        with pytest.raises(IndexFormatError, match="manifest"):
            Index(idx)
    with pytest.raises(IndexFormatError, match="is a file; an index is a directory"):
        Index(tmp_path / "list" / "manifest.json")


def test_k_is_capped_at_the_collection_size(scifact_index):
    """A k far beyond the documents asks for no more memory than the collection's hits."""
    s = Searcher(scifact_index)
    n = s.index.manifest.num_docs
    q = s.plan(s.parse("white matter diffusion"))
    vals, shards, docs, counts, _ = s.topk_batch([q.lists], [q.weights], 10**15)
    assert vals.shape == (1, n) and counts[0] <= n
    assert len(s.search("white matter diffusion", 10**15).hits) == counts[0]


def test_counts_given_by_a_caller_are_checked(scifact_index):
    """k, threads and an anytime budget are integers >= 1 (the CLI's types check them; the API
    returned nothing for k 0, searched without limit for budget -5, and failed in numba for k 2.5)."""
    s = Searcher(scifact_index)
    for k in (0, -1, 2.5, "3", True):
        with pytest.raises(QueryError, match="k must be an integer >= 1"):
            s.search("white matter", k)
        with pytest.raises(QueryError, match="k must be an integer >= 1"):
            s.search_many(["white matter"], k)
    with pytest.raises(QueryError, match="threads must be an integer >= 1"):
        s.search_many(["white matter"], 10, threads=0)
    for budget in (0, -5):
        with pytest.raises(QueryError, match="budget must be an integer >= 1"):
            Searcher(scifact_index, mode="anytime", budget=budget)
    # a budget past int64 (the CLI's IntRange takes any) means no limit, not numba's OverflowError
    huge = Searcher(scifact_index, mode="anytime", budget=10**30)
    assert huge.search("white matter", 5) == Searcher(scifact_index, mode="anytime", budget=10**9).search("white matter", 5)
    assert huge.search_many(["white matter"], 5)[0] == huge.search("white matter", 5)
    for query in (None, 123, b"white matter"):
        with pytest.raises(QueryError, match="a query is a string, got"):
            s.search(query, 10)
    with pytest.raises(QueryError, match="a list of query strings, got one string"):
        s.search_many("white matter", 10)
    bad, good = s.search_many([None, "white matter"], 3)  # one bad query of many is that query's error
    assert isinstance(bad, QueryError) and len(good.hits) == 3
    assert len(s.search("white matter", np.int64(3)).hits) == 3


def test_ties_at_the_cut_are_broken_as_trec_eval_breaks_them(scifact_index):
    """Quantized scores tie often. The kernels break ties by internal number, trec_eval by docid
    (descending): the hits are cut and ranked trec_eval's way, so a top 10 is the first 10 of a
    top 200 (a run with -k 10 used to score other documents than the top 10 of -k 100), through
    search and search_many alike, over this index's 3 shards."""
    s = Searcher(scifact_index)
    queries = ["cell", "protein", "cancer risk", "brain", "mice", "blood pressure", "gene expression"]
    cut_ties = 0
    for q in queries:
        deep = s.search(q, 200).hits
        assert [(h.score, h.docid) for h in deep] == sorted(((h.score, h.docid) for h in deep), reverse=True)
        assert [h.rank for h in deep] == list(range(1, len(deep) + 1))
        for k in (1, 5, 10, 37):
            got = s.search(q, k).hits
            assert [h.docid for h in got] == [h.docid for h in deep[:k]], (q, k)
            cut_ties += len(deep) > k and deep[k].score == deep[k - 1].score
        batch = s.search_many([q, "white matter"], 10)[0].hits
        assert [h.docid for h in batch] == [h.docid for h in deep[:10]]
    assert cut_ties > 0  # the case was met


def hand_index(path, postings, num_docs, vocab_size, quantizer, offsets=None, df=None):
    """A one-shard index written by hand: ``postings`` maps a posting list id to ``[(doc, impact)]``;
    term ``i`` is named ``t{i}``, document ``j`` ``d{j}``; ``df`` (default: from the postings)
    and ``num_docs`` are the collection statistics idf is computed from."""
    from ckqti.vocab import Vocabulary
    from indexer.build import write_index
    from indexer.shards import ImpactPostings

    rows = [(t, d, i) for t, pairs in postings.items() for d, i in pairs]
    lists = np.array([r[0] for r in rows], np.int32)
    if df is None:
        df = np.bincount(lists // quantizer.channels, minlength=vocab_size)
    df = np.asarray(df, np.int64)
    vocab = Vocabulary([f"t{i}" for i in range(vocab_size)], df, df.copy(), num_docs, int(df.sum()))
    shard = ImpactPostings(lists, np.array([r[1] for r in rows], np.uint32), np.array([r[2] for r in rows], np.uint8),
                           channels=quantizer.channels)
    docs = {"docid": [f"d{j}" for j in range(num_docs)], "title": [""] * num_docs, "text": [""] * num_docs,
            "length": [1] * num_docs}
    write_index(path, [(shard, docs)], vocab, np.zeros(vocab_size) if offsets is None else np.asarray(offsets),
                quantizer, {"id": "hand", "name": "hand"}, {"stemmer": "none", "stopwords": "none", "lowercase": True})
    return Index(path)


# term 2: d0 4, d1 2, d3 10; term 3: d1 6, d2 1; term 4: d0 3 (d4 in no list)
HAND_ONE = {2: [(0, 4), (1, 2), (3, 10)], 3: [(1, 6), (2, 1)], 4: [(0, 3)]}


def test_offsets_are_added_once_per_query_term_occurrence(tmp_path):
    """A latent model's index (NDRM1, NDRM3) stores each term's offset ``c_t`` in the vocabulary
    (docs/INDEX.md): a pair's score is ``impact * step + c_t``, so a query term given twice adds
    its offset twice. ``plan.base`` is the offsets weighted by the query's term counts, and every
    hit's score is the brute-force sum over query term occurrences of ``impact * step + c_t``."""
    from indexer.quantize import Quantizer

    offsets = [0.0, 0.0, 0.25, -1.5, 0.75]
    idx = hand_index(tmp_path / "idx", HAND_ONE, 5, 5, Quantizer(0.5), offsets=offsets)
    assert idx.quantizer.weights == ("one",) and np.asarray(idx.offsets).tolist() == offsets
    s = Searcher(idx)
    q = s.parse("t2 t3 t2")
    assert q.terms.tolist() == [2, 3] and q.weights.tolist() == [2, 1]
    plan = s.plan(q)
    assert plan.base == 2 * 0.25 - 1.5 and plan.unit == 0.5 and plan.weights.tolist() == [2, 1]
    res = s.search("t2 t3 t2", 10)
    impact = {(t, d): i for t, pairs in HAND_ONE.items() for d, i in pairs}
    want = {f"d{d}": sum(impact.get((t, d), 0) * 0.5 + offsets[t] for t in (2, 3, 2)) for d in range(4)}
    assert [h.docid for h in res.hits] == ["d3", "d1", "d0", "d2"]
    assert [h.score for h in res.hits] == pytest.approx([want[h.docid] for h in res.hits]) == [9.0, 4.0, 3.0, -0.5]


def test_a_one_channel_weight_scales_a_single_one_channel_index(tmp_path):
    """``channel_weights={"one": 2.0}`` on an index whose only channel is ``"one"`` (NDRM1's,
    ``write_prebuilt_index``'s) doubles every score: the exact one-channel plan's unit is the
    step times the channel's multiplier."""
    from indexer.quantize import Quantizer

    idx = hand_index(tmp_path / "idx", HAND_ONE, 5, 5, Quantizer(0.5))
    plain, doubled = Searcher(idx), Searcher(idx, channel_weights={"one": 2.0})
    q = plain.parse("t2 t3 t2")
    assert plain.plan(q).unit == 0.5 and doubled.plan(q).unit == 1.0
    a, b = plain.search("t2 t3 t4", 10), doubled.search("t2 t3 t4", 10)
    assert [h.docid for h in a.hits] == [h.docid for h in b.hits] == ["d3", "d1", "d0", "d2"]
    assert [h.score for h in a.hits] == [5.0, 4.0, 3.5, 0.5]
    assert [h.score for h in b.hits] == [10.0, 8.0, 7.0, 1.0]


# two channels, list t * 2 + c: term 2 "one" d0 200, d1 10, d5 250, "idf" d0 5, d1 30, d2 40;
# term 3 "one" d3 255, d5 100, "idf" d1 20, d3 10, d4 60
HAND_TWO = {4: [(0, 200), (1, 10), (5, 250)], 5: [(0, 5), (1, 30), (2, 40)],
            6: [(3, 255), (5, 100)], 7: [(1, 20), (3, 10), (4, 60)]}


def test_a_channel_weighted_zero_is_not_read_and_the_other_ranks_alone(tmp_path):
    """``channel_weights={"one": 0}`` ranks by the explicit ("idf") channel alone: the hits and
    scores are brute force over that channel's stored impacts (t2 and t3 share a df, so an idf,
    so both lists weigh 128), and the "one" lists are not read (the postings counter counts the
    "idf" lists' 6 postings, not the 11 of both channels)."""
    from indexer.quantize import Quantizer

    idx = hand_index(tmp_path / "idx", HAND_TWO, 10, 5, Quantizer((0.5, 0.25), weights=("one", "idf")),
                     df=[0, 0, 2, 2, 0])
    plain, explicit = Searcher(idx), Searcher(idx, channel_weights={"one": 0})
    q = "t2 t3"
    assert explicit.plan(explicit.parse(q)).lists.tolist() == [5, 7]
    full, alone = plain.search(q, 10), explicit.search(q, 10)
    assert full.postings == 11 and alone.postings == 6
    per_doc = Counter()
    for lid in (5, 7):
        for d, impact in HAND_TWO[lid]:
            per_doc[f"d{d}"] += impact
    want = sorted(per_doc.items(), key=lambda x: -x[1])
    assert [h.docid for h in alone.hits] == [d for d, _ in want] == ["d4", "d1", "d2", "d3", "d0"]
    assert [h.score for h in alone.hits] == pytest.approx([v * 0.25 * idx.idf[2] for _, v in want])
    assert [h.docid for h in full.hits][:2] == ["d5", "d3"]  # the "one" channel, read, ranks otherwise
    assert explicit.search_many([q], 10)[0] == alone


def test_a_weight_rounding_to_zero_stays_one_unless_its_list_adds_less_than_a_unit(tmp_path):
    """The plan's rule for idf-weighted lists (module docstring): a factor ``f`` whose weight
    ``rint(f / unit)`` is 0 keeps weight 1 when its list's largest contribution ``255 f`` is at
    least one unit, and is dropped only below that. One "idf" channel, 1000 documents: t2 (df 1,
    idf 6.50) sets the unit; t3 (df 343, idf 0.649: f 0.0998 of the largest) and t4 (df 497,
    idf 0.0120: 0.00184 of it)."""
    from indexer.quantize import Quantizer

    postings = {2: [(0, 200)], 3: [(d, 100) for d in range(343)], 4: [(d, 50) for d in range(497)]}
    idx = hand_index(tmp_path / "idx", postings, 1000, 5, Quantizer(0.5, weights=("idf",)))
    idf = idx.idf[[2, 3, 4]]
    assert idf[1] / idf[0] == pytest.approx(0.0998, abs=1e-4) and idf[2] / idf[0] == pytest.approx(0.00184, abs=1e-5)
    q = Searcher(idx).parse("t2 t3 t4")
    # resolution 128: t3 rounds to 13; t4 to 0, but 255 * f = 0.47 units: kept at 1
    plan = Searcher(idx).plan(q)
    assert plan.lists.tolist() == [2, 3, 4] and plan.weights.tolist() == [128, 13, 1]
    # resolution 1 (unit = the largest f): t3 rounds to 0 with 255 * f = 25 units, kept at 1; t4's
    # 255 * f = 0.47 of a unit: dropped
    coarse = Searcher(idx, resolution=1)
    plan = coarse.plan(q)
    assert plan.lists.tolist() == [2, 3] and plan.weights.tolist() == [1, 1]
    assert coarse.unweighted(q, plan) == ["t4"]
    hits = coarse.search("t2 t3 t4", 3).hits
    assert plan.unit == pytest.approx(0.5 * idf[0])
    assert hits[0].docid == "d0" and [h.score for h in hits] == pytest.approx([300 * plan.unit] + [100 * plan.unit] * 2)


def test_a_term_adding_nothing_is_said_to_have_idf_0_only_where_that_is_why(tmp_path):
    """``ckqti search``'s reason for known terms that add nothing (:meth:`Searcher.unweighted_reason`): idf 0
    only when every channel is idf-weighted and every such term has idf 0 (t5: in 600 of 1,000 documents);
    t4 (in 497: idf 0.012) drops for its weight, as does any term whose channel is not idf-weighted."""
    from indexer.quantize import Quantizer

    postings = {2: [(0, 200)], 4: [(d, 50) for d in range(497)], 5: [(d, 10) for d in range(600)]}
    idf = Searcher(hand_index(tmp_path / "idf", postings, 1000, 6, Quantizer(0.5, weights=("idf",))))
    assert idf.index.idf[5] == 0 < idf.index.idf[4]
    assert idf.unweighted_reason(["t5"]) == "idf 0: each is in at least half of the documents"
    rounds = "their weight rounds to 0 beside the other terms' or their channel is weighted 0"
    assert idf.unweighted_reason(["t4", "t5"]) == rounds
    one = Searcher(hand_index(tmp_path / "one", postings, 1000, 6, Quantizer(0.5, weights=("one",))))
    assert one.unweighted_reason(["t5"]) == rounds
    two = {2 * t + c: pairs for t, pairs in postings.items() for c in (0, 1)}  # channel 1 unweighted by idf
    mixed = Searcher(hand_index(tmp_path / "mixed", two, 1000, 6, Quantizer((0.5, 0.5), weights=("idf", "one")),
                                  df=[0, 0, 1, 0, 497, 600]))
    assert mixed.index.idf[5] == 0
    assert mixed.unweighted_reason(["t5"]) == rounds

def test_search_many_in_bounded_parts_and_deep_k_over_small_shards(tmp_path, scifact_small, monkeypatch):
    """search_many takes its queries a bounded part at a time (a [queries, k] array of hits at k
    near the collection size passed 4 GB), and a shard holds at most its own documents' hits
    (one-document shards used to get k-wide arrays each): results equal one query at a time."""
    import retriever.search as module
    from ckqti import api

    api.index(scifact_small, tmp_path / "idx", model="ndrm2", shard_size=150, progress=False)
    searcher = Searcher(tmp_path / "idx")
    assert len(searcher.index.shards) == 4
    queries = ["the of", "cell growth cancer treatment", "zzqx", "diffusion tensor imaging", "vitamin d", "the"]
    monkeypatch.setattr(module, "MAX_BATCH_HITS", 3 * 601)  # parts of 3 queries at k = 600
    got = searcher.search_many(queries, 600, threads=2)
    for q, r in zip(queries, got):
        if isinstance(r, QueryError):
            assert q in ("the of", "the")
            continue
        one = searcher.search(q, 600)
        assert [(h.docid, h.score) for h in r.hits] == [(h.docid, h.score) for h in one.hits]
        assert len(r.hits) > 10 or q == "zzqx"


def test_compiling_is_true_only_while_a_kernel_compiles():
    """``ckqti search``/``run`` say the kernels are compiling only when they are: not before a
    first call, not after it (nor for a plain function, as under ``NUMBA_DISABLE_JIT=1``)."""
    from numba import njit
    from numba.core import event

    from retriever.kernel_status import compiling

    @njit
    def add_one(x):
        return x + 1

    seen = []

    class Listener(event.Listener):
        def on_start(self, ev):
            if ev.data["dispatcher"] is add_one:
                seen.append(compiling(add_one))

        def on_end(self, ev):
            pass

    assert not compiling(add_one) and not compiling(add_one.py_func)
    with event.install_listener("numba:compile", Listener()):
        assert add_one(1) == 2
        assert add_one(2) == 3  # compiled: nothing to compile
        assert add_one(1.5) == 2.5  # other types compile again (the accumulators' second width; it said nothing)
    assert seen == [True, True] and not compiling(add_one)


def test_tied_documents_are_ranked_by_docid_as_python_orders_strings(tmp_path):
    """A tie is broken by docid descending in code point order, as trec_eval's strcmp and Python's sort
    order them (numpy sorts the docids here: case, digits as text, accents, other scripts, beyond
    the basic plane), both for a few hits and for more than one Arrow call fetches at once."""
    from retriever.index import TAKE_FROM

    names = ["a", "B", "b", "Z", "z", "9", "10", "100", "é", "e", "ß", "ü1", "日本", "\U0001F600x", "a-b", "a_b", "A0"]
    docids = [f"{n}{i}" if i >= len(names) else n for i, n in enumerate(names * 3)]
    corpus = tmp_path / "c.tsv"
    fillers = "".join(f"filler{i}\tother text there\n" for i in range(2 * len(docids)))  # so that idf is not 0
    corpus.write_text("".join(f"{d}\tsame words here\n" for d in docids) + fillers, encoding="utf-8")
    api.index(corpus, tmp_path / "ix", model="ndrm2", progress=False)
    s = Searcher(tmp_path / "ix")
    assert len(docids) > TAKE_FROM
    for k in (3, len(docids)):
        hits = s.search("same words", k).hits
        assert len({h.score for h in hits}) == 1
        assert [h.docid for h in hits] == sorted(docids, reverse=True)[:k]
        top = s.topk_many(["same words"], k)[0]
        assert (top.docids, top.scores) == ([h.docid for h in hits], [h.score for h in hits])


def test_each_hit_names_the_shard_and_row_of_its_docid(scifact_index):
    """A hit's (shard, doc) is its own document's (snippets and documents are read from there), in
    search, search_many and topk_many alike: the rows are reordered with the docids and scores (a query
    of one word ties documents of several shards, which the kernel returns in another order)."""
    searcher = Searcher(scifact_index)
    queries = ["cancer", "cell growth cancer treatment"]
    results = [searcher.search(queries[0], 50), *searcher.search_many(queries, 50)]
    for r in results:
        assert len({h.shard for h in r.hits}) > 1
        assert [searcher.index.shards[h.shard].docid(h.doc) for h in r.hits] == [h.docid for h in r.hits]
    for top in searcher.topk_many(queries, 50):
        assert [searcher.index.shards[s].docid(d) for s, d in zip(top.shards.tolist(), top.docs.tolist())] == top.docids


@pytest.mark.parametrize("arrow", [False, True])
@pytest.mark.parametrize("by_score", [True, False])
def test_trec_ranking_is_score_then_docid_descending(by_score, arrow):
    """Hits in the kernels' order (score descending) have only their ties sorted; any other order is
    sorted whole; both rank as sorting (score, docid) pairs in Python, descending, does, whether the
    docids are a list or an Arrow array (``ckqti run``'s)."""
    import pyarrow as pa

    rng = np.random.default_rng(0)
    for n in (0, 1, 2, 7, 300):
        vals = rng.integers(0, 12, n)  # many ties
        docids = [f"d{i}" if i % 4 else f"é{rng.integers(99)}-{i}" for i in rng.permutation(n).tolist()]
        if by_score:
            keep = np.argsort(-vals, kind="stable")
            vals, docids = vals[keep], [docids[i] for i in keep.tolist()]
        expected = sorted(zip(vals.tolist(), docids), reverse=True)
        order = trec_ranking(vals, pa.array(docids, pa.string()) if arrow else docids).tolist()
        assert [(vals[i], docids[i]) for i in order] == expected


def test_batch_rows_past_a_querys_hits_are_minus_one_in_every_column(tmp_path):
    """:meth:`Searcher.topk_batch` fills a query's row up to its count and leaves the rest -1 in
    all three columns, the shard column too (a one-shard index writes it after the kernel)."""
    from indexer.quantize import Quantizer

    s = Searcher(hand_index(tmp_path / "idx", HAND_ONE, 5, 5, Quantizer(0.5)))
    vals, shards, docs, counts, _ = s.topk_batch([np.array([4]), np.array([2, 3]), np.zeros(0, np.int64)], None, 5)
    assert counts.tolist() == [1, 4, 0]
    assert vals.tolist() == [[3, -1, -1, -1, -1], [10, 8, 4, 1, -1], [-1] * 5]
    assert docs.tolist() == [[0, -1, -1, -1, -1], [3, 1, 0, 2, -1], [-1] * 5]
    assert shards.tolist() == [[0, -1, -1, -1, -1], [0, 0, 0, 0, -1], [-1] * 5]


def test_batch_search_deeper_than_the_smallest_shard_equals_one_query_at_a_time(scifact_index):
    """Shards of 250, 250 and 100 documents at k = 450: a shard gives up to its own size in hits,
    the largest shard's, not the smallest's (these queries' top 450 hold more than 100 of one shard)."""
    searcher = Searcher(scifact_index)
    assert sorted(s.num_docs for s in searcher.index.shards) == [100, 250, 250]
    df = np.asarray(searcher.index.df)
    lists = [np.flatnonzero(df > 30)[i:i + 12].astype(np.int64) for i in (0, 12, 24)]
    vals, shards, docs, counts, _ = searcher.topk_batch(lists, None, 450)
    for i, t in enumerate(lists):
        v, s, d, _ = searcher.topk_arrays(t, None, 450)
        assert np.bincount(s).max() > 100
        c = counts[i]
        assert (vals[i, :c].tolist(), shards[i, :c].tolist(), docs[i, :c].tolist()) == (v.tolist(), s.tolist(), d.tolist())


def test_batch_accumulators_hold_a_score_just_past_uint16(tmp_path):
    """A batch query whose largest possible score (sum of weights x 255) passes 65,535 gets uint32
    accumulators: a document at impact 255 in a list weighted 258 scores 65,790 (not 65,790 mod
    65,536); at weight 257 its 65,535 still fits uint16."""
    from indexer.quantize import Quantizer

    s = Searcher(hand_index(tmp_path / "idx", {2: [(0, 255), (1, 1)]}, 2, 3, Quantizer(0.5)))
    for w in (257, 258):
        vals, _, docs, counts, _ = s.topk_batch([np.array([2])], [np.array([w])], 2)
        assert (counts[0], vals[0].tolist(), docs[0].tolist()) == (2, [255 * w, w], [0, 1])


def test_a_documents_score_skips_a_list_its_shard_was_written_without(tmp_path):
    """A shard written before a term existed has no list for it (``seg_ptr`` ends before the id):
    ``document_score`` counts nothing from it, as search does, and reads no list past the end (the
    id equal to the shard's list count, here t4 in a shard of lists 0-3)."""
    from indexer.quantize import Quantizer

    idx = hand_index(tmp_path / "idx", HAND_ONE, 5, 5, Quantizer(0.5))
    sh = idx.shards[0]
    idx.shards[0] = replace(sh, seg_ptr=sh.seg_ptr[:5])  # as written when the vocabulary had 4 terms
    assert idx.shards[0].num_lists == 4
    s = Searcher(idx)
    hits = s.search("t2 t4", 10).hits
    assert [(h.docid, h.score) for h in hits] == [("d3", 5.0), ("d0", 2.0), ("d1", 1.0)]
    assert [s.document_score("t2 t4", h.docid) for h in hits] == [5.0, 2.0, 1.0]


def random_index(path, num_shards: int, seed: int = 0, offset: float = 0.0) -> Index:
    """An index of ``num_shards`` shards written by hand: awkward docids (case, digits as text, accents,
    other scripts, beyond the basic plane, punctuation) and impacts from a few values, so that many
    documents tie, but for term 6, whose documents tie with none (its first 60 of each shard); term ``i`` is
    named ``t{i}`` and has the score offset ``offset``."""
    from ckqti.vocab import Vocabulary
    from indexer.build import write_index
    from indexer.quantize import Quantizer
    from indexer.shards import ImpactPostings

    rng = np.random.default_rng(seed)
    names = ["a", "B", "b", "Z", "z", "9", "10", "100", "é", "e", "ß", "ü1", "日本", "\U0001F600x", "a-b", "a_b", "A0"]
    vocab_size, per_shard, untied = 7, 150, 60
    shards, df = [], np.zeros(vocab_size, np.int64)
    for si in range(num_shards):
        lists, docs, impacts = [], [], []
        for t in range(vocab_size - 1):
            hit = np.flatnonzero(rng.random(per_shard) < 0.6)
            lists += [t] * hit.size
            docs += hit.tolist()
            impacts += rng.integers(1, 4, hit.size).tolist()  # few values: ties everywhere
            df[t] += hit.size
        lists += [vocab_size - 1] * untied
        docs += list(range(untied))
        impacts += (255 - si * untied - np.arange(untied)).tolist()
        df[-1] += untied
        docids = [f"{names[(si * per_shard + j) % len(names)]}{rng.integers(1000)}-{si}-{j}" for j in range(per_shard)]
        shards.append((ImpactPostings(np.array(lists, np.int32), np.array(docs, np.uint32), np.array(impacts, np.uint8),
                                      channels=1),
                       {"docid": docids, "title": [""] * per_shard, "text": [""] * per_shard, "length": [1] * per_shard}))
    vocab = Vocabulary([f"t{i}" for i in range(vocab_size)], df, df.copy(), num_shards * per_shard, int(df.sum()))
    write_index(path, shards, vocab, np.full(vocab_size, offset), Quantizer(0.5), {"id": "hand", "name": "hand"},
                {"stemmer": "none", "stopwords": "none", "lowercase": True})
    return Index(path)


@pytest.mark.parametrize("num_shards", [1, 3])
@pytest.mark.parametrize("threads", [1, 2])
def test_topk_columns_are_topk_many_in_arrow_and_numpy(tmp_path, num_shards, threads):
    """``ckqti run``'s columns (docids an Arrow array, scores a numpy one) are the hits, order and
    scores of :meth:`Searcher.topk_many` (Python strings and floats), on an index whose documents
    tie everywhere and whose docids sort awkwardly, at depths that cut a tie, take every document
    or fewer than an Arrow call fetches; and a run written from either is the same, byte for byte."""
    import pyarrow as pa

    from retriever.index import TAKE_FROM
    from retriever.run_writer import write_ranked_run

    searcher = Searcher(random_index(tmp_path / "ix", num_shards))
    assert len(searcher.index.shards) == num_shards
    queries = ["t0", "t1 t2", "t3 t3 t4 t5", "t0 t1 t2 t3 t4 t5", "unknown", "", "t5 nothing", "t2 t0", "t6"]
    for k in (5, TAKE_FROM + 1, 100, 10_000):
        old, new = searcher.topk_many(queries, k, threads), searcher.topk_columns(queries, k, threads)
        assert len(old) == len(new) == len(queries)
        for a, b in zip(old, new):
            if isinstance(a, QueryError):
                assert isinstance(b, QueryError) and b.message == a.message
                continue
            assert isinstance(b.docids, pa.Array) or len(a.docids) <= TAKE_FROM  # a list up to it (and its ties)
            assert isinstance(b.scores, np.ndarray) and b.scores.dtype == np.float64
            top = b.topk()
            assert (top.docids, top.scores, top.shards.tolist(), top.docs.tolist()) == (
                a.docids, a.scores, a.shards.tolist(), a.docs.tolist())
            assert (top.query, top.terms, top.oov, top.postings, top.unweighted) == (
                a.query, a.terms, a.oov, a.postings, a.unweighted)
        assert any(len(a.docids) > 1 and len(set(a.scores)) < len(a.scores) for a in old if not isinstance(a, QueryError))
        for name, rows in (("old.run", old), ("new.run", new)):
            write_ranked_run(tmp_path / name, [(f"q{i}", r.docids, r.scores) for i, r in enumerate(rows)
                                               if not isinstance(r, QueryError) and len(r.docids)], "t")
        assert (tmp_path / "new.run").read_bytes() == (tmp_path / "old.run").read_bytes()


@pytest.mark.parametrize("engine", ["numba", "numpy"])
@pytest.mark.parametrize("num_shards", [1, 3])
def test_scores_equal_in_single_precision_rank_as_trec_eval_ranks_them(tmp_path, engine, num_shards):
    """trec_eval holds a score as a C float: a channel weighted very little (within the 1e-6 it allows)
    beside the queries' offsets makes scores of different integer sums equal there, and trec_eval
    ranks them by docid. search, search_many, topk_many and topk_columns rank them so too, and cut
    at k so (a run's top 5 is the top 5 of its top 10,000 as trec_eval reads either); it ranked by
    the integer sums, so that a run's lines were not in the order trec_eval evaluated."""
    from retriever.runs import trec_order

    s = Searcher(random_index(tmp_path / "ix", num_shards, offset=50.0), channel_weights={"one": 1e-6}, engine=engine)
    queries = ["t0", "t1 t2", "t3 t3 t4 t5", "t0 t1 t2 t3 t4 t5", "t6", "t2 t6"]
    collapsed = 0
    for q in queries:
        every = s.search(q, 10_000)
        collapsed += len(set(np.float32(every.scores).tolist())) < len(set(every.scores))
        whole = trec_order(list(zip(every.docids, every.scores)))
        assert every.docids == [d for d, _ in whole]
        for k in (5, 40, 10_000):
            want = [d for d, _ in whole[:k]]
            assert s.search(q, k).docids == want, (q, k)
            assert s.search_many([q, "t0"], k, threads=2)[0].docids == want
            assert s.topk_many([q], k)[0].docids == want
            top = s.topk_columns([q], k)[0]
            assert (top.docids if isinstance(top.docids, list) else top.docids.to_pylist()) == want
    assert collapsed  # different integer sums met as one single-precision score


def test_a_tie_at_the_cut_within_the_margin_is_not_searched_again(tmp_path, monkeypatch):
    """A batch asks for k + k // 8 hits (``tie_margin``): a tie at the k-th score that ends within them is
    ranked without searching its query again, a longer one is searched again, and a query with fewer
    hits than asked for has them all; each way the hits are those of ``search`` (every tie of the k-th
    score in, cut by docid)."""
    from retriever.merge import tie_margin

    groups = {"a": (14, "same same same words"), "b": (4, "same same words pad"), "c": (5, "same words pad pad")}
    lines = [f"{g}{i}\t{text}\n" for g, (n, text) in groups.items() for i in range(n)]
    fillers = "".join(f"filler{i}\tother text there\n" for i in range(60))  # idf above 0
    (tmp_path / "c.tsv").write_text("".join(lines) + fillers)
    api.index(tmp_path / "c.tsv", tmp_path / "ix", model="ndrm2", progress=False)
    s = Searcher(tmp_path / "ix")
    scores = {h.docid[0]: h.score for h in s.search("same words", 30).hits}
    assert scores["a"] > scores["b"] > scores["c"]  # three tie groups, 14, 4 and 5 documents
    again = []
    real = Searcher.topk_with_ties
    monkeypatch.setattr(Searcher, "topk_with_ties", lambda self, *a: again.append(a[2]) or real(self, *a))
    assert tie_margin(16) == 18 and tie_margin(10) == 11
    # k 16: the 16th is in group b (positions 15-18), asked 18: the 18th still ties -> searched again;
    # k 17, asked 19: the 19th is group c's -> no; k 22, asked 24, 23 hits in all -> no
    for k, searched_again in ((16, True), (17, False), (22, False), (15, True)):
        again.clear()
        top = s.topk_many(["same words"], k)[0]
        assert bool(again) == searched_again, (k, again)
        hits = s.search("same words", k).hits
        assert top.docids == [h.docid for h in hits] and top.scores == [h.score for h in hits]
        want = sorted(((scores[d[0]], d) for d in (line.split("\t")[0] for line in lines)), reverse=True)[:k]
        assert top.docids == [d for _, d in want]


def test_a_query_of_huge_term_counts_ranks_within_bounded_scratch(tmp_path):
    """A one-channel index weighs a query term by its count, and the kernels' histogram has an entry per
    score a document can reach (sum of weights x 255): a query repeating a word 100,000 times made it 204 MB
    (a million times, 2 GB; past 16.8 million, scores overflowed the uint32 accumulators). Weights past
    ``MAX_QUERY_WEIGHT`` in all are scaled down to it, the unit up by as much: the same ranking here, scores
    within the rounding of one weight, and scratch that stays bounded."""
    from indexer.quantize import Quantizer
    from retriever.query import MAX_QUERY_WEIGHT

    idx = hand_index(tmp_path / "idx", HAND_ONE, 5, 5, Quantizer(0.5))
    s = Searcher(idx)
    query = "t2 " * 100_000 + "t3"
    plan = s.plan(s.parse(query))
    assert plan.weights.sum() <= MAX_QUERY_WEIGHT + plan.weights.size < 100_001  # exact weights: 100,000 and 1
    assert plan.weights.tolist() == [65_535, 1]  # 100,000 and 1 times 65,536 / 100,001, floored, each kept >= 1
    res = s.search(query, 10)
    impact = {(t, d): i for t, pairs in HAND_ONE.items() for d, i in pairs}
    want = {f"d{d}": 0.5 * (100_000 * impact.get((2, d), 0) + impact.get((3, d), 0)) for d in range(4)}
    assert [h.docid for h in res.hits] == ["d3", "d0", "d1", "d2"]
    assert [h.score for h in res.hits] == pytest.approx([want[h.docid] for h in res.hits], abs=255 * plan.unit)
    assert max(ws.hist.size for ws in s._free) <= (MAX_QUERY_WEIGHT + plan.weights.size) * 255 + 2 < 100_001 * 255
    assert s.search_many([query], 10)[0] == res
    assert s.document_score(query, "d3") == res.hits[0].score
    with pytest.raises(ValueError, match="would overflow the accumulators"):
        s.topk_arrays(np.array([2, 3]), np.array([1 << 25, 1]), 10)
    with pytest.raises(ValueError, match="would overflow the accumulators"):
        s.topk_batch([np.array([2])], [np.array([1 << 25])], 10)


def test_a_columns_repr_cuts_its_arrow_docids_as_it_cuts_lists(scifact_index):
    """TopKColumns' docids beyond 32 hits are an Arrow array, whose repr printed one docid a line."""
    top = Searcher(scifact_index).topk_columns(["cancer"], 1000)[0]
    assert not isinstance(top.docids, list) and len(top.docids) > 2 * SHOWN_IN_REPR
    more = f"... {len(top.docids) - SHOWN_IN_REPR:,} more"
    assert f"docids=<Arrow {top.docids.type}>[{', '.join(map(repr, top.docids[:SHOWN_IN_REPR].to_pylist()))}, {more}]" \
        in repr(top)
    assert "\n" not in repr(top) and len(repr(top)) < 1000


def test_close_releases_an_index_the_searcher_opened_and_only_that(scifact_index):
    """``with api.open_searcher(INDEX) as s:`` stopped the helper threads but kept the index mapped
    until the searcher was garbage-collected (a notebook's ``s`` never is); an Index the caller
    opened is the caller's to close."""
    with api.open_searcher(scifact_index) as searcher:
        assert searcher.search("cancer", 3).docids
    assert searcher.index.closed
    with pytest.raises(IndexClosedError, match="the index is closed"):
        searcher.search("cancer", 3)
    from_path = Searcher(scifact_index)
    from_path.close()
    assert from_path.index.closed
    with Index(scifact_index) as idx:
        theirs = Searcher(idx)
        theirs.close()
        assert not idx.closed and theirs.search("cancer", 3).docids


def test_search_many_refuses_a_dict_and_document_score_a_docid_that_is_no_string(scifact_index):
    """A dict of queries (what api.run takes) was iterated by its keys and searched qids as query
    text; a numeric docid met Arrow's ``ArrowTypeError`` deep in the lookup."""
    searcher = Searcher(scifact_index)
    with pytest.raises(QueryError, match=r"got a dict \(its keys would be searched as queries; pass list\(d.values\(\)\)"):
        searcher.search_many({"1": "cancer cells"})
    with pytest.raises(QueryError, match="docid must be a string"):
        searcher.document_score("cancer", 4983)


def test_a_searcher_pickles_as_how_to_open_it_again(scifact_index):
    """``multiprocessing`` pickles what it sends a worker: a Searcher raised TypeError (the stemmer); now it
    pickles as its index path and options, and the worker's copy searches as the original does."""
    import pickle

    s = Searcher(scifact_index, mode="anytime", budget=5_000, slack=0.9, channel_weights={"idf": 2.0}, resolution=64)
    with pickle.loads(pickle.dumps(s)) as copy:
        assert (copy.mode, copy.budget, copy.slack, copy.resolution, copy.engine) == ("anytime", 5_000, 0.9, 64, "numba")
        assert copy.channel_mult.tolist() == s.channel_mult.tolist() and copy.index is not s.index
        for q in ("white matter", "vitamin d deficiency cancer"):
            assert copy.search(q, 10) == s.search(q, 10)


def test_a_pickled_searcher_reopens_its_index_from_anywhere_and_says_why_it_cannot(scifact_index, tmp_path, monkeypatch):
    """A searcher opened by a relative path pickled that path: after ``os.chdir`` (a notebook's ``%cd``) its
    copies looked for the index elsewhere. An index deleted (or rebuilt with other channels) before a
    ``multiprocessing.Pool`` worker unpickled its task killed the worker while it read the task, and the pool
    waited for it forever; now the copy raises why when it is used, and the pool hands that error back. Real
    pools, spawned and forked: each worker's copy maps the index itself and finds what the original finds."""
    import multiprocessing
    import operator
    import pickle
    import shutil

    queries = ("white matter", "vitamin d deficiency cancer")
    monkeypatch.chdir(scifact_index.parent)
    s = Searcher(scifact_index.name, mode="anytime", budget=5_000, channel_weights={"idf": 2.0})
    expected = [s.search(q, 10) for q in queries]
    monkeypatch.chdir(tmp_path)
    for method in ("spawn", "fork"):
        with multiprocessing.get_context(method).Pool(2) as pool:
            found = pool.starmap_async(Searcher.search, [(s, q, 10) for q in queries]).get(timeout=120)
        assert found == expected, method
    s.close()
    gone = tmp_path / "gone"
    shutil.copytree(scifact_index, gone)
    with Searcher(gone) as s:
        pickled = pickle.dumps(s)
        shutil.rmtree(gone)
        with pickle.loads(pickled) as copy:  # no error until it is used
            with pytest.raises(IndexFormatError, match="gone: no such index directory$"):
                copy.search("white matter")
            assert pickle.loads(pickle.dumps(copy)) is not None
        with multiprocessing.get_context("fork").Pool(1) as pool:
            with pytest.raises(IndexFormatError, match="gone: no such index directory$"):
                pool.map_async(operator.methodcaller("search", "white matter"), [s]).get(timeout=120)


def test_a_plan_ranks_by_its_integers_only_where_single_precision_keeps_their_scores_apart():
    """``QueryPlan.held`` is a score as trec_eval holds it: the float32 of the score a hit reports (integer x unit
    + base); ``ties`` is None (rank by the integers) only where no two integer scores the plan can give are one
    float32 there. The first two plans' scores and the last's do meet as one (a large base, many weights, a unit
    below the base's float spacing), so they rank as held; the fifth's keep apart but within twice the spacing."""
    from retriever.query import QueryPlan

    plans = [QueryPlan(np.array([3]), np.array([w]), unit, base) for w, unit, base in
             ((1, 48.0, 1e9), (40_000, 16.0, 1000.0), (2, 0.5, 0.0), (3, 0.001, 5.0), (40_000, 2.0 ** -10, -3.0),
              (1, 2.0 ** -20, 1e3))]
    for plan in plans:
        vals = np.array([0, 1, 7, 255])
        assert plan.held(vals).tolist() == np.float32(vals * plan.unit + plan.base).tolist()
        top = int(plan.weights.sum()) * 255  # the top 2**20 scores, where a float's spacing is widest
        apart = bool((np.diff(plan.held(np.arange(max(0, top - (1 << 20)), top + 1))) > 0).all())
        assert plan.ties is None or plan.ties == plan.held
        assert apart or plan.ties is not None, plan
    assert [plan.ties is None for plan in plans] == [False, False, True, True, False, False]
