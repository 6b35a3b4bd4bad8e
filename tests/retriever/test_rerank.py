"""Reranking: the run holds exactly each query's candidates, in the model's score order, for every source.

Data: the first 600 SciFact abstracts (``scifact_small``), their NDRM2 index (``scifact_index``) and
SciFact test claims. The model is a tiny match-initialised TK (exact matching of query terms
within its 200-term cap), so its order differs from the index's NDRM2 order.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import torch

from ckqti.errors import CkqtiError, InputError
from ckqti.models.inputs import TermText
from ckqti.models.reranker import Reranker, build_model, load_reranker, save_reranker
from ckqti.text import Analyzer
from ckqti.train.reranker_tk import match_init
from ckqti.vocab import Vocabulary
from retriever.candidate_text import corpus_texts
from retriever.rerank import rerank
from retriever.rerank_model import open_reranker
from retriever.run_reader import read_run
from retriever.run_writer import write_run
from retriever.runs import trec_order
from retriever.search import Searcher

QUERIES = ["Vitamin D deficiency is associated with tuberculosis.",
           "Microstructural development of human newborn cerebral white matter",
           "ALDH1 expression is associated with poorer prognosis for breast cancer",
           "the and of"]  # only stopwords: no candidates from the index


@pytest.fixture(scope="module")
def tk_model(scifact_small, tmp_path_factory) -> Path:
    analyzer = Analyzer()
    docs = [json.loads(line) for line in scifact_small.read_text().splitlines()]
    vocab = Vocabulary.build([analyzer(d["title"] + "\n" + d["text"]) for d in docs])
    torch.manual_seed(0)
    model = build_model("tk", dict(vocab_size=len(vocab), embedding_dim=16, num_heads=2, ff_dim=16, num_layers=1))
    match_init(model)
    return save_reranker(tmp_path_factory.mktemp("tk") / "tk.pt", model, "tk", TermText(analyzer, vocab)).path


@pytest.fixture
def queries(tmp_path) -> Path:
    path = tmp_path / "queries.tsv"
    path.write_text("".join(f"q{i}\t{t}\n" for i, t in enumerate(QUERIES)))
    return path


def check_reranked(run: dict, candidates: dict, model: Path, texts: dict) -> None:
    """Each query's run is a permutation of its candidates, sorted by the model's own scores."""
    rr = load_reranker(model, device="cpu")
    qtext = dict(f"q{i}\t{t}".split("\t") for i, t in enumerate(QUERIES))
    assert set(run) == {q for q, c in candidates.items() if c}
    for qid, docs in run.items():
        assert sorted(docs) == sorted(candidates[qid])
        expected = dict(zip(candidates[qid], rr.score(qtext[qid], [texts[d] for d in candidates[qid]]).tolist()))
        for d, s in docs.items():
            assert s == pytest.approx(expected[d], rel=1e-5, abs=1e-6)
        in_run_order = [expected[d] for d, _ in trec_order(docs)]
        assert all(a >= b - 1e-6 for a, b in zip(in_run_order, in_run_order[1:]))


def test_rerank_index_candidates_with_stored_text(scifact_index, scifact_small, tk_model, queries, tmp_path):
    out = tmp_path / "run.trec"
    stats = rerank(queries, scifact_index, tk_model, out, depth=20)
    searcher = Searcher(str(scifact_index))
    candidates = {f"q{i}": [h.docid for h in searcher.search(t, 20).hits] for i, t in enumerate(QUERIES[:3])}
    run = read_run(out)
    check_reranked(run, candidates, tk_model, corpus_texts(scifact_small))
    assert stats.skipped == ("q3",) and stats.reranked == 3 and stats.pairs == 60 and stats.kind == "tk"
    assert "no searchable terms" in stats.reasons["q3"]  # search's own reason, not a guess
    assert any(list(dict(trec_order(run[q]))) != candidates[q] for q in run)  # the model reordered something
    lines = out.read_text().splitlines()
    assert lines[0].split()[-1] == "ckqti-tk" and lines[0].split()[3] == "1"


def test_a_query_the_index_retrieves_nothing_for_is_skipped_with_the_reason_run_gives(scifact_index, tk_model,
                                                                                       tmp_path):
    """A query whose words the index does not hold got "no candidates from index:..." where
    ``ckqti run`` on the same index says why: its words are not in the index vocabulary, or (NDRM2's
    idf is 0 for "cell", in half of the 600 documents) none scores above 0."""
    from ckqti import api

    queries = tmp_path / "q.tsv"
    queries.write_text("ok\tvitamin deficiency\noov\tzzzqqq xxyyzz\ncommon\tcell\n")
    started = time.perf_counter()
    stats = rerank(queries, scifact_index, tk_model, tmp_path / "rr.trec", depth=5)
    assert 0 < stats.seconds <= time.perf_counter() - started  # scoring's seconds, within the call's
    searched = api.run(scifact_index, queries, tmp_path / "run.trec", k=5)
    assert stats.skipped == ("oov", "common") and searched.empty == {
        "oov": "not in the index vocabulary: zzzqqq xxyyzz", "common": "no document scores above 0 for cell"}
    assert stats.reasons == searched.empty
    queries.write_text("stop\tthe of\nok\tvitamin deficiency\n")  # a query search refuses, then one it takes
    stats = rerank(queries, scifact_index, tk_model, tmp_path / "rr.trec", depth=5)
    assert stats.skipped == ("stop",) and "no searchable terms" in stats.reasons["stop"]
    assert set(read_run(tmp_path / "rr.trec")) == {"ok"} and stats.pairs == 5


def test_untrained_ndrm2_reranks_an_index_of_its_own_as_the_index_scores(scifact_index, scifact_small, queries,
                                                                          tmp_path):
    """rerank --model ndrm2 reads the collection's statistics (the index's, or the corpus's): over
    the candidates of an NDRM2 index its scores are the index's, up to quantization."""
    stats = rerank(queries, scifact_index, "ndrm2", tmp_path / "run.trec", depth=10)
    assert stats.model_id == "ndrm2-untrained" and stats.reranked == 3
    searcher = Searcher(str(scifact_index))
    run = read_run(tmp_path / "run.trec")
    for i, text in enumerate(QUERIES[:3]):
        indexed = {h.docid: h.score for h in searcher.search(text, 10).hits}
        assert set(run[f"q{i}"]) == set(indexed)
        for docid, score in run[f"q{i}"].items():
            assert score == pytest.approx(indexed[docid], rel=0.01, abs=0.01)
    from_corpus = rerank(queries, scifact_index, "ndrm2", tmp_path / "c.trec", depth=10, corpus=scifact_small)
    assert from_corpus.reranked == 3
    with pytest.raises(InputError, match=r"need the corpus \(--corpus\)"):  # and an untrained model its statistics
        rerank(queries, "bm25", "ndrm2", tmp_path / "b.trec")


def test_an_ndrm_rerank_reads_every_term_of_a_long_query_as_the_index_does(scifact_index, scifact_small, tmp_path):
    """Under QTI a query's score is the sum of its terms': search sums every term, so rerank does too
    (the model's 20-term cap is for training queries; it dropped the rest of a longer query)."""
    doc = json.loads(scifact_small.read_text().splitlines()[7])
    words = list(dict.fromkeys(Analyzer()(doc["text"])))[:30]
    assert len(words) == 30
    (tmp_path / "q.tsv").write_text("long\t" + " ".join(words) + "\n")
    rerank(tmp_path / "q.tsv", scifact_index, "ndrm2", tmp_path / "run.trec", depth=10)
    indexed = {h.docid: h.score for h in Searcher(str(scifact_index)).search(" ".join(words), 10).hits}
    run = read_run(tmp_path / "run.trec")["long"]
    assert run.keys() == indexed.keys()
    for docid, score in run.items():
        assert score == pytest.approx(indexed[docid], rel=0.01, abs=0.01)


def test_rerank_run_file_candidates_with_corpus_text(scifact_small, tk_model, queries, tmp_path):
    docids = [json.loads(line)["_id"] for line in scifact_small.read_text().splitlines()]
    first = {"q0": {d: float(-i) for i, d in enumerate(docids[:30])}, "q1": {d: 1.0 for d in docids[100:112]}}
    write_run(tmp_path / "first.trec", first, "first")
    out = tmp_path / "run.trec"
    stats = rerank(queries, tmp_path / "first.trec", tk_model, out, depth=25, corpus=scifact_small)
    candidates = {"q0": docids[:25], "q1": [d for d, _ in trec_order(first["q1"])]}  # depth cuts in trec order
    check_reranked(read_run(out), candidates, tk_model, corpus_texts(scifact_small))
    assert stats.reranked == 2 and stats.candidates.startswith("run:")


def test_rerank_input_errors(scifact_small, tk_model, queries, tmp_path):
    with pytest.raises(InputError):
        rerank(queries, "bm25", tk_model, tmp_path / "r.trec")  # BM25 needs the corpus
    write_run(tmp_path / "first.trec", {"q0": {"not-in-corpus": 1.0}}, "x")
    with pytest.raises(InputError):
        rerank(queries, tmp_path / "first.trec", tk_model, tmp_path / "r.trec")  # run file needs the corpus
    with pytest.raises(InputError, match=f"{scifact_small}: candidate document 'not-in-corpus' of query 'q0'"):
        rerank(queries, tmp_path / "first.trec", tk_model, tmp_path / "r.trec", corpus=scifact_small)  # unknown docid
    with pytest.raises(InputError, match="is a directory"):
        rerank(queries, "bm25", tk_model, tmp_path, corpus=scifact_small)
    with pytest.raises(CkqtiError, match="TK's 200-token document cap"):
        rerank(queries, "bm25", tk_model, tmp_path / "r.trec", corpus=scifact_small, max_doc_length=50)
    with pytest.raises(InputError):
        rerank(queries, tmp_path / "missing", tk_model, tmp_path / "r.trec", corpus=scifact_small)
    with pytest.raises(InputError):
        rerank(queries, "bm25", tk_model, tmp_path / "r.trec", depth=0, corpus=scifact_small)
    with pytest.raises(InputError, match=f"^{tmp_path}: is a directory, expected a corpus file"):
        rerank(queries, "bm25", tk_model, tmp_path / "r.trec", corpus=tmp_path)  # not read as an index's statistics


def test_cli_rerank_of_a_run_naming_a_document_not_in_the_corpus_is_one_line(scifact_small, tk_model, queries,
                                                                              tmp_path):
    """``ckqti rerank --candidates RUN`` whose run names a docid the corpus lacks: one line naming the corpus, the
    docid, its query and the run, exit 1, no traceback, and no run written."""
    from click.testing import CliRunner

    from ckqti.cli import cli

    docid = json.loads(scifact_small.read_text().splitlines()[0])["_id"]
    write_run(tmp_path / "first.trec", {"q0": {docid: 2.0}, "q1": {docid: 2.0, "not-in-corpus": 1.0}}, "first")
    res = CliRunner().invoke(cli, [str(a) for a in ("rerank", "--queries", queries, "--candidates", tmp_path / "first.trec",
                                                    "--corpus", scifact_small, "--model", tk_model, "--out",
                                                    tmp_path / "r.trec")])
    assert res.exit_code == 1 and isinstance(res.exception, SystemExit), res.output
    assert res.output.splitlines() == [f"Error: {scifact_small}: candidate document 'not-in-corpus' of query 'q1' "
                                       f"(run:{tmp_path / 'first.trec'}) is not in the corpus"]
    assert not (tmp_path / "r.trec").exists()


def test_rerank_candidates_refuses_a_candidate_without_text(scifact_small, tk_model):
    """:func:`retriever.rerank_scoring.rerank_candidates` (the scripts' teacher scores call it with their own texts)
    refuses a candidate ``texts`` lacks, before any scoring, naming it."""
    from retriever import rerank_scoring

    texts = corpus_texts(scifact_small)
    docid = next(iter(texts))
    reranker = load_reranker(tk_model, device="cpu")
    with pytest.raises(InputError, match=r"^candidate document 'gone' is not in the corpus$"):
        rerank_scoring.rerank_candidates(reranker, {"q": "vitamin d", "r": "cells"}, {"q": [docid], "r": [docid, "gone"]},
                                         texts)


def test_an_untrained_model_without_a_collection_says_what_to_give(scifact_small):
    """``open_reranker("ndrm2")`` with no ``adapt_to`` (the Python API; every command gives one) asked for
    "the corpus (--corpus)", a flag the caller does not have: it names ``adapt_to``."""
    for model in ("ndrm2", "ndrm2-anserini"):
        with pytest.raises(InputError, match=r"^an untrained model \('ndrm2', 'ndrm2-anserini'\) reads the collection's "
                                             r"statistics: give adapt_to, a corpus or an index$"):
            open_reranker(model, "cpu")
    assert open_reranker("ndrm2", "cpu", None, scifact_small).model_id == "ndrm2-untrained"


def test_a_bm25_work_folder_that_is_a_file_is_said_before_the_model_loads(scifact_small, tk_model, queries, tmp_path,
                                                                           monkeypatch):
    """BM25 keeps its Lucene index in OUT.work (or work_dir): a file there failed after the model had loaded and
    the corpus had been read, as "OUT.work: File exists", naming neither BM25 nor the folder it wanted."""
    import retriever.rerank as module

    monkeypatch.setattr(module, "open_reranker", lambda *a, **k: pytest.fail("the model loaded"))
    (tmp_path / "r.trec.work").write_text("not a folder")
    with pytest.raises(InputError, match=f"^{tmp_path / 'r.trec.work' / 'bm25'}: cannot write BM25's Lucene index: "
                                         f"{tmp_path / 'r.trec.work'} is a file, not a directory"):
        rerank(queries, "bm25", tk_model, tmp_path / "r.trec", corpus=scifact_small)
    (tmp_path / "work").write_text("")
    with pytest.raises(InputError, match="work is a file, not a directory"):
        rerank(queries, "bm25", tk_model, tmp_path / "r.trec", corpus=scifact_small, work_dir=tmp_path / "work")


def test_a_bad_queries_file_or_candidates_run_is_said_before_the_model_loads(scifact_small, tk_model, tmp_path,
                                                                            monkeypatch):
    """Queries and a candidates run were read after the model had loaded, and with --adapt-vocabulary after the
    whole corpus had been read for its vocabulary (minutes on a large one): a query without text, or a run's bad
    line, is a one-line error before either."""
    import retriever.rerank as module

    monkeypatch.setattr(module, "open_reranker", lambda *a, **k: pytest.fail("the model loaded"))
    docid = json.loads(scifact_small.read_text().splitlines()[0])["_id"]
    good, bad = tmp_path / "good.tsv", tmp_path / "bad.tsv"
    good.write_text("q0\tvitamin d\n")
    bad.write_text("q0\tvitamin d\nq1\t \n")
    run, broken = tmp_path / "first.trec", tmp_path / "broken.trec"
    write_run(run, {"q0": {docid: 1.0}}, "first")
    broken.write_text(f"q0 Q0 {docid} one 1.0 first\n")
    for candidates, queries, error in ((run, bad, f"^{bad}:2: query 'q1' has no text"),
                                       (broken, good, f"^{broken}:1: bad rank 'one'")):
        for adapt in (False, True):
            with pytest.raises(InputError, match=error):
                rerank(queries, candidates, tk_model, tmp_path / "r.trec", corpus=scifact_small, adapt_vocabulary=adapt)


def test_rerank_never_writes_over_its_candidates_run(scifact_small, tk_model, queries, tmp_path):
    """--out given the --candidates run: the run was read, reranked and written over it."""
    docids = [json.loads(line)["_id"] for line in scifact_small.read_text().splitlines()]
    first = tmp_path / "first.trec"
    write_run(first, {"q0": {d: float(-i) for i, d in enumerate(docids[:5])}}, "first")
    before = first.read_bytes()
    with pytest.raises(InputError, match=f"^{first}: is also the candidates run this command reads"):
        rerank(queries, first, tk_model, first, corpus=scifact_small)
    assert first.read_bytes() == before and not (tmp_path / "first.trec.work").exists()


@pytest.mark.slow
def test_rerank_bm25_candidates(scifact_small, tk_model, queries, tmp_path):
    """Pyserini BM25 (Java, in a child process) gives the candidates; the run reorders exactly them."""
    from ckqti.bm25 import bm25_candidates
    from indexer.readers import read_queries

    out = tmp_path / "run.trec"
    rerank(queries, "bm25", tk_model, out, depth=15, corpus=scifact_small, work_dir=tmp_path / "work")
    candidates = bm25_candidates(scifact_small, read_queries(queries), tmp_path / "work", 15)
    check_reranked(read_run(out), candidates, tk_model, corpus_texts(scifact_small))


def test_cli_rerank_writes_what_the_api_writes(scifact_index, tk_model, queries, tmp_path):
    from click.testing import CliRunner

    from ckqti.cli import cli

    rerank(queries, scifact_index, tk_model, tmp_path / "api.trec", depth=10)
    res = CliRunner().invoke(cli, ["rerank", "--queries", str(queries), "--candidates", str(scifact_index),
                                   "--model", str(tk_model), "--out", str(tmp_path / "cli.trec"), "--depth", "10"])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "cli.trec").read_text() == (tmp_path / "api.trec").read_text()
    assert "note: 1 query skipped (q3: query 'the and of' has no searchable terms" in res.stderr
    assert "3 of 4 queries, 30 documents reranked by tk-" in res.output
    bad = CliRunner().invoke(cli, ["rerank", "--queries", str(queries), "--candidates", "bm25", "--model",
                                   str(tk_model), "--out", str(tmp_path / "x.trec")])
    assert bad.exit_code != 0 and "corpus" in bad.output and "Traceback" not in bad.output


def test_rerank_skips_queries_the_model_cannot_read_and_refuses_a_run_of_other_queries(scifact_small, tk_model,
                                                                                         tmp_path):
    """A query of only stopwords scored every candidate 0 and wrote them in docid order; a run file
    of another query set wrote an empty run with exit 0."""
    docids = [json.loads(line)["_id"] for line in scifact_small.read_text().splitlines()]
    queries = tmp_path / "q.tsv"
    queries.write_text("a1\tthe of and\na2\tcell growth\n")
    write_run(tmp_path / "first.trec", {"a1": {d: float(-i) for i, d in enumerate(docids[:5])},
                                        "a2": {d: float(-i) for i, d in enumerate(docids[:5])}}, "first")
    stats = rerank(queries, tmp_path / "first.trec", tk_model, tmp_path / "r.trec", corpus=scifact_small)
    assert stats.skipped == ("a1",) and set(read_run(tmp_path / "r.trec")) == {"a2"}
    assert stats.reasons == {"a1": "no term the model reads"}
    write_run(tmp_path / "other.trec", {"Qa1": {docids[0]: 1.0}}, "other")
    # the run named once, both sides' query ids (it said 'no query has candidates from run:PATH (query ids
    # such as 'a1': another query set?)': an internal label, and the queries' ids alone)
    with pytest.raises(InputError, match=r"^\S*other\.trec: none of the 2 queries of \S*q\.tsv is in this run "
                                         r"\(query ids such as 'Qa1' here against 'a1' there\): another query set\?$"):
        rerank(queries, tmp_path / "other.trec", tk_model, tmp_path / "r2.trec", corpus=scifact_small)


def test_an_index_that_retrieves_nothing_says_why(scifact_index, tk_model, tmp_path):
    """Index candidates for no query said 'no query has candidates from index:PATH (query ids such as
    'a1': another query set?)', but an index reads no query ids: it now gives the first query's reason."""
    queries = tmp_path / "q.tsv"
    queries.write_text("a1\tthe of and\na2\tzzzqqq\n")
    with pytest.raises(InputError, match=r"^\S*scifact: no query retrieves a document from this index \('a1': "
                                         r"query 'the of and' has no searchable terms"):
        rerank(queries, scifact_index, tk_model, tmp_path / "r.trec")


def test_bm25_candidates_for_no_query_name_the_first_query_and_the_queries_file():
    from retriever.candidates import no_candidates_error

    e = no_candidates_error("bm25", {"a1": "the of", "a2": "zzzqqq"}, "q.tsv", {})
    assert str(e) == "q.tsv: no query retrieves a document by BM25 from the corpus (such as 'a1')"


def test_adapting_to_the_candidate_index_needs_no_corpus(scifact_index, scifact_small, tk_model, queries, tmp_path):
    """--adapt-vocabulary reads the candidate index's vocabulary when no corpus is given (it asked for
    one, whose text then replaced the index's: ORCAS clicks lost), as with the corpus of the same text."""
    rerank(queries, scifact_index, tk_model, tmp_path / "a.trec", depth=10, adapt_vocabulary=True)
    rerank(queries, scifact_index, tk_model, tmp_path / "b.trec", depth=10, corpus=scifact_small, adapt_vocabulary=True)
    a, b = read_run(tmp_path / "a.trec"), read_run(tmp_path / "b.trec")
    assert a.keys() == b.keys() and all(a[q] == pytest.approx(b[q], rel=1e-5, abs=1e-6) for q in a)
    with pytest.raises(InputError, match="BM25 candidates need the corpus \\(--corpus\\)"):  # so has its words
        rerank(queries, "bm25", tk_model, tmp_path / "c.trec", adapt_vocabulary=True)


def test_adapting_reads_a_collection_with_the_checkpoints_analyzer(scifact_index, scifact_small, queries, tmp_path):
    """A model trained on unstemmed terms adapts to a corpus analyzed without stemming; an index of
    stemmed terms (another analyzer) is refused, not read as if its terms were the model's."""
    analyzer = Analyzer(stemmer="none")
    docs = [json.loads(line) for line in scifact_small.read_text().splitlines()][:50]
    vocab = Vocabulary.build([analyzer(d["title"] + "\n" + d["text"]) for d in docs])
    torch.manual_seed(0)
    model = build_model("tk", dict(vocab_size=len(vocab), embedding_dim=16, num_heads=2, ff_dim=16, num_layers=1))
    path = save_reranker(tmp_path / "unstemmed.pt", model, "tk", TermText(analyzer, vocab)).path
    adapted = open_reranker(path, adapt_to=scifact_small).text.vocab
    assert "tumors" in adapted and "tumor" in adapted  # Krovetz would make both "tumor"
    with pytest.raises(InputError, match="analyzed text otherwise than the model"):
        rerank(queries, scifact_index, path, tmp_path / "a.trec", depth=5, adapt_vocabulary=True)


def test_rerank_reads_a_candidate_index_checksums_once(scifact_index, tk_model, queries, tmp_path, monkeypatch):
    """The candidate index is opened once for its statistics and its candidates: its checksums are
    read once, not once for each (a second pass over every file of a large index)."""
    import retriever.index

    verified = []
    real = retriever.index.verify_files
    monkeypatch.setattr(retriever.index, "verify_files", lambda d, m: (verified.append(d), real(d, m)))
    rerank(queries, scifact_index, tk_model, tmp_path / "a.trec", depth=5, adapt_vocabulary=True)
    assert verified == [Path(scifact_index)]


def test_an_ndrm_reranking_an_index_reads_it_as_the_index_does(scifact_small, tmp_path):
    """`ckqti rerank --candidates INDEX --model ndrm3-scifact` read the text with the model's training words only,
    while the index (and explain --index) read the collection's: on Cranfield it ranked the index's own top 100 at
    nDCG@10 0.309 against the index's 0.342. Reranking an index's candidates now scores as the index does."""
    from ckqti import api

    corpus = tmp_path / "c.tsv"  # SciFact abstracts with words the bundled model never saw
    lines = [json.loads(line) for line in scifact_small.read_text().splitlines()[:80]]
    corpus.write_text("".join(f"{d['_id']}\t{' '.join(d['text'].split())} zorblatt{i % 7} quixotry{i % 5}\n" for i, d in enumerate(lines)))
    api.index(corpus, tmp_path / "idx", progress=False)
    (tmp_path / "q.tsv").write_text("1\tzorblatt3 quixotry1\n2\tvitamin zorblatt5 cells\n")
    rerank(tmp_path / "q.tsv", tmp_path / "idx", "ndrm3-scifact", tmp_path / "run.trec", depth=20)
    run = read_run(tmp_path / "run.trec")
    searcher = Searcher(str(tmp_path / "idx"))
    for qid, text in (("1", "zorblatt3 quixotry1"), ("2", "vitamin zorblatt5 cells")):
        indexed = {h.docid: h.score for h in searcher.search(text, 20).hits}
        assert run[qid].keys() == indexed.keys()
        for docid, score in run[qid].items():  # the index's quantized impacts against the model's floats
            assert score == pytest.approx(indexed[docid], rel=0.02, abs=0.05), (qid, docid)
        assert trec_order(run[qid])[0][0] == trec_order(indexed)[0][0]


def test_an_ndrm_rerank_counts_a_term_past_1024_query_tokens_as_search_does(scifact_index, scifact_small, tmp_path):
    """Search weighs a repeated term by its count and caps distinct terms at 1,024; rerank cut the
    query at 1,024 tokens, so a term after 1,024 repeats of another scored 0 (helper-25)."""
    doc = json.loads(scifact_small.read_text().splitlines()[7])
    index = Searcher(str(scifact_index)).index
    a, b = sorted(set(Analyzer()(doc["text"])), key=lambda t: (index.df[index.term_ids[t]], t))[:2]  # its rarest
    query = " ".join([a] * 1030 + [b])
    (tmp_path / "q.tsv").write_text(f"long\t{query}\n")
    rerank(tmp_path / "q.tsv", scifact_index, "ndrm2", tmp_path / "run.trec", depth=10)
    indexed = {h.docid: h.score for h in Searcher(str(scifact_index)).search(query, 10).hits}
    run = read_run(tmp_path / "run.trec")["long"]
    assert run.keys() == indexed.keys() and doc["_id"] in run
    for docid, score in run.items():
        assert score == pytest.approx(indexed[docid], rel=0.01, abs=0.05)
    from ckqti import api

    e = api.explain(query, doc["_id"], None, index_path=scifact_index)  # every token read, each repeat counted
    assert len(e.term_scores) == 1031 and e.query_tokens_cut == 0 and e.score == pytest.approx(run[doc["_id"]], rel=1e-5)


def test_queries_the_model_cannot_rank_are_skipped_with_their_reason(scifact_small, scifact_index, tk_model, tmp_path):
    """A query of only words the model never saw scored every candidate alike and wrote them in
    docid order; one of more distinct terms than search takes was cut instead of refused."""
    from retriever.rerank_scoring import rerank_candidates

    docids = [json.loads(line)["_id"] for line in scifact_small.read_text().splitlines()][:6]
    texts = corpus_texts(scifact_small)
    many = " ".join(sorted(Searcher(str(scifact_index)).index.term_ids)[2:1100])  # over 1,024 known terms
    queries = {"oov": "zzzqqq xxyyzz", "stop": "the of", "many": many, "ok": "vitamin deficiency"}
    candidates = {q: docids for q in queries}
    for model in (tk_model, "ndrm2"):
        reranker = open_reranker(model, "cpu", None, scifact_index if model == "ndrm2" else None)
        skipped: dict[str, str] = {}
        out = rerank_candidates(reranker, queries, candidates, texts, skipped=skipped)
        assert skipped["oov"] == "no word the model knows" and skipped["stop"] == "no term the model reads"
        assert set(out) == {"ok"} | ({"many"} if model != "ndrm2" else set())  # TK reads its first 30 tokens
        if model == "ndrm2":
            assert skipped["many"].startswith("query has ") and "at most 1024" in skipped["many"]


def test_unreadable_documents_rank_last_and_identical_texts_tie_by_docid(scifact_small, tk_model):
    """A TKL scored a document with no word it knows above every real one (its missing windows count
    0, above negative window scores); identical texts got scores 2e-7 apart by batch padding."""
    from retriever.rerank_scoring import distinct_scores, rerank_candidates

    texts = corpus_texts(scifact_small)
    real = list(texts)[:5]
    texts = {**texts, "empty": "", "stop": "the of and", "other": "\u4e2d\u6587 \u0627\u0644", "copy": texts[real[0]]}
    reranker = load_reranker(tk_model, device="cpu")
    out = rerank_candidates(reranker, {"q": "vitamin d deficiency"}, {"q": [*real, "empty", "stop", "other", "copy"]},
                            texts, batch_size=3)["q"]
    scores = dict(out)
    assert [d for d, _ in out[-3:]] == ["stop", "other", "empty"]  # tied below the rest, docid order descending
    assert scores["empty"] == scores["stop"] == min(scores[d] for d in real) - 1.0
    assert scores["copy"] == scores[real[0]]
    rows = [(torch.tensor([]).long().numpy(), 0), (reranker.doc_ids(texts[real[1]]), 0)]

    def model(query, rs):
        return reranker.score_rows(query, [r for r, _ in rs], [n for _, n in rs])

    assert distinct_scores(reranker, reranker.query_ids("vitamin"), rows, model)[0] < \
        distinct_scores(reranker, reranker.query_ids("vitamin"), rows, model)[1]


@pytest.mark.parametrize("model", ["ndrm3-scifact", "ndrm2"])
def test_qti_models_encode_each_candidate_once_and_score_as_pair_by_pair(scifact_small, scifact_index, model,
                                                                         monkeypatch):
    """An NDRM model encoded a document again for every query ranking it (Cranfield's BM25 top 100: 22,500
    encodings of 1,400 abstracts, 102 s). Under QTI each distinct candidate is encoded once and scored against
    its queries' terms: the same scores as the model's pair-by-pair forward (repeated and unknown query words,
    a shared document, identical texts, a document of no known word), the same run order."""
    from retriever.rerank_scoring import rerank_candidates

    texts = corpus_texts(scifact_small)
    docs = list(texts)[:40]
    texts = {**texts, "copy": texts[docs[3]], "stop": "the of and"}
    queries = {"a": "vitamin d deficiency tuberculosis vitamin", "b": "white matter zzzqqq development of the brain",
               "c": "breast cancer prognosis", "d": "cancer"}
    candidates = {"a": docs[:25] + ["copy", "stop"], "b": docs[10:40], "c": docs[5:30] + ["copy"], "d": docs[:3]}
    reranker = open_reranker(model, "cpu", None, scifact_index if model == "ndrm2" else None)
    encode, encoded = reranker.model.encode_documents, []
    monkeypatch.setattr(reranker.model, "encode_documents", lambda ids, lengths=None: (
        encoded.append(int(ids.shape[0])), encode(ids, lengths))[1])
    fast = rerank_candidates(reranker, queries, candidates, texts, batch_size=7)
    distinct = {d for ds in candidates.values() for d in ds} - {"copy", "stop"}  # copy reads as docs[3]; stop as nothing
    assert sum(encoded) == len(distinct)  # each once, in batches of at most 7
    assert max(encoded) <= 7 and len(encoded) == -(-len(distinct) // 7)
    encoded.clear()
    for q, ranking in fast.items():  # the model's forward, one pair at a time
        query = reranker.query_ids(queries[q])
        want = {d: float(reranker.score_rows(query, *reranker.doc_rows([texts[d]]))[0])
                for d in candidates[q] if d != "stop"}
        assert [d for d, _ in ranking][:len(want)] == sorted(want, key=lambda d: (want[d], d), reverse=True), q
        assert [s for _, s in ranking][:len(want)] == pytest.approx(sorted(want.values(), reverse=True), rel=1e-5)
    assert sum(encoded) == sum(len(c) for c in candidates.values()) - 1  # (what the shortcut saves)
    assert dict(fast["a"])["copy"] == dict(fast["a"])[docs[3]] and fast["a"][-1][0] == "stop"


@pytest.mark.parametrize("kind", ["tk", "tkl"])
def test_tk_and_tkl_encode_each_candidate_once_and_score_as_pair_by_pair(scifact_small, kind):
    """TK and TKL contextualised a document again for every query ranking it (SciFact's BM25 top 100: each
    abstract ~20 times). Their document vectors do not depend on the query, so each distinct candidate
    goes through the Transformer once (TK: the document; TKL: its windows), each query once: the same
    scores as the model's forward pair by pair (a shared document, identical texts, a document of no
    known word, a query twice), in batches of at most 7 documents."""
    from ckqti.models.tkl import split_windows
    from retriever.rerank_scoring import rerank_candidates

    texts = corpus_texts(scifact_small)
    docs = list(texts)[:40]
    texts = {**texts, "copy": texts[docs[3]], "stop": "the of and"}
    queries = {"a": "vitamin d deficiency tuberculosis vitamin", "b": "white matter zzzqqq development of the brain",
               "c": "breast cancer prognosis", "d": "cancer", "e": "breast cancer prognosis"}
    candidates = {"a": docs[:25] + ["copy", "stop"], "b": docs[10:40], "c": docs[5:30] + ["copy"], "d": docs[:3],
                  "e": docs[20:23]}
    analyzer = Analyzer()
    vocab = Vocabulary.build([analyzer(t) for t in texts.values()])
    torch.manual_seed(0)
    model = build_model(kind, dict(vocab_size=len(vocab), embedding_dim=16, num_heads=2, ff_dim=16, num_layers=1,
                                   **({"max_doc_length": 300} if kind == "tkl" else {})))
    with torch.no_grad():  # the contextualised vectors weigh most, and scores are not all near 0
        model.mixer.fill_(0.3)
        for name, p in model.named_parameters():
            if name.startswith("dense"):
                p.mul_(100)
    reranker = Reranker(kind, model.eval(), TermText(analyzer, vocab), kind, model.config.max_query_length,
                        model.config.max_doc_length, torch.device("cpu"))
    sequences = []  # rows of every Transformer input
    model.contextualizer.register_forward_hook(lambda m, args, out: sequences.append(int(args[0].shape[0])))
    fast = rerank_candidates(reranker, queries, candidates, texts, batch_size=7)
    distinct = {d for ds in candidates.values() for d in ds} - {"copy", "stop"}  # copy reads as docs[3]; stop as nothing
    c = model.config
    windows = [int((split_windows(torch.as_tensor(reranker.doc_ids(texts[d]))[None], c.chunk_size, c.overlap)[0]
                    [:, c.overlap: c.overlap + c.chunk_size] != 0).any(-1).sum()) if kind == "tkl" else 1 for d in distinct]
    assert sum(sequences) == len(queries) - 1 + sum(windows)  # each distinct query and document once
    for q, ranking in fast.items():  # the model's forward, one pair at a time
        query = reranker.query_ids(queries[q])
        want = {d: float(reranker.score_rows(query, *reranker.doc_rows([texts[d]]))[0])
                for d in candidates[q] if d != "stop"}
        assert dict(ranking) == pytest.approx({**want, **({"stop": min(want.values()) - 1} if q == "a" else {})},
                                              rel=1e-4, abs=1e-5), q  # float32 noise
    assert dict(fast["a"])["copy"] == dict(fast["a"])[docs[3]] and fast["a"][-1][0] == "stop"
    assert dict(fast["e"]).items() <= dict(fast["c"]).items()  # the same query: the same scores


def test_rerank_from_a_corpus_with_orcas_reads_what_an_index_built_with_them_holds(clicked_collection, tmp_path):
    """--orcas joins each document's clicks to the corpus text as ``ckqti index --orcas`` does (clicks,
    URL, title, text), and the collection's statistics count them: candidates reranked from --corpus C
    --orcas O score as from the stored text of C's index built with O (there was no --orcas: the clicks
    were lost)."""
    from retriever.index import Index

    corpus, orcas, index = clicked_collection["corpus"], clicked_collection["orcas"], clicked_collection["index"]
    idx = Index(index)
    texts = corpus_texts(corpus, orcas=orcas)
    assert texts == {d: idx.shards[idx.locate(d)[0]].indexed_text(idx.locate(d)[1]) for d in texts}
    assert texts["d1"].startswith("cell division growth of cells\nhttp://a.example/cells\nCell growth\n")
    queries = tmp_path / "q.tsv"
    queries.write_text("q1\tcell division\nq2\tlung infection rash\n")
    rerank(queries, index, "ndrm2", tmp_path / "stored.trec", depth=6)
    rerank(queries, index, "ndrm2", tmp_path / "clicked.trec", depth=6, corpus=corpus, orcas=orcas)
    rerank(queries, index, "ndrm2", tmp_path / "plain.trec", depth=6, corpus=corpus)
    stored, clicked, plain = (read_run(tmp_path / f"{n}.trec") for n in ("stored", "clicked", "plain"))
    assert stored.keys() == {"q1", "q2"} and sum(map(len, stored.values())) >= 3
    assert clicked.keys() == stored.keys() and all(clicked[q] == pytest.approx(stored[q], rel=1e-6) for q in stored)
    assert plain["q1"]["d1"] < stored["q1"]["d1"]  # "division" is in d1's clicks only


def test_bm25_candidates_search_the_plain_corpus_and_are_reranked_with_the_clicks(clicked_collection, tmp_path,
                                                                                  monkeypatch):
    """BM25 candidates come from the plain corpus (its Lucene index, kept in the work folder, is
    the corpus's whatever the clicks); the model then reads each candidate with its clicks."""
    import ckqti.bm25

    corpus, orcas, index = clicked_collection["corpus"], clicked_collection["orcas"], clicked_collection["index"]
    asked = []
    monkeypatch.setattr(ckqti.bm25, "bm25_candidates",
                        lambda *a: asked.append(a) or {"q1": ["d1", "d2", "d4"]})  # no Java: what BM25 returned
    queries = tmp_path / "q.tsv"
    queries.write_text("q1\tcell division\n")
    rerank(queries, "bm25", "ndrm2", tmp_path / "bm25.trec", corpus=corpus, orcas=orcas)
    assert [a[0] for a in asked] == [corpus]  # the corpus file alone, no clicks
    stored = Searcher(str(index)).search("cell division", 6).hits
    run = read_run(tmp_path / "bm25.trec")["q1"]
    assert run.keys() == {"d1", "d2", "d4"}
    assert run["d1"] == pytest.approx(next(h.score for h in stored if h.docid == "d1"), rel=0.01, abs=0.01)


def test_orcas_without_a_corpus_or_malformed_is_one_line_before_any_work(clicked_collection, tmp_path):
    """An index's stored text holds its own clicks (or none): --orcas without --corpus is refused; a
    malformed ORCAS file is the error ``ckqti index --orcas`` gives, naming its line; no run written."""
    from ckqti import api

    corpus, orcas, index = clicked_collection["corpus"], clicked_collection["orcas"], clicked_collection["index"]
    queries = tmp_path / "q.tsv"
    queries.write_text("q1\tcell division\n")
    with pytest.raises(InputError, match=f"^{orcas}: ORCAS clicks \\(--orcas\\) join the documents of a corpus file"):
        rerank(queries, index, "ndrm2", tmp_path / "r.trec", orcas=orcas)
    bad = tmp_path / "bad.tsv"
    bad.write_text("d1\tcell division\nd3\tlung\tinfection\n")
    with pytest.raises(CkqtiError) as indexing:
        api.index(corpus, tmp_path / "idx", model="ndrm2", orcas=bad, progress=False)
    with pytest.raises(InputError) as reranking:
        rerank(queries, index, "ndrm2", tmp_path / "r.trec", corpus=corpus, orcas=bad)
    assert str(reranking.value) == str(indexing.value) and str(indexing.value).startswith(f"{bad}:2: expected 2 ")
    before = orcas.read_bytes()
    with pytest.raises(InputError, match=f"^{orcas}: "):
        rerank(queries, index, "ndrm2", orcas, corpus=corpus, orcas=orcas)  # --out the ORCAS file: not replaced
    assert orcas.read_bytes() == before and not (tmp_path / "r.trec").exists()


def test_run_file_candidates_are_its_best_scored_whatever_its_line_order(scifact_small, queries, tmp_path):
    """A run file from another tool need not list a query's documents best first: trec_eval sorts by
    score, and so does the cut at --depth."""
    docids = [json.loads(line)["_id"] for line in scifact_small.read_text().splitlines()][:10]
    (tmp_path / "first.trec").write_text("".join(f"q0 Q0 {d} {10 - i} {i}.5 other\n" for i, d in enumerate(docids)))
    rerank(queries, tmp_path / "first.trec", "ndrm2", tmp_path / "run.trec", depth=3, corpus=scifact_small)
    assert set(read_run(tmp_path / "run.trec")["q0"]) == set(docids[-3:])



def test_run_file_candidates_hold_only_the_queries_reranked(tmp_path, monkeypatch):
    """Candidates from a run of many more queries than are reranked (a whole dev set's run, a few queries
    reranked) hold only those queries' rankings while it is read: a run at k = 1,000 read whole takes ~120
    bytes a line. Here 100 queries at k = 1,000, 2 reranked: the Python objects held when the first ranking is
    sorted stay far below the run's 100,000 lines."""
    import retriever.runs as runs
    from retriever.candidates import run_candidates
    from tests.memory import held_when_called

    path = tmp_path / "big.trec"
    path.write_text("".join(f"q{q} Q0 d{d} {d + 1} {1000 - d}.5 t\n" for q in range(100) for d in range(1000)))
    wanted = {"q3": "a", "q70": "b", "q-none": "c"}
    run_candidates(path, wanted, 5)  # the modules a run is read with imported before, not counted
    held, cands = held_when_called(monkeypatch, runs, "trec_order", lambda: run_candidates(path, wanted, 5))
    assert held["python"] < 2_000_000, held  # read whole: ~12 MB
    assert cands == {"q3": ["d0", "d1", "d2", "d3", "d4"], "q70": ["d0", "d1", "d2", "d3", "d4"]}

def test_run_file_candidates_are_read_a_query_at_a_time(tmp_path, monkeypatch):
    """A candidates run grouped by query (nearly every run) is read a query at a time: what is held when its last
    query's candidates are cut does not grow with its lines. Read whole it held every reranked query's ranking
    (~120 bytes a line; ~85 bytes a candidate in a 20,000-query rerank's peak RSS). Here 400 queries x 100
    lines, every query reranked, in blocks of 64 KB: read whole 4.6 MB held at the last cut, now 0.8 MB. The
    same run shuffled, its queries' lines apart (concatenated runs), is read whole as before: the same
    candidates, in the queries file's order either way."""
    import random

    import retriever.run_reader as run_reader
    import retriever.runs as runs
    from retriever.candidates import run_candidates
    from tests.memory import held_when_called

    monkeypatch.setattr(run_reader, "ARROW_BLOCK", 1 << 16)
    lines = [f"q{q} Q0 d{(q * 31 + d * 17) % 5000} {d + 1} {(d * 7) % 13 / 3!r} t\n" for q in range(400) for d in range(100)]
    path, shuffled = tmp_path / "grouped.trec", tmp_path / "shuffled.trec"
    path.write_text("".join(lines))
    random.Random(0).shuffle(lines)
    shuffled.write_text("".join(lines))
    wanted = {f"q{q}": "a" for q in reversed(range(400))}  # the queries file's order, not the run's
    run_candidates(path, wanted, 30)  # the modules a run is read with imported before, not counted
    held, cands = held_when_called(monkeypatch, runs, "trec_order", lambda: run_candidates(path, wanted, 30))
    assert held["python"] < 1_500_000, held  # read whole: 4.6 MB; a query at a time: 0.8 MB
    whole = read_run(path)
    expected = {q: [d for d, _ in trec_order(whole[q])[:30]] for q in wanted}
    assert cands == expected and list(cands) == list(wanted)
    again = run_candidates(shuffled, wanted, 30)
    assert again == expected and list(again) == list(wanted)


def test_a_corpus_gives_the_statistics_also_with_index_candidates(clicked_collection, tmp_path):
    """With --corpus the model reads the corpus's text and statistics whatever gives the candidates:
    an index's candidates are scored as the same documents from a run file are."""
    corpus, index = clicked_collection["corpus"], clicked_collection["index"]  # the index holds ORCAS clicks too
    queries = tmp_path / "q.tsv"
    queries.write_text("q1\tcell division\nq2\tlung infection rash\n")
    rerank(queries, index, "ndrm2", tmp_path / "index.trec", depth=6, corpus=corpus)
    rerank(queries, tmp_path / "index.trec", "ndrm2", tmp_path / "run.trec", depth=6, corpus=corpus)
    from_index, from_run = read_run(tmp_path / "index.trec"), read_run(tmp_path / "run.trec")
    assert from_index.keys() == {"q1", "q2"} and from_index == from_run


def test_an_ndrm_checkpoint_adapted_to_an_appended_index_takes_the_builds_constants(scifact_small, queries, tmp_path):
    """An NDRM2 checkpoint whose length mean is a prior (untrained, or ``explicit_fixed``) fills an
    index with the build's mean document length, which appended shards keep (``length_prior``).
    After an append of short documents the index's vocabulary has another mean; reranking its
    candidates with --adapt-vocabulary must score as search does (the build's constants), not by
    the new mean (which the model read from the index's vocabulary before they were set)."""
    from ckqti import api
    from ckqti.models.checkpoint import load_checkpoint, save_checkpoint
    from ckqti.models.ndrm import NDRMConfig, build_ndrm
    from ckqti.models.reranker import adapt_reranker
    from retriever.index import Index

    lines = scifact_small.read_text().splitlines(keepends=True)
    rows = [json.loads(x) for x in lines[100:160]]
    (tmp_path / "a.jsonl").write_text("".join(lines[:100]))
    (tmp_path / "b.jsonl").write_text("".join(json.dumps({**r, "title": "", "text": " ".join(r["text"].split()[:5])})
                                              + "\n" for r in rows))  # 60 documents of about 5 words
    analyzer = Analyzer()
    narrow = Vocabulary.build([analyzer(json.loads(x)["title"] + "\n" + json.loads(x)["text"]) for x in lines[:20]])
    model = build_ndrm(NDRMConfig(vocab_size=len(narrow), variant="ndrm2", bm25_init=(0.9, 0.4)), narrow)
    path = save_checkpoint(tmp_path / "ndrm2.pt", model, "ndrm2", model.config.to_dict(), narrow, analyzer).path
    index = tmp_path / "idx"
    api.index(tmp_path / "a.jsonl", index, model=str(path), progress=False)
    api.append(tmp_path / "b.jsonl", index, progress=False)
    idx = Index(index)
    prior = idx.manifest.model_constants["length_prior"]
    assert idx.vocabulary().mean_doc_length < 0.8 * prior  # the appended short documents moved the mean

    rerank(queries, index, path, tmp_path / "run.trec", depth=10, adapt_vocabulary=True)
    run = read_run(tmp_path / "run.trec")
    unset = adapt_reranker(load_checkpoint(path), idx.vocabulary(), "cpu")  # the new mean, no constants
    searcher, moved = Searcher(idx), 0
    for i, text in enumerate(QUERIES[:3]):
        indexed = {h.docid: h.score for h in searcher.search(text, 10).hits}
        assert run[f"q{i}"].keys() == indexed.keys()
        for docid, score in run[f"q{i}"].items():
            assert score == pytest.approx(indexed[docid], rel=0.01, abs=0.01)
        stored = {h.docid: idx.shards[h.shard].indexed_text(h.doc) for h in searcher.search(text, 10).hits}
        other = unset.score(text, list(stored.values()))
        moved += sum(s != pytest.approx(indexed[d], rel=0.01, abs=0.01) for d, s in zip(stored, other.tolist()))
    assert moved > 10  # without the build's constants the scores are not the index's


def test_a_candidate_listed_twice_is_ranked_once(scifact_small, tk_model):
    """Candidates that name a document twice (e.g. two first-stage lists joined) rank it once: a run may
    not repeat a document within a query (write_run refuses one that does)."""
    from retriever.rerank_scoring import rerank_candidates

    texts = corpus_texts(scifact_small)
    docs = list(texts)[:4]
    reranker = load_reranker(tk_model, device="cpu")
    listed = [docs[0], docs[1], docs[0], docs[2], docs[1], docs[3]]
    out = rerank_candidates(reranker, {"q": "vitamin d deficiency"}, {"q": listed}, texts, batch_size=2)["q"]
    assert sorted(d for d, _ in out) == sorted(docs)


@pytest.fixture(scope="module")
def random_tk(scifact_small, tmp_path_factory) -> Path:
    """A TK of random weights (its scores use every part of the model, unlike the match-initialised one's)."""
    analyzer = Analyzer()
    vocab = Vocabulary.build([analyzer(t) for t in corpus_texts(scifact_small).values()])
    torch.manual_seed(0)
    model = build_model("tk", dict(vocab_size=len(vocab), embedding_dim=16, num_heads=2, ff_dim=16, num_layers=1))
    with torch.no_grad():  # the contextualised vectors weigh most, and scores are not all near 0
        model.mixer.fill_(0.3)
        for name, p in model.named_parameters():
            if name.startswith("dense"):
                p.mul_(100)
    return save_reranker(tmp_path_factory.mktemp("tk") / "random.pt", model, "tk", TermText(analyzer, vocab)).path


@pytest.mark.parametrize("schedule", ["switching", "two"])
@pytest.mark.parametrize("model", ["ndrm3-scifact", "tk", "random-tk"])
def test_a_rerank_on_two_threads_or_switching_every_batch_is_the_one_thread_rerank(model, schedule, scifact_index,
                                                                                  tk_model, random_tk, queries,
                                                                                  tmp_path, monkeypatch):
    """Each batch of a rerank on a CPU runs on the thread count the reranker's ThreadChooser picks (torch's or
    one: beside other jobs, one is up to 7x faster); the bundled NDRM3 (term tables) and a TK (encoded pairs),
    with the count switching between 2 and 1 at every batch of 8, or on 2 throughout, write the one-thread run
    byte for byte. MKL's matrix products rounded otherwise on 2 threads than on 1 (a random TK's scores 1e-6
    apart) until ckqti asked MKL for results that do not depend on the thread count (``MKL_CBWR``,
    ckqti/__init__.py; torch's own small batched products still may, so this holds for these runs, not all)."""
    from ckqti.threads import ThreadChooser

    model = {"tk": tk_model, "random-tk": random_tk}.get(model, model)
    rerank(queries, scifact_index, model, tmp_path / "one.trec", depth=30, batch_size=8)  # the tests' one thread
    counts, used = iter([2, 1] * 1000 if schedule == "switching" else [2] * 2000), []

    def pick(self) -> int:
        used.append(next(counts))
        return used[-1]

    monkeypatch.setattr(ThreadChooser, "next", pick)
    torch.set_num_threads(2)  # restored to the tests' one thread by the conftest fixture
    rerank(queries, scifact_index, model, tmp_path / "two.trec", depth=30, batch_size=8)
    assert torch.get_num_threads() == 2 and len(used) >= 4 and set(used) == ({1, 2} if schedule == "switching" else {2})
    assert (tmp_path / "two.trec").read_bytes() == (tmp_path / "one.trec").read_bytes()


def scoring_peak(monkeypatch, run) -> int:
    """Bytes Python's objects and numpy's arrays held at most while ``run()``'s rerank scored and wrote, above
    those held when it began scoring (its candidates and their text read)."""
    import tracemalloc

    import retriever.rerank as module

    share, start = module.unknown_share, []

    def began(*args):
        tracemalloc.reset_peak()
        start.append(tracemalloc.get_traced_memory()[0])
        return share(*args)

    monkeypatch.setattr(module, "unknown_share", began)
    tracemalloc.start()
    try:
        run()
        return tracemalloc.get_traced_memory()[1] - start[0]
    finally:
        tracemalloc.stop()


def test_rerank_scores_and_writes_a_window_of_queries_at_a_time(scifact_small, tmp_path, monkeypatch):
    """rerank held every query's ranking, and an NDRM model's term table of every query's terms, until it wrote
    the run: its memory grew with the query set (5,000 synthetic SciFact queries x 100 random abstracts, the
    untrained NDRM2: 1,011 MiB RSS against 556 at 1,000 queries). It now scores a window of queries
    (``WINDOW_PAIRS`` candidates) and writes it before the next: 4x the queries, the same peak while scoring
    (2.7 MB here), and the same run as one window (NDRM2's scores do not depend on a batch's other documents)."""
    import random

    import retriever.rerank as module
    import retriever.rerank_windows as windows

    texts = corpus_texts(scifact_small)
    words = sorted({w for t in list(texts.values())[:50] for w in t.split()})
    rng = random.Random(0)
    docids = list(texts)

    def inputs(n: int, name: str) -> tuple[Path, Path]:
        queries, run = tmp_path / f"{name}.tsv", tmp_path / f"{name}.trec"
        queries.write_text("".join(f"s{i}\t{' '.join(rng.sample(words, 8))}\n" for i in range(n)))
        write_run(run, {f"s{i}": [(d, 100.0 - r) for r, d in enumerate(rng.sample(docids, 100))] for i in range(n)},
                  "syn")
        return queries, run

    few, many = inputs(40, "few"), inputs(160, "many")
    reranker = open_reranker("ndrm2", "cpu", None, scifact_small)  # built once: its statistics are not measured
    monkeypatch.setattr(module, "open_reranker", lambda *args, **kwargs: reranker)
    monkeypatch.setattr(windows, "WINDOW_PAIRS", 1000)  # 10 queries a window
    rerank(*few, "ndrm2", tmp_path / "out.trec", corpus=scifact_small)  # what a first rerank imports and caches
    peaks = [scoring_peak(monkeypatch, lambda q=q, r=r: rerank(q, r, "ndrm2", tmp_path / "out.trec", corpus=scifact_small))
             for q, r in (few, many)]
    assert peaks[1] < 1.3 * peaks[0], peaks  # before: 5.4 -> 15.0 MB (4x the queries, 2.8x the peak)
    windowed = (tmp_path / "out.trec").read_bytes()
    monkeypatch.setattr(windows, "WINDOW_PAIRS", 10**9)  # one window
    rerank(*many, "ndrm2", tmp_path / "one.trec", corpus=scifact_small)
    assert windowed == (tmp_path / "one.trec").read_bytes()


def test_query_windows_close_at_the_first_query_that_brings_them_to_the_pairs():
    """A window closes once it holds ``pairs`` candidates or more (not after one more query), counted from 0;
    queries without candidates are left out, and the last window is the rest."""
    from retriever.rerank_windows import query_windows

    cands = {"a": ["d1"], "b": ["d1"], "c": ["d1", "d2"], "none": [], "d": ["d3"]}
    assert list(query_windows(["a", "b", "none", "c", "d", "x"], cands, 2)) == [["a", "b"], ["c"], ["d"]]
    assert list(query_windows(["c", "a", "d"], cands, 3)) == [["c", "a"], ["d"]]


def test_candidates_in_memory_are_cut_as_the_same_run_file_is(tmp_path):
    """A first stage's candidates as a dict, ``{qid: {docid: score}}`` or ranked lists, give each query the top
    ``depth`` that the same run written to a file gives (run_candidates): score descending as trec_eval holds it
    (single precision), ties by docid descending, the queries' order, the run's other queries left out."""
    import random

    from retriever.candidates import run_candidates
    from retriever.memory_candidates import memory_candidates

    rng = random.Random(3)
    scored = {f"q{i}": {f"d{rng.randrange(10**6)}": float(rng.choice([1.0, 1.0 + 1e-12, 2.5, rng.random()]))
                        for _ in range(rng.randrange(1, 60))} for i in range(200)}
    write_run(tmp_path / "first.trec", scored, "first")
    queries = {f"q{i}": "text" for i in rng.sample(range(250), 150)}  # 50 of them not in the run
    for depth in (1, 7, 100):
        from_file = run_candidates(tmp_path / "first.trec", queries, depth)
        in_memory = memory_candidates(scored, queries, depth)
        assert list(in_memory) == list(from_file) and dict(in_memory) == dict(from_file)
        lists = {q: [d for d, _ in trec_order(docs)] for q, docs in scored.items()}  # ranked: cut as they come
        assert dict(memory_candidates(lists, queries, depth)) == dict(from_file)
    assert dict(memory_candidates({7: ["b", "a"], "q": []}, {"7": "x", "q": "y"}, 5)) == {"7": ["b", "a"], "q": []}


def test_documents_in_memory_read_as_the_same_corpus_file(scifact_small):
    """``{docid: text}``, ``{docid: {"title": ..., "text": ...}}`` (BEIR's loader) and api.index's lists give the
    text a corpus file of the same fields gives (title and text joined)."""
    from indexer.readers import documents_in_memory as corpus_documents

    lines = [json.loads(line) for line in scifact_small.read_text().splitlines()]
    from_file = corpus_texts(scifact_small)
    assert corpus_texts(corpus_documents(lines)) == from_file
    assert corpus_texts(corpus_documents({d["_id"]: {"title": d["title"], "text": d["text"]} for d in lines})) == from_file
    assert corpus_texts(corpus_documents({" d1 ": " a text ", 2: "b"})) == {"d1": "a text", "2": "b"}
