"""ckqti.api's own checks of its arguments: what the CLI's flag types refuse, Python callers get
as one CkqtiError, before any work (no OUT.partial left behind)."""

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from ckqti import api
from ckqti.errors import InputError, OptionError
from retriever.search import Searcher


@pytest.mark.parametrize("options, message", [
    ({"shard_size": 0}, "shard_size must be an integer >= 1, got 0"),
    ({"shard_size": 20.5}, "shard_size must be an integer >= 1, got 20.5"),
    ({"batch_size": 0}, "batch_size must be an integer >= 1, got 0"),
    ({"neighbours": -1}, "neighbours must be an integer >= 0, got -1"),
    ({"workers": 2}, "workers needs ray_address"),
])
def test_index_refuses_bad_counts_before_any_work(tmp_path, scifact_small, options, message):
    out = tmp_path / "idx"
    with pytest.raises(OptionError, match=message.replace("(", r"\(").replace(")", r"\)")):
        api.index(scifact_small, out, model="ndrm2", progress=False, **options)
    assert not out.exists() and not (tmp_path / "idx.partial").exists()


@pytest.mark.parametrize("options, documents, error, message", [
    ({"fmt": "jsonl"}, ["a cat"], OptionError, "fmt is for a corpus file; documents given in memory are indexed as they are"),
    ({"orcas": "o.tsv"}, ["a cat"], OptionError, "orcas is for a corpus file"),
    ({}, ["a cat", {"id": "x", "contents": "a dog"}, ("id", "text")], InputError,
     "documents[2]: expected a text, a dict (id and text fields, as in a JSONL corpus) or a Document, found tuple"),
    ({}, [{"doc_id": "x", "contents": "a dog"}], InputError, "documents[0]: missing document id"),
])
def test_documents_in_memory_are_checked_before_any_work(tmp_path, options, documents, error, message):
    out = tmp_path / "idx"
    with pytest.raises(error) as info:
        api.index(documents, out, model="ndrm2", progress=False, **options)
    assert str(info.value).startswith(message)
    assert list(tmp_path.iterdir()) == []


def test_numpy_counts_build_an_index_with_a_json_manifest(tmp_path, scifact_small):
    m = api.index(scifact_small, tmp_path / "idx", model="ndrm2", shard_size=np.int64(150), batch_size=np.int32(8),
                  progress=False)
    assert len(m.shards) > 1 and api.info(tmp_path / "idx").num_docs == m.num_docs


def test_append_and_compact_refuse_bad_counts(tmp_path, scifact_small):
    idx = tmp_path / "idx"
    api.index(scifact_small, idx, model="ndrm2", progress=False)
    with pytest.raises(OptionError, match="shard_size must be an integer >= 1, got 0"):
        api.compact(idx, 0)
    with pytest.raises(OptionError, match="batch_size must be an integer >= 1, got -2"):
        api.append(scifact_small, idx, batch_size=-2, progress=False)


@pytest.mark.parametrize("options, message", [
    ({"port": 70000}, "port must be in 0..65535, got 70000"),
    ({"port": 65536}, "port must be in 0..65535, got 65536"),  # the first port past the range
    ({"port": None}, "port must be an integer >= 0, got None"),
    ({"max_k": 0}, "max_k must be an integer >= 1, got 0"),
    ({"workers": 0}, "workers must be an integer >= 1, got 0"),
    ({"api_key": ""}, "api_key must be a non-empty string"),
    ({"api_key": " key"}, "api_key must be a non-empty string without surrounding whitespace"),
])
def test_serve_refuses_bad_settings_before_binding(scifact_index, options, message):
    def never(url):
        raise AssertionError(f"served at {url}")

    with pytest.raises(OptionError, match=message):
        api.serve(scifact_index, on_ready=never, **options)


def test_neighbours_are_refused_for_ndrm2(tmp_path, scifact_small):
    """NDRM2 stores each document's own terms: a neighbours setting would be recorded and do nothing."""
    with pytest.raises(OptionError, match="NDRM2 has no latent channel"):
        api.index(scifact_small, tmp_path / "idx", model="ndrm2", neighbours=8, progress=False)
    assert not (tmp_path / "idx.partial").exists()


def test_rerank_explain_evaluate_and_open_searcher_check_their_arguments(tmp_path, scifact_index):
    """Checked as the CLI's flags check them, before any work (a fractional depth used to be read as
    'no query has candidates', batch_size 0 failed deep inside after loading the model)."""
    q = tmp_path / "q.tsv"
    q.write_text("q1\tcancer\n")
    for options, name in (({"depth": 1.5}, "depth"), ({"depth": "5"}, "depth"), ({"batch_size": 0}, "batch_size"),
                          ({"max_doc_length": 0}, "max_doc_length")):
        with pytest.raises(OptionError, match=f"{name} must be an integer >= 1"):
            api.rerank(q, scifact_index, "ndrm2", tmp_path / "r.trec", **options)
    with pytest.raises(OptionError, match="unknown option\\(s\\) bogus"):
        api.explain("cancer", "x", "ndrm2", index_path=scifact_index, bogus=1)
    with pytest.raises(InputError, match="is a directory"):
        api.explain("cancer", "x", "ndrm2", index_path=scifact_index, html_out=tmp_path)
    for model in (None, "ndrm2"):  # neither source: said before the model (it was "model is needed with a corpus")
        with pytest.raises(OptionError, match="^give exactly one of corpus or index_path"):
            api.explain("cancer", "x", model)
    with pytest.raises(OptionError, match="^give exactly one of corpus or index_path"):  # both: which one to read?
        api.explain("cancer", "x", "ndrm2", corpus=q, index_path=scifact_index)
    for level in ("2", 2.5, 0):
        with pytest.raises(OptionError, match="rel_level must be an integer >= 1"):
            api.evaluate(tmp_path / "r.trec", tmp_path / "qrels", rel_level=level)
    with pytest.raises(OptionError, match="index_path must be a path, got NoneType"):
        api.open_searcher(None)
    assert not (tmp_path / "r.trec").exists()


def test_open_searcher_turns_the_searcher_s_refusals_into_query_errors(scifact_index):
    """A mode, slack or channel weight the Searcher refuses (its ValueError) reaches a Python caller as
    a QueryError, a CkqtiError the CLI says in one line, not as a bare ValueError."""
    from ckqti.errors import QueryError

    for options, message in (({"mode": "fast"}, "mode must be 'exact' or 'anytime', got 'fast'"),
                             ({"slack": 0.5}, "slack below 1 needs anytime mode"),
                             ({"channel_weights": {"one": 2.0}}, "channel weight 'one': the index's channels are")):
        with pytest.raises(QueryError, match=message):
            api.open_searcher(scifact_index, **options)


def test_a_numeric_docid_and_a_flag_that_is_not_a_bool_are_option_errors(scifact_index):
    """explain(q, 1686997) said only that the document is not in the index (docids are text); open_searcher and
    info took verify="no" as a yes (a truthy string)."""
    docid = Searcher(str(scifact_index)).index.shards[0].docid(3)
    assert docid.isdigit() and api.explain("cancer", docid, None, index_path=scifact_index).docid == docid
    with pytest.raises(OptionError, match=f"docid must be a string \\(docids are text, e.g. '{docid}'\\), got int"):
        api.explain("cancer", int(docid), None, index_path=scifact_index)
    for call in (lambda v: api.open_searcher(scifact_index, verify=v), lambda v: api.info(scifact_index, v)):
        with pytest.raises(OptionError, match="verify must be True or False, got 'no'"):
            call("no")
        call(False)


def test_run_stops_its_helper_threads(tmp_path, scifact_index):
    import threading

    q = tmp_path / "q.tsv"
    q.write_text("".join(f"q{i}\t{t}\n" for i, t in enumerate(["cancer cells", "brain imaging", "vitamin d"] * 10)))
    api.run(scifact_index, q, tmp_path / "r.trec", k=10, threads=4)
    assert not [t for t in threading.enumerate() if t.name.startswith("ckqti-search")]


def test_run_takes_queries_in_memory_and_writes_the_run_their_file_writes(tmp_path, scifact_index):
    """A dict ``qid -> text`` (as a bm25s or Pyserini user holds queries) was refused ("queries must be
    a path"); it now writes the same run as a queries file of the same queries."""
    queries = {"q1": "cancer cells", "7": "brain  imaging", "q3": "vitamin d"}
    (tmp_path / "q.tsv").write_text("".join(f"{q}\t{t}\n" for q, t in queries.items()))
    on_file = api.run(scifact_index, tmp_path / "q.tsv", tmp_path / "file.trec", k=20)
    in_memory = api.run(scifact_index, queries, tmp_path / "mem.trec", k=20)
    assert (tmp_path / "mem.trec").read_text() == (tmp_path / "file.trec").read_text() != ""
    assert in_memory.searched == on_file.searched == 3
    with pytest.raises(OptionError, match="fmt is for a queries file"):
        api.run(scifact_index, queries, tmp_path / "r.trec", fmt="tsv")
    with pytest.raises(InputError, match=r"^queries\['q2'\]: query 'q2' has no text$"):
        api.run(scifact_index, {"q1": "cancer", "q2": "  "}, tmp_path / "r.trec")
    assert not (tmp_path / "r.trec").exists()


def test_rerank_takes_queries_in_memory_as_run_does(tmp_path, scifact_index, monkeypatch):
    """api.rerank refused the dict ``qid -> text`` that api.run takes ("queries must be a path"); it now
    writes the run the same queries' file writes, and a bad dict is refused as run refuses it, before
    the model loads."""
    queries = {"q1": "cancer cells", "7": "brain  imaging", "q3": "vitamin d"}
    (tmp_path / "q.tsv").write_text("".join(f"{q}\t{t}\n" for q, t in queries.items()))
    on_file = api.rerank(tmp_path / "q.tsv", scifact_index, "ndrm2", tmp_path / "file.trec", depth=10)
    in_memory = api.rerank(queries, scifact_index, "ndrm2", tmp_path / "mem.trec", depth=10)
    assert (tmp_path / "mem.trec").read_text() == (tmp_path / "file.trec").read_text() != ""
    assert in_memory.reranked == on_file.reranked == 3
    import retriever.rerank

    monkeypatch.setattr(retriever.rerank, "open_reranker", None)  # a bad dict is refused before any model
    for bad, message in (({"q1": "cancer", "q2": "  "}, r"^queries\['q2'\]: query 'q2' has no text$"),
                         ({}, "^queries: no queries in the dict$")):
        with pytest.raises(InputError, match=message):
            api.run(scifact_index, bad, tmp_path / "r.trec")
        with pytest.raises(InputError, match=message):
            api.rerank(bad, scifact_index, "ndrm2", tmp_path / "r.trec")
    assert not (tmp_path / "r.trec").exists()


CLAIMS = {"q1": "Vitamin D deficiency is associated with tuberculosis.", 7: "ALDH1 expression and breast cancer",
          "q3": "Microstructural development of human newborn cerebral white matter"}


def first_stage(docids: list[str]) -> dict:
    """A first stage's scored candidates, ``{qid: {docid: score}}``, with ties where ``depth=10`` cuts: groups of
    4 equal scores (docid descending breaks them, as trec_eval), 5.0 against 5.0 + 1e-12 (equal in single
    precision, as trec_eval holds scores), and a query of no claim (ignored, as a run's other queries are)."""
    scored = {}
    for i, qid in enumerate([*CLAIMS, "other"]):
        docs = docids[40 * i: 40 * i + 30]
        scored[qid] = {d: float(-(j // 4)) for j, d in enumerate(docs)}
        scored[qid][docs[20]], scored[qid][docs[25]] = 5.0, 5.0 + 1e-12
    return scored


def test_rerank_takes_candidates_and_corpus_in_memory_and_writes_the_run_their_files_write(tmp_path, scifact_small):
    """A first stage's candidates had to be written as a run file and its corpus as a corpus file ("candidates
    must be a path"). A dict of them, ranked lists or scores, and the documents as api.index takes them or as a
    dict give the run the files give, byte for byte; out=None returns that run's rankings instead of writing it."""
    import json

    from indexer.readers import read_corpus
    from retriever.run_reader import read_run
    from retriever.run_writer import write_run
    from retriever.runs import trec_order

    lines = scifact_small.read_text().splitlines()
    dicts = [json.loads(line) for line in lines]
    scored = first_stage([d["_id"] for d in dicts])
    write_run(tmp_path / "first.trec", {str(q): docs for q, docs in scored.items()}, "first")
    api.rerank(CLAIMS, tmp_path / "first.trec", "ndrm2", tmp_path / "file.trec", depth=10, corpus=scifact_small)
    from_files = (tmp_path / "file.trec").read_bytes()
    assert len(from_files.splitlines()) == 30
    ranked = {q: [d for d, _ in trec_order(docs)] for q, docs in scored.items()}  # the file's order, as lists
    by_id = {d["_id"]: {"title": d["title"], "text": d["text"]} for d in dicts}
    for i, (candidates, corpus) in enumerate([(scored, dicts), (ranked, by_id), (scored, list(read_corpus(scifact_small)))]):
        stats = api.rerank(CLAIMS, candidates, "ndrm2", tmp_path / f"mem{i}.trec", depth=10, corpus=corpus)
        assert (tmp_path / f"mem{i}.trec").read_bytes() == from_files, i
        assert stats.candidates == "dict" and stats.reranked == 3 and stats.pairs == 30
    held = api.rerank(CLAIMS, scored, "ndrm2", None, depth=10, corpus=dicts)
    assert held.out is None and held.rankings == {q: list(docs.items()) for q, docs in read_run(tmp_path / "file.trec").items()}
    # {docid: text}: a TSV corpus of the same texts (on one line each)
    texts = {d["_id"]: " ".join(d["text"].split()) for d in dicts}
    (tmp_path / "c.tsv").write_text("".join(f"{docid}\t{text}\n" for docid, text in texts.items()))
    api.rerank(CLAIMS, ranked, "ndrm2", tmp_path / "tsv.trec", depth=10, corpus=tmp_path / "c.tsv")
    api.rerank(CLAIMS, ranked, "ndrm2", tmp_path / "texts.trec", depth=10, corpus=texts)
    assert (tmp_path / "texts.trec").read_bytes() == (tmp_path / "tsv.trec").read_bytes() != from_files


@pytest.mark.parametrize(("candidates", "corpus", "error", "message"), [
    (5, {"d1": "x"}, OptionError, "candidates must be 'bm25' or a path, got int (or candidates in memory: a dict "
                                  "qid -> [docid, ...] or qid -> {docid: score})"),
    ([["d1"]], {"d1": "x"}, OptionError, "candidates must be 'bm25' or a path, got list"),
    ({"q1": ["d1", "d2", "d1"]}, {"d1": "x"}, InputError, "candidates['q1']: query 'q1' retrieves doc 'd1' twice"),
    ({"q1": {"d1": 1.0, " d1": 2.0}}, {"d1": "x"}, InputError, "candidates['q1']: query 'q1' retrieves doc 'd1' twice"),
    ({"q1": ["d 1"]}, {"d1": "x"}, InputError, "candidates['q1']: docid 'd 1' contains whitespace"),
    ({"q1": ["d1", ""]}, {"d1": "x"}, InputError, "candidates['q1']: empty docid"),
    ({"q1": ["d1\ufeff"]}, {"d1": "x"}, InputError, r"candidates['q1']: docid 'd1\ufeff' contains the invisible character U+FEFF"),
    ({"q1": ["d1", 5.0]}, {"d1": "x"}, InputError, "candidates['q1']: a docid must be a string or an integer, found "
                                                   "float 5.0 (item 1)"),
    ({"q1": {"d1": 1.0, None: 0.5}}, {"d1": "x"}, InputError, "candidates['q1']: a docid must be a string or an "
                                                              "integer, found NoneType None (item 1)"),
    ({"q1": [("d1", 1.0)]}, {"d1": "x"}, InputError, "candidates['q1']: a docid must be a string or an integer, found "
                                                     "tuple ('d1', 1.0) (item 0; with scores, a query's candidates are "
                                                     "{docid: score})"),
    ({"q1": [7, "7"]}, {"7": "x"}, InputError, "candidates['q1']: query 'q1' retrieves doc '7' twice"),
    ({"q1": {"d1": float("nan")}}, {"d1": "x"}, InputError, "candidates['q1']: the score of doc 'd1' is not finite: nan"),
    ({"q1": {"d1": 1.0, "d2": float("inf")}}, {"d1": "x"}, InputError, "candidates['q1']: the score of doc 'd2' is not "
                                                                       "finite: inf"),
    ({"q1": {"d1": "1.5"}}, {"d1": "x"}, InputError, "candidates['q1']: the score of doc 'd1' is not a number: '1.5'"),
    ({"q1": {"d1": True}}, {"d1": "x"}, InputError, "candidates['q1']: the score of doc 'd1' is not a number: True"),
    ({"q1": {"d1": np.bool_(True)}}, {"d1": "x"}, InputError, "candidates['q1']: the score of doc 'd1' is not a number: "
                                                              "np.True_"),  # was taken as 1.0, where True is refused
    ({"q1": {"d1": 10 ** 400}}, {"d1": "x"}, InputError, "candidates['q1']: the score of doc 'd1' is not finite: "
                                                         "100000000000000000...0000000000000000000"),  # was an OverflowError
    ({"q1": {"d1"}}, {"d1": "x"}, InputError, "candidates['q1']: a query's candidates are [docid, ...] in rank order "
                                              "or {docid: score}, found set"),
    ({"q1": "d1"}, {"d1": "x"}, InputError, "candidates['q1']: a query's candidates are"),
    ({("q1",): ["d1"]}, {"d1": "x"}, InputError, "candidates[('q1',)]: a query id must be a string or an integer, "
                                                 "found tuple ('q1',)"),
    ({"q1": ["d1"], " q1": ["d1"]}, {"d1": "x"}, InputError, "candidates[' q1']: duplicate query id 'q1' "
                                                             "(first at candidates['q1'])"),
    ({"q1": ["d1"], "other": ["d 2"]}, {"d1": "x"}, InputError, "candidates['other']: docid 'd 2' contains whitespace"),
    ({"zz": ["d1"]}, {"d1": "x"}, InputError, "candidates: none of the 2 queries of queries is in this dict (query "
                                              "ids such as 'zz' here against 'q1' there): another query set?"),
    ({"q1": [], "q2": []}, {"d1": "x"}, InputError, "candidates: no query of queries has a candidate in this dict"),
    ({}, {"d1": "x"}, InputError, "candidates: the dict holds no query"),
    ({"q1": ["d1"]}, None, InputError, "candidates in memory need the corpus for their text"),
    ("bm25", {"d1": "x"}, OptionError, "BM25 candidates need a corpus file (Pyserini indexes a file)"),
    ({"q1": ["d1"]}, 5, OptionError, "corpus must be a path, got int (or documents in memory"),
    ({"q1": ["d1"]}, {"d1": None}, InputError, "corpus['d1']: a document is a text or a dict of its fields (title, "
                                               "text), found NoneType"),
    ({"q1": ["d1"]}, {"d1": {"id": "d2", "text": "x"}}, InputError, "corpus['d1']: its id field says 'd2'"),
    ({"q1": ["d1"]}, {"d 1": "x"}, InputError, "corpus['d 1']: docid 'd 1' contains whitespace"),
    ({"q1": ["d1"]}, ["x", {"text": "y"}], InputError, "documents[1]: missing document id"),
    ({"q1": ["d1"]}, {}, InputError, "corpus: no documents in the dict"),
])
def test_rerank_refuses_candidates_and_corpus_in_memory_it_cannot_read_before_the_model(
        tmp_path, monkeypatch, candidates, corpus, error, message):
    """Checked as a run file's lines and a corpus file's documents are, one line naming the entry, before any
    model loads; nothing written."""
    import retriever.rerank

    monkeypatch.setattr(retriever.rerank, "open_reranker", None)
    with pytest.raises(error) as caught:
        api.rerank({"q1": "cells", "q2": "brain"}, candidates, "ndrm2", tmp_path / "r.trec", corpus=corpus)
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)
    assert list(tmp_path.iterdir()) == []


def test_rerank_in_memory_reads_integer_ids_as_their_digits_as_the_corpus_and_queries_do(tmp_path):
    """A corpus {1: text} and queries {1: text} were taken (an integer id read as its digits, as a JSON line's),
    but candidates [1, 2] of them were refused ("a docid must be a string, found int"): integer docids, numpy's
    too, are now read as the corpus's keys are, and rank as the same docids given as strings."""
    queries = {1: "cells divide by mitosis", 2: "the brain holds neurons"}
    corpus = {1: "cells divide by mitosis in tissue", 2: "the brain holds many neurons", 3: "stars shine"}
    as_text = api.rerank({"1": queries[1], "2": queries[2]}, {"1": ["1", "2", "3"], "2": {"3": 1.0, "2": 0.5}},
                         "ndrm2", None, corpus={str(d): t for d, t in corpus.items()}).rankings
    for candidates in ({1: [1, 2, 3], 2: {3: 1.0, 2: 0.5}}, {1: [np.int64(1), 2, "3"], np.int64(2): {np.int32(3): 1.0, "2": 0.5}}):
        assert api.rerank(queries, candidates, "ndrm2", None, corpus=corpus).rankings == as_text
    assert [d for d, _ in as_text["1"]][0] == "1" and {d for d, _ in as_text["2"]} == {"2", "3"}


def test_rerank_in_memory_refuses_file_options_and_names_a_candidate_without_text(tmp_path, monkeypatch):
    import retriever.rerank

    queries, corpus = {"q1": "cells divide"}, {"d1": "cells divide", "d2": "brains"}
    with pytest.raises(InputError, match=r"^corpus: candidate document 'd9' of query 'q1' \(dict\) is not in the corpus$"):
        api.rerank(queries, {"q1": ["d1", "d9"]}, "ndrm2", tmp_path / "r.trec", corpus=corpus)
    monkeypatch.setattr(retriever.rerank, "open_reranker", None)
    for options, name in (({"fmt": "tsv"}, "fmt"), ({"orcas": tmp_path / "orcas.tsv"}, "orcas")):
        with pytest.raises(OptionError, match=f"^{name} is for a corpus file; documents given in memory are read as"):
            api.rerank(queries, {"q1": ["d1"]}, "ndrm2", tmp_path / "r.trec", corpus=corpus, **options)
    with pytest.raises(OptionError, match="^tag is for a run file; rankings returned in memory"):
        api.rerank(queries, {"q1": ["d1"]}, "ndrm2", None, corpus=corpus, tag="x")
    with pytest.raises(OptionError, match="^queries_format is for a queries file; a dict of queries is read as it is$"):
        api.rerank(queries, {"q1": ["d1"]}, "ndrm2", tmp_path / "r.trec", corpus=corpus, queries_format="tsv")
    assert list(tmp_path.iterdir()) == []


def test_an_unguarded_script_calling_bm25_gets_a_one_line_reason(tmp_path, scifact_small):
    """BM25 runs in a spawned process, which imports the calling script again: without a main guard
    the child dies while starting. The caller is told why, not shown a BrokenProcessPool."""
    import subprocess
    import sys

    (tmp_path / "q.tsv").write_text("q1\tcancer\n")
    script = tmp_path / "unguarded.py"
    script.write_text(
        "from ckqti import api\n"
        "from ckqti.errors import CkqtiError\n"
        "try:\n"
        f"    api.rerank({str(tmp_path / 'q.tsv')!r}, 'bm25', 'ndrm2', {str(tmp_path / 'r.trec')!r}, depth=5,\n"
        f"               corpus={str(scifact_small)!r})\n"
        "except CkqtiError as e:\n"
        "    print('ERROR', e)\n")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert 'ERROR' in done.stdout and 'if __name__ == "__main__":' in done.stdout


def test_run_searches_and_writes_a_chunk_of_queries_at_a_time(tmp_path, scifact_index, monkeypatch):
    """The run is written as it is searched (it used to be held whole: ~37 GB for 100,000 queries at
    k = 1,000); the file is the same whatever the chunk, stats included."""
    import retriever.batch_run as module
    import retriever.run_writer

    q = tmp_path / "q.tsv"
    q.write_text("".join(f"q{i}\t{t}\n" for i, t in enumerate(["cancer cells", "the of", "brain imaging", "zzqx",
                                                                "vitamin d", "cell growth"])))
    whole = api.run(scifact_index, q, tmp_path / "whole.trec", k=20)
    calls = []
    real = retriever.run_writer.write_ranked_run
    monkeypatch.setattr(retriever.run_writer, "write_ranked_run", lambda out, results, tag: (
        calls.append(type(results).__name__), real(out, results, tag)))
    monkeypatch.setattr(module, "RUN_CHUNK", 2)
    chunked = api.run(scifact_index, q, tmp_path / "chunked.trec", k=20)
    assert calls == ["generator"]
    assert (tmp_path / "chunked.trec").read_bytes() == (tmp_path / "whole.trec").read_bytes()
    assert (chunked.searched, chunked.skipped, chunked.documents, chunked.empty) == (
        whole.searched, whole.skipped, whole.documents, whole.empty)
    lines = (tmp_path / "whole.trec").read_text().splitlines()  # documents: the run's lines, over all queries
    assert whole.documents == len(lines) > 20 and len({line.split()[0] for line in lines}) == whole.searched - len(whole.empty)


def test_evaluate_reads_measures_from_any_iterable_once(tmp_path):
    """A generator of measure names was read up by the check, and the evaluation then said "no
    measure given"; names that are not strings failed with an AttributeError."""
    (tmp_path / "r.trec").write_text("q1 Q0 d1 1 2.0 t\nq1 Q0 d2 2 1.0 t\n")
    (tmp_path / "qrels").write_text("q1 0 d2 1\n")
    report = api.evaluate(tmp_path / "r.trec", tmp_path / "qrels", measures=(m for m in ["RR@10", "P@1"]))
    assert report.results[0].measures == ("RR@10", "P@1") and report.results[0].mean == {"RR@10": 0.5, "P@1": 0.0}
    for measures in (5, [5], "RR@10"):
        with pytest.raises(OptionError, match="measures must be a list of names"):
            api.evaluate(tmp_path / "r.trec", tmp_path / "qrels", measures=measures)


@pytest.mark.parametrize("call, name", [
    (lambda p: api.index(5, p / "out"), "corpus"),
    (lambda p: api.index(p / "c.tsv", None), "out"),
    (lambda p: api.append(None, p / "idx"), "corpus"),
    (lambda p: api.append(p / "c.tsv", 3), "index_path"),
    (lambda p: api.compact(None), "index_path"),
    (lambda p: api.info(3), "index_path"),
    (lambda p: api.run(p / "idx", None, p / "r.trec"), "queries"),
    (lambda p: api.run(p / "idx", p / "q.tsv", None), "out"),
    (lambda p: api.evaluate(None, p / "qrels"), "run_path"),
    (lambda p: api.evaluate(p / "r.trec", p / "qrels", compare=5), "compare"),
    (lambda p: api.evaluate(p / "r.trec", p / "qrels", compare=[p / "r2.trec", None]), "compare"),
    (lambda p: api.train("ndrm1", p / "c.tsv", p / "q.tsv", p / "qrels", None), "out"),
    (lambda p: api.rerank(p / "q.tsv", "bm25", "ndrm2", 5, corpus=p / "c.tsv"), "out"),  # None: rankings returned
    (lambda p: api.explain("cancer", "d1", None, index_path=5), "index_path"),
])
def test_a_path_argument_that_is_not_a_path_is_an_option_error(tmp_path, call, name):
    """None or a number where a path goes raised a bare TypeError from deep inside (open_searcher alone
    checked); now an OptionError naming the argument, before any work."""
    with pytest.raises(OptionError, match=f"^{name} must be a path, got "):
        call(tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_packages_are_marked_typed():
    """PEP 561: a type checker reads the annotations (``api.search`` -> ``SearchResult``, ...) of an
    installed package only if it holds ``py.typed``, which setuptools puts in the wheel."""
    from pathlib import Path

    import ckqti
    import indexer
    import retriever

    for package in (ckqti, indexer, retriever):
        assert (Path(package.__file__).parent / "py.typed").is_file(), package.__name__


def test_a_ray_build_asking_for_cuda_starts_on_a_driver_without_a_gpu(tmp_path, scifact_small, monkeypatch):
    """The driver's model only names the index's model and fits offsets (on its CPU, indexer.distributed.driver_device);
    the workers take the device. It was loaded on the device asked for: 'CUDA is not available here' before Ray started."""
    import torch

    import indexer.distributed

    seen = {}
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(indexer.distributed, "build_index_ray", lambda *args, **kwargs: seen.update(kwargs))
    api.index(scifact_small, tmp_path / "idx", model="ndrm2", ray_address="local", device="cuda", progress=False)
    assert seen["device"] == "cuda" and seen["address"] == "local"


BEFORE_TORCH = """
import sys
from ckqti import api
from ckqti.errors import CkqtiError

def said(call):
    try:
        call()
        print("no error")
    except CkqtiError as e:
        print(e, "torch" in sys.modules)  # each call's: none imported it before
"""


def said_before_torch(calls: str, *args) -> list[str]:
    """Run the script ``calls`` in a fresh process: a line for each API call it hands to ``said``, its
    error and whether torch had been imported by then."""
    res = subprocess.run([sys.executable, "-c", BEFORE_TORCH + calls, *map(str, args)],
                         cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    return res.stdout.splitlines()


ANSI_INPUTS = """
bad, good, qrels, out = sys.argv[1:]
for call in (lambda: api.rerank(bad, "bm25", "ndrm2", out, corpus=good),
             lambda: api.rerank(good, "bm25", "ndrm2", out, corpus=bad),
             lambda: api.explain("cells", "d50", "ndrm2", corpus=bad),
             lambda: api.train("ndrm3", bad, good, qrels, out),
             lambda: api.train("tk", good, bad, qrels, out),
             lambda: api.rerank(good, bad, "ndrm2", out, corpus=good),  # a run file of candidates
             lambda: api.train("tk", good, good, bad, out),
             lambda: api.train("ndrm3", good, good, qrels, out, dev_qrels=bad)):
    said(call)
"""


def test_rerank_train_and_explain_name_an_input_in_another_encoding_before_torch(tmp_path):
    """A CP-1252 corpus, queries, qrels or candidate run file (a Windows editor's "ANSI") was named, file
    and line, only after torch had been imported and the model loaded (3 to 7 s); their first bytes are
    read first now, as index and append read a corpus's (indexer.paths.check_input_files)."""
    lines = [f"d{i}\tcells {'café' if i == 40 else 'divide'}\n" for i in range(60)]
    bad, good, qrels = tmp_path / "ansi.tsv", tmp_path / "utf8.tsv", tmp_path / "qrels.txt"
    bad.write_bytes("".join(lines).encode("cp1252"))
    good.write_text("".join(lines).replace("café", "cafe"))
    qrels.write_text("".join(f"d{i} 0 d{i} 1\n" for i in range(60)))
    said = said_before_torch(ANSI_INPUTS, bad, good, qrels, tmp_path / "out")
    assert said == [f"{bad}:41: invalid UTF-8 (byte 13 of the line) False"] * 8, said


UNREADABLE_CORPORA = """
out = sys.argv[1]
for corpus in sys.argv[2:]:
    for call in (lambda: api.index(corpus, out, "ndrm2"), lambda: api.append(corpus, out + "-none")):
        said(call)
"""


def test_index_and_append_refuse_an_empty_corpus_or_one_of_no_known_format_before_torch(tmp_path):
    """An empty or blank corpus, or one whose format neither its extension nor its first line tells,
    was refused only after torch's import and the model load (3 s); its first lines are read first now,
    with the reader's own words."""
    empty, blank, notes = tmp_path / "empty.tsv", tmp_path / "blank.jsonl", tmp_path / "notes"
    empty.write_text("")
    blank.write_text("\n  \n")
    notes.write_text("\nsome words\nand more\n")
    assert said_before_torch(UNREADABLE_CORPORA, tmp_path / "idx", empty, blank, notes) == [f"{empty}: no documents in corpus False"] * 2 + [
        f"{blank}: no documents in corpus False"] * 2 + [
        f"{notes}:2: cannot tell the corpus format from this line: pass a format (tsv, jsonl, trec, smart) False"] * 2


RERANK_MISTAKES = """
queries, corpus, run, index, out = sys.argv[1:]
for call in (lambda: api.rerank(queries, "bm25", "nope", out, corpus=corpus),  # no such model
             lambda: api.rerank(queries, "bm25", index, out, corpus=corpus),  # an index given as the model
             lambda: api.rerank(queries, "bm25", "ndrm3-scifact", out),  # BM25 candidates without a corpus
             lambda: api.rerank(queries, run, "ndrm3-scifact", out),  # a run's candidates without their text
             lambda: api.rerank(queries, "bm25", "ndrm2", out, corpus=corpus, depth=0),
             lambda: api.rerank(queries, out + "-none", "ndrm2", out, corpus=corpus)):
    said(call)
"""


def test_rerank_names_a_missing_model_or_corpus_before_torch(tmp_path):
    """A model not there, an index given as the model, or BM25 or run candidates without the corpus that holds
    their text were said only after torch's import (1.4 s of a 1.5 s command); none of them needs it."""
    queries, corpus, run, index = tmp_path / "q.tsv", tmp_path / "c.tsv", tmp_path / "r.trec", tmp_path / "idx"
    queries.write_text("1\tcells\n")
    corpus.write_text("d1\tcells divide\n")
    run.write_text("1 Q0 d1 1 2.5 x\n")
    index.mkdir()
    said = said_before_torch(RERANK_MISTAKES, queries, corpus, run, index, tmp_path / "out")
    specs = "'ndrm2', 'ndrm2-anserini', 'ndrm3-scifact' (the bundled model) or a checkpoint written by 'ckqti train'"
    assert said == [f"nope: model not found: neither a file nor one of {specs} False",
                    f"{index}: is a directory; a model is {specs} False",
                    "BM25 candidates need the corpus (--corpus) False",
                    f"{run}: candidates from a run file need the corpus for their text (--corpus) False",
                    "depth must be an integer >= 1, got 0 False",
                    f"{tmp_path / 'out'}-none: candidates must be 'bm25', an index directory or a TREC run file False"], said


def test_evaluate_takes_runs_and_qrels_in_memory_as_their_files_give_them(tmp_path, scifact_index, data_dir):
    """A notebook holding its runs as dicts (as bm25s and Pyserini users do) had to write them to files, or
    put ckqti.evaluate's EvalReport and compare_results together by hand: api.evaluate read files only."""
    from indexer.readers import read_qrels, read_queries
    from retriever.run_writer import write_run

    sf = data_dir / "scifact"
    qrels, queries = read_qrels(sf / "qrels" / "test.tsv"), read_queries(sf / "queries.jsonl")
    qids = [q for q in queries if q in qrels][:60] + [q for q in queries if q not in qrels][:5]
    with api.open_searcher(scifact_index) as searcher:
        found = searcher.search_many([queries[q] for q in qids], k=100)
    deep = {q: dict(zip(r.docids, r.scores)) for q, r in zip(qids, found)}
    top = {q: list(zip(r.docids[:5], r.scores[:5])) for q, r in zip(qids, found)}  # pairs, as write_run takes too
    write_run(tmp_path / "deep.trec", deep, "t")
    write_run(tmp_path / "top.trec", top, "t")
    files = api.evaluate(tmp_path / "deep.trec", sf / "qrels" / "test.tsv", compare=tmp_path / "top.trec")
    memory = api.evaluate(deep, qrels, compare=top)
    assert memory.names == ("run", "run 2") and memory.results == files.results
    assert memory.comparisons == files.comparisons and 0 < memory.results[0].mean["nDCG@10"] < 1
    assert memory.results[0].unjudged == tuple(qids[-5:])
    mixed = api.evaluate(tmp_path / "deep.trec", qrels, compare=[top, tmp_path / "top.trec"], per_query=True)
    assert mixed.names == ("deep.trec", "run 2", "top.trec") and mixed.results[1] == replace(files.results[1], per_query=True)
    with pytest.raises(InputError, match="^run 2: is given twice: a run compared with itself$"):
        api.evaluate(deep, qrels, compare=[deep])
    with pytest.raises(OptionError, match="^qrels_format is for a qrels file"):
        api.evaluate(deep, qrels, qrels_format="trec")
    with pytest.raises(InputError, match=r"^run\['1'\]: a ranking is \{docid: score\}"):
        api.evaluate({"1": ["31715818"]}, qrels)
    with pytest.raises(InputError, match=r"^run\['1'\]: a ranking is \{docid: score\} .*found ndarray$"):
        api.evaluate({"1": np.array(["31715818", "1"])}, qrels)  # was numpy's "truth value ... is ambiguous"


def test_index_and_append_take_a_dict_of_documents_keyed_by_docid(tmp_path):
    """``{docid: text}`` and BEIR's ``{docid: {"title", "text"}}`` build what a list of the same dicts builds
    (rerank took them; index and append said "expected a list of documents, got one dict")."""
    from indexer.format import Manifest

    docs = {"d1": {"title": "Cells", "text": "cells divide and grow"}, "d2": {"title": "", "text": "proteins fold"},
            "d3": {"title": "Genes", "text": "genes express proteins in cells"}}
    as_list = [{"_id": d, **fields} for d, fields in docs.items()]
    api.index(as_list[:2], tmp_path / "a", model="ndrm2", progress=False)
    api.append(as_list[2:], tmp_path / "a", progress=False)
    api.index(dict(list(docs.items())[:2]), tmp_path / "b", model="ndrm2", progress=False)
    api.append({"d3": docs["d3"]}, tmp_path / "b", progress=False)
    a, b = Manifest.read(tmp_path / "a"), Manifest.read(tmp_path / "b")
    assert [s.files for s in a.shards] == [s.files for s in b.shards] and a.num_docs == 3
    api.index({"x1": "plain text one", "x2": "plain text two", "x3": "other words"}, tmp_path / "c", model="ndrm2",
              progress=False)
    assert [h.docid for h in api.search("two", tmp_path / "c", k=3).hits] == ["x2"]
    with pytest.raises(InputError, match=r"a docid must be a string or an integer, found tuple \(3,\)"):
        api.index({(3,): "x"}, tmp_path / "d", model="ndrm2", progress=False)
    assert not (tmp_path / "d").exists()
    # a key the index holds is named as the dict's entry, as index names one (it said documents[1], and of an
    # int key that matched a text's number, that a text's docid is its position)
    api.index({1: "cells divide", 2: "proteins fold"}, tmp_path / "e", model="ndrm2", progress=False)
    for docs, where in (({"x": "new", "2": "again"}, "corpus['2']"), ({2: "again"}, "corpus[2]")):
        with pytest.raises(InputError) as err:
            api.append(docs, tmp_path / "e", progress=False)
        assert str(err.value) == f"{where}: docid '2' is already in the index {tmp_path / 'e'}"
    assert Manifest.read(tmp_path / "e").num_docs == 2
