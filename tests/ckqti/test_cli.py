"""The CLI is a thin layer: its output equals the API's, and bad input gives one-line errors."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import signal
import subprocess
import sys

import pytest
from click.testing import CliRunner

from ckqti import api
from ckqti.cli import cli
from ckqti.models.specs import DEFAULT_CHECKPOINT
from indexer.format import Manifest
from retriever.index import Index
from retriever.run_reader import read_run


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def test_search_json_equals_api(scifact_index):
    q = "white matter diffusion imaging"
    res = invoke("search", q, "--index", scifact_index, "-k", 5, "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    want = api.search(q, scifact_index, k=5)
    assert [h["docid"] for h in out["hits"]] == [h.docid for h in want.hits]
    assert [h["score"] for h in out["hits"]] == pytest.approx([h.score for h in want.hits])
    assert [h["rank"] for h in out["hits"]] == [1, 2, 3, 4, 5]


def test_channel_weight_option_reaches_the_searcher_and_bad_values_fail_cleanly(scifact_index):
    q = "white matter diffusion imaging"
    res = invoke("search", q, "--index", scifact_index, "-k", 5, "--json", "--channel-weight", "idf=2")
    assert res.exit_code == 0, res.output
    plain = api.search(q, scifact_index, k=5)
    assert [h["score"] for h in json.loads(res.stdout)["hits"]] == pytest.approx([2 * h.score for h in plain.hits])
    bad = invoke("search", q, "--index", scifact_index, "--channel-weight", "one=2")  # NDRM2 has no "one" channel
    assert bad.exit_code != 0 and "channels are" in bad.output and "Traceback" not in bad.output
    malformed = invoke("search", q, "--index", scifact_index, "--channel-weight", "idf")
    assert malformed.exit_code != 0 and "NAME=WEIGHT" in malformed.output
    twice = invoke("search", q, "--index", scifact_index, "--channel-weight", "idf=1", "--channel-weight", "idf=2")
    assert twice.exit_code == 2 and "channel 'idf' is weighted twice" in twice.output
    negative = invoke("search", q, "--index", scifact_index, "--channel-weight", "idf=-1")
    assert negative.exit_code != 0 and "must be a finite number >= 0" in negative.output
    assert "Traceback" not in negative.output
    assert "a number >= 0" in " ".join(invoke("search", "--help").output.split())  # the help says so


def test_channel_weights_are_plain_decimal_numbers(scifact_index):
    """Python's float() read ``idf=1_0`` as 10 (the run reader refuses that form), `` 1`` and other
    scripts' digits: a weight is plain decimal or scientific notation, else a one-line usage error."""
    for w in ("1_0", " 1", "1 ", "\u0661", "0x1", "1e", "."):
        res = invoke("search", "white matter", "--index", scifact_index, "--channel-weight", f"idf={w}")
        assert res.exit_code == 2 and res.output.splitlines()[-1] == (
            f"Error: Invalid value for '--channel-weight': 'idf={w}': expected NAME=WEIGHT, e.g. one=0.5"), (w, res.output)
    plain = api.search("white matter", scifact_index, k=3)
    for w in ("2", "2.", "+2.0", ".2e1", "20E-1"):
        res = invoke("search", "white matter", "--index", scifact_index, "-k", 3, "--json", "--channel-weight", f"idf={w}")
        assert res.exit_code == 0, (w, res.output)
        assert [h["score"] for h in json.loads(res.stdout)["hits"]] == pytest.approx([2 * h.score for h in plain.hits])


def test_every_channel_weighted_zero_is_one_line_on_search_and_run(tmp_path, scifact_index):
    """A weight of 0 switches a channel off; NDRM2's one channel at 0 would leave nothing to
    score: refused in one line, rc != 0, no traceback, and ``run`` writes no file."""
    zero = invoke("search", "white matter", "--index", scifact_index, "--channel-weight", "idf=0")
    assert zero.exit_code != 0 and "Traceback" not in zero.output
    lines = zero.output.strip().splitlines()
    assert len(lines) == 1 and "channel weights are all 0 (the index's channels are ['idf']): nothing would score" in lines[0]
    queries, out = tmp_path / "q.tsv", tmp_path / "run.trec"
    queries.write_text("1\twhite matter\n")
    run = invoke("run", "--index", scifact_index, "--queries", queries, "--out", out, "--channel-weight", "idf=0")
    assert run.exit_code != 0 and "nothing would score" in run.output and len(run.output.strip().splitlines()) == 1
    assert "Traceback" not in run.output and not out.exists()


def test_slack_option_reaches_the_searcher_and_misuse_fails_cleanly(scifact_index):
    q = "white matter diffusion imaging"
    res = invoke("search", q, "--index", scifact_index, "-k", 5, "--json", "--mode", "anytime", "--slack", "1")
    assert res.exit_code == 0, res.output
    assert [h["docid"] for h in json.loads(res.stdout)["hits"]] == [h.docid for h in api.search(q, scifact_index, k=5).hits]
    for args in (["--slack", "0.5"], ["--mode", "anytime", "--slack", "2"]):
        bad = invoke("search", q, "--index", scifact_index, *args)
        assert bad.exit_code != 0 and "slack" in bad.output and "Traceback" not in bad.output


def test_a_budget_or_slack_without_anytime_mode_is_a_usage_error(tmp_path, scifact_index):
    """Exact mode reads no budget: ``--budget 5`` alone searched exactly and said nothing, and ``--slack 0.5``
    failed with exit 1 after opening the index; search, run and serve refuse both before any work."""
    q = "white matter diffusion imaging"
    queries, out = tmp_path / "q.tsv", tmp_path / "run.trec"
    queries.write_text(f"1\t{q}\n")
    for line in (["search", q, "--index", scifact_index], ["run", "--index", scifact_index, "--queries", queries,
                 "--out", out], ["serve", "--index", scifact_index, "--port", "0"]):
        for mode in ([], ["--mode", "exact"]):
            for option, value in (("--budget", 5), ("--slack", 0.5)):
                bad = invoke(*line, *mode, option, value)
                assert bad.exit_code == 2 and f"{option} " in bad.output and "applies to --mode anytime only" in bad.output, bad.output
                assert "Traceback" not in bad.output and not out.exists()
    res = invoke("search", q, "--index", scifact_index, "-k", 5, "--json", "--mode", "anytime", "--budget", 10**30)
    assert res.exit_code == 0, res.output  # past int64 it means no limit (was numba's OverflowError, a traceback)
    assert [h["docid"] for h in json.loads(res.stdout)["hits"]] == [h.docid for h in api.search(q, scifact_index, k=5).hits]


def test_search_prints_rank_docid_score_and_title(scifact_index):
    res = invoke("search", "white matter", "--index", scifact_index, "-k", 3)
    assert res.exit_code == 0
    first = api.search("white matter", scifact_index, k=3).hits[0]
    line = res.stdout.splitlines()[0].split()
    assert line[0] == "1" and line[1] == first.docid and float(line[2]) == pytest.approx(first.score, abs=1e-4)


def test_search_reads_an_unquoted_query_as_its_words_joined(scifact_index):
    """`ckqti search white matter imaging` was a usage error ("unexpected extra arguments (matter imaging)")."""
    unquoted = invoke("search", "white", "matter", "imaging", "--index", scifact_index, "-k", 5, "--json")
    quoted = invoke("search", "white matter imaging", "--index", scifact_index, "-k", 5, "--json")
    assert unquoted.exit_code == 0 and unquoted.stdout == quoted.stdout
    assert json.loads(unquoted.stdout)["hits"]


@pytest.mark.parametrize("args, hint", [
    (["info", "{index}"], "give the index as --index {index}"),
    (["compact", "{index}"], "give the index as --index {index}"),
    (["run", "{index}", "--queries", "{queries}", "--out", "{out}"], "give the index as --index {index}"),
    (["index", "{corpus}", "{out}"], "give the index to write as --out {out}"),
    (["explain", "cells", "d1", "{index}"], "give the index as --index {index}"),
    (["info", "--index", "{index}", "{index}"], None),  # --index given: only click's words
    (["index", "{corpus}", "--out", "{out}", "{out}"], None),
])
def test_a_stray_argument_names_the_option_it_was_meant_for(tmp_path, scifact_index, scifact_small, args, hint):
    """`ckqti info INDEX` and `ckqti index CORPUS OUT` said "Got unexpected extra argument (INDEX)" and no more."""
    paths = {"index": scifact_index, "queries": tmp_path / "q.tsv", "out": tmp_path / "new", "corpus": scifact_small}
    (tmp_path / "q.tsv").write_text("1\tcells\n")
    args = [a.format(**paths) for a in args]
    res = invoke(*args)
    assert res.exit_code == 2 and not (tmp_path / "new").exists()
    error = res.output.splitlines()[-1]
    stray = args[-1] if hint is None else args[{"index": 2, "explain": 3}.get(args[0], 1)]
    assert error.startswith(f"Error: Got unexpected extra argument ({stray})"), error
    assert error.endswith(hint.format(**paths) if hint else ")"), error


def test_search_says_a_folder_at_the_end_of_its_query_is_meant_for_index(scifact_index):
    """`ckqti search "white matter" INDEX` now reads INDEX as a query word (the query's words need no quotes)."""
    res = invoke("search", "white matter", scifact_index)
    assert res.exit_code == 2
    assert res.output.splitlines()[-1] == (f"Error: QUERY's last word {scifact_index} is a folder; "
                                           f"give the index as --index {scifact_index}")
    with_index = invoke("search", "white matter", scifact_index, "--index", scifact_index)  # a word, as asked
    assert with_index.exit_code == 0 and "not in the index vocabulary" in with_index.output


def test_info_prints_what_the_api_reports(scifact_index):
    info = api.info(scifact_index)
    res = invoke("info", "--index", scifact_index)
    assert res.exit_code == 0
    lines = {line.split()[0]: line for line in res.stdout.splitlines()}
    assert lines["documents"].split()[1:5] == ["600", "in", "3", "shard(s)"]
    assert lines["postings"].split()[1] == f"{info.num_postings:,}"
    assert "ndrm2-untrained" in lines["model"] and "not checked" in lines["checksums"]
    res = invoke("info", "--index", scifact_index, "--json", "--verify")
    assert res.exit_code == 0 and json.loads(res.stdout) == {**info.to_dict(), "verified": True}


def test_json_output_is_strict_json_whatever_the_api_gives(scifact_index, monkeypatch):
    """--json writes a number that is not finite as null, not as Python's bare NaN or Infinity, which JSON
    lacks and strict parsers refuse; the finite ones unchanged (``info`` here: each --json command prints
    through ``ckqti.json_form.json_text``)."""
    from dataclasses import replace

    info = api.info(scifact_index)
    monkeypatch.setattr(api, "info", lambda *a: replace(info, build_seconds=float("nan"), quantization={"scale": float("inf")}))

    def refuse(token):
        raise ValueError(f"not JSON: a bare {token}")

    res = invoke("info", "--index", scifact_index, "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout, parse_constant=refuse)
    assert out["build_seconds"] is None and out["quantization"] == {"scale": None}
    assert out == {**info.to_dict(), "build_seconds": None, "quantization": {"scale": None}}


def test_info_notes_the_leftovers_of_an_interrupted_append(tmp_path, scifact_index):
    """As it notes an unfinished build: one line, what and how many bytes, and what removes them."""
    from tests.retriever.test_info import dead_pid, with_leftovers

    pid = dead_pid()
    res = invoke("info", "--index", with_leftovers(tmp_path, scifact_index, pid))
    assert res.exit_code == 0, res.output
    assert [line for line in res.stdout.splitlines() if line.startswith("leftovers")] == [
        f"leftovers   3 item(s), 1.3 KiB, of an interrupted append or compaction (.append-{pid}/, shard-00003/, "
        "vocab-00001.arrow); the next ckqti index --append or ckqti compact removes them"]
    assert "leftovers" not in invoke("info", "--index", scifact_index).stdout


def test_info_says_an_append_running_now_is_writing_not_that_it_left_leftovers(tmp_path, scifact_index):
    """An append or compaction still running (its work folder names a live process: this one) is writing the
    files the manifest does not name yet: info says so, with its process and what it has written so far, not
    "leftovers ... the next ckqti index --append or ckqti compact removes them"."""
    from tests.retriever.test_info import with_leftovers

    pid = os.getpid()
    res = invoke("info", "--index", with_leftovers(tmp_path, scifact_index, pid))
    assert res.exit_code == 0, res.output
    assert [line for line in res.stdout.splitlines() if line.startswith(("writing", "leftovers"))] == [
        f"writing     an append or compaction (process {pid}) is writing: 1.3 KiB so far (.append-{pid}/, "
        "shard-00003/, vocab-00001.arrow)"]


def test_option_errors_are_usage_errors_of_their_command(tmp_path, scifact_index):
    """An option the API refuses (OptionError) reads as click's own usage errors: exit 2 and the
    command's Usage line (raised through the group, it had none); explain with neither --corpus nor
    --index names them (it said "a corpus file or an index", exit 1)."""
    neighbours = invoke("index", tmp_path / "c.tsv", "--out", tmp_path / "i", "--model", "ndrm2", "--neighbours", 5)
    assert neighbours.exit_code == 2 and neighbours.output.startswith("Usage: cli index [OPTIONS] CORPUS\n")
    assert neighbours.output.splitlines()[-1].startswith("Error: --neighbours are for dense latent models;")
    neither = invoke("explain", "cell", "4983", "--model", "ndrm2")
    assert neither.exit_code == 2 and neither.output.startswith("Usage: cli explain [OPTIONS] QUERY DOCID\n")
    assert neither.output.splitlines()[-1] == "Error: give exactly one of --corpus or --index: where to read DOCID from"
    both = invoke("explain", "cell", "4983", "--corpus", tmp_path / "c.tsv", "--index", scifact_index)
    assert both.exit_code == 2 and both.output.splitlines()[-1] == neither.output.splitlines()[-1]


def test_info_of_a_missing_index_is_one_line(tmp_path):
    res = invoke("info", "--index", tmp_path / "none")
    assert res.exit_code != 0 and "no such index directory" in res.output
    assert len(res.output.strip().splitlines()) == 1


def test_search_notices_oov_and_empty_queries(scifact_index):
    res = invoke("search", "qqzzxx white", "--index", scifact_index)
    assert res.exit_code == 0 and "skipped: qqzzxx" in res.stderr
    res = invoke("search", "the of and", "--index", scifact_index)
    assert res.exit_code != 0 and "no searchable terms" in res.output
    assert len(res.output.strip().splitlines()) == 1
    many = " ".join([t for t in Index(scifact_index).term_ids if t.isalnum()][:1025])  # past search's limit (docs/CLI.md)
    res = invoke("search", many, "--index", scifact_index)
    assert res.exit_code != 0 and res.output == "Error: query has 1025 distinct known terms; a query may have at most 1024\n"


def test_search_lines_fit_their_columns_between_words_and_show_the_first_hit(tmp_path):
    """Titles and snippets were cut at 100 characters: inside a word and its marks (``[mem``), after
    long words that pushed the only hit out, and at 200 columns for a CJK title."""
    from ckqti.terminal import columns_of

    docs = [
        {"_id": "long", "title": "", "text": "x" * 300 + " " + "y" * 80 + " " + "z" * 80 + " membrane"},
        {"_id": "straddle", "title": "Membranes", "text": "membrane " + "proteins " * 9 + "cell membrane end"},
        {"_id": "wide", "title": "\u7d30\u80de\u819c" * 40, "text": "the membrane"},
        *({"_id": f"f{i}", "title": "", "text": f"other words {i}"} for i in range(4)),
    ]
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps(d) + "\n" for d in docs))
    assert invoke("index", corpus, "--out", tmp_path / "idx", "--model", "ndrm2").exit_code == 0
    res = invoke("search", "membrane", "--index", tmp_path / "idx")
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    head = len(lines[0]) - len(lines[0].split(None, 3)[3])  # rank, docid, score
    by_doc = {}
    for line in lines:
        if line[:head].strip():
            docid = line.split()[1]
        by_doc.setdefault(docid, []).append(line[head:])
        assert columns_of(line[head:]) <= 100 and line[head:].count("[") == line[head:].count("]"), line
    assert by_doc["long"][0].endswith("[membrane]")  # the only hit, after three long words
    assert by_doc["straddle"][1] == "[membrane] " + "proteins " * 9 + "cell ..."  # not "... cell [mem"
    assert by_doc["wide"][0].endswith("\u2026") and by_doc["wide"][1] == "the [membrane]"


def test_search_columns_line_up_after_a_wide_docid(tmp_path):
    """The docid column was padded to 14 characters, not terminal columns: a CJK docid (two columns
    a character) pushed its score and title right of the others'."""
    from ckqti.terminal import columns_of

    docs = [
        {"_id": "\u7d30\u80de\u819c-1", "title": "Membrane title", "text": "cell membrane"},
        {"_id": "d2", "title": "Other title", "text": "membrane proteins"},
        *({"_id": f"f{i}", "title": "", "text": f"other words {i}"} for i in range(4)),
    ]
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps(d) + "\n" for d in docs))
    assert invoke("index", corpus, "--out", tmp_path / "idx", "--model", "ndrm2").exit_code == 0
    res = invoke("search", "membrane", "--index", tmp_path / "idx")
    assert res.exit_code == 0, res.output
    heads = [line for line in res.stdout.splitlines() if line[:3].strip()]
    assert sorted(line.split()[1] for line in heads) == ["d2", "\u7d30\u80de\u819c-1"]
    score_at = {columns_of(line) - columns_of(line.split(None, 2)[2]) for line in heads}
    title_at = {columns_of(line) - columns_of(line.split(None, 3)[3]) for line in heads}
    snippet_at = {columns_of(line) - columns_of(line.lstrip()) for line in res.stdout.splitlines() if line[:3].isspace()}
    assert len(score_at) == 1 and len(title_at) == 1 and snippet_at == title_at, res.stdout


def test_search_columns_line_up_for_scores_of_any_width(scifact_index):
    """Scores were printed 9 wide: one of 10,000 or more (channel weights up to 1e6 scale them)
    pushed its title and snippet right of the other hits'."""
    from dataclasses import replace

    from ckqti.cli.search import search_lines
    from ckqti.terminal import columns_of

    searcher = api.open_searcher(scifact_index)
    res = searcher.search("white matter", 4)
    assert len(res.hits) == 4
    for scores in ((123456.5, 75921.25, 983.5, -2.5), (3.5, 2.25, 1.0, 0.5)):
        hits = [replace(h, score=x) for h, x in zip(res.hits, scores)]
        lines = search_lines(searcher, replace(res, hits=hits))
        heads = [line for line in lines if line[:3].strip()]
        text_at = {columns_of(line) - columns_of(line.split(None, 3)[3]) for line in heads}
        below_at = {columns_of(line) - columns_of(line.lstrip()) for line in lines if line[:3].isspace()}
        assert len(heads) == 4 and len(text_at) == 1 and below_at <= text_at, lines
        assert [float(line.split()[2]) for line in heads] == list(scores)


def test_search_names_terms_that_add_nothing(tmp_path):
    """NDRM2's idf is 0 for a term in at least half of the documents: such a term scores no
    document, and search says so instead of a bare "no documents match"."""
    corpus = tmp_path / "c.tsv"
    corpus.write_text("d1\tcats purr on warm mats\nd2\tcats chase mice\nd3\tparrots talk\nd4\towls hoot at night\n")
    idx = tmp_path / "idx"
    assert invoke("index", corpus, "--out", idx, "--model", "ndrm2").exit_code == 0
    alone = invoke("search", "cats", "--index", idx)
    assert alone.exit_code == 0 and "no documents match" in alone.stdout
    assert "skipped: cat (idf 0" in alone.stderr
    mixed = invoke("search", "cats chase mice", "--index", idx, "--json")
    out = json.loads(mixed.stdout)
    assert out["unweighted"] == ["cat"] and [h["docid"] for h in out["hits"]] == ["d2"]
    assert "skipped: cat " in mixed.stderr and "chase" not in mixed.stderr
    assert api.search("parrots", idx).unweighted == []


def test_run_and_eval_on_real_queries(tmp_path, scifact_index, data_dir):
    run = tmp_path / "run.trec"
    res = invoke("run", "--index", scifact_index, "--queries", data_dir / "scifact" / "queries.jsonl",
                 "--out", run, "-k", 100, "--threads", 2)
    assert res.exit_code == 0, res.output
    lines = run.read_text().splitlines()
    assert len(lines[0].split()) == 6
    res = invoke("eval", run, data_dir / "scifact" / "qrels" / "test.tsv")
    assert res.exit_code == 0, res.output
    assert "nDCG@10" in res.stdout


BAD_INPUTS = {
    "malformed.tsv": (b"d1\tfine text\nd2\n", "malformed.tsv:2"),
    "bad.jsonl": (b'{"_id": "a", "text": "x"}\n{not json\n', "bad.jsonl:2"),
    "corpus.xyz": (b"whatever\n", "corpus.xyz"),
    "empty.tsv": (b"", "empty.tsv"),
    "dups.tsv": (b"d1\tone\nd2\ttwo\nd1\tthree\n", "dups.tsv:3"),
    "utf8.tsv": (b"d1\tok\nd2\tbad \xff\xfe bytes\n", "utf8.tsv:2"),
    "array.jsonl": (b'{"_id": "a", "text": "x"}\n[1, 2]\n', "array.jsonl:2: expected a JSON object, found list"),
    "closed.trec": (b"<DOC>\n<DOCNO> d1 </DOCNO>\n<TEXT>x</TEXT>\n</DOC>\n</DOC>\n",
                    "closed.trec:5: </DOC> without an opening <DOC>"),
    "stray.smart": (b".I 1\nstray text\n.W\nbody\n", "stray.smart:2: text before any SMART field marker"),
}


@pytest.mark.parametrize("name", sorted(BAD_INPUTS))
def test_bad_corpus_gives_one_line_error_and_no_index(tmp_path, name):
    content, where = BAD_INPUTS[name]
    corpus = tmp_path / name
    corpus.write_bytes(content)
    out = tmp_path / "idx"
    res = invoke("index", corpus, "--out", out, "--model", "ndrm2")
    assert res.exit_code != 0
    msg = res.output.strip().splitlines()  # progress bars so far (closed: their own lines), then the error
    assert msg[-1].startswith("Error: ") and where in msg[-1] and "Traceback" not in res.output
    assert all(line.startswith("analyze: ") for line in msg[:-1]), res.output
    assert not out.exists() and not (tmp_path / "idx.partial").exists()


def test_gzip_corpus_indexes_like_plain(tmp_path, scifact_small):
    gz = tmp_path / "corpus.jsonl.gz"
    gz.write_bytes(gzip.compress(scifact_small.read_bytes()))
    res = invoke("index", gz, "--out", tmp_path / "idx", "--model", "ndrm2", "--shard-size", 400)
    assert res.exit_code == 0, res.output
    assert "600 documents" in res.stdout and "2 shard(s)" in res.stdout


def test_index_and_append_count_postings_as_info_does(tmp_path):
    """'indexed 1 document, 1 postings' and '1558661 postings' beside '5,183 documents': the count now
    reads as `ckqti info`'s (95,805), in the number it takes."""
    (tmp_path / "one.tsv").write_text("d1\thello\n")
    res = invoke("index", tmp_path / "one.tsv", "--out", tmp_path / "idx", "--model", "ndrm2")
    assert res.exit_code == 0, res.output
    assert res.stdout.strip() == f"indexed 1 document, 1 posting, 1 shard(s) -> {tmp_path / 'idx'}"
    (tmp_path / "more.tsv").write_text("".join(f"e{i}\t{' '.join(f'w{j}' for j in range(i, i + 600))}\n"
                                               for i in range(2)))
    res = invoke("index", tmp_path / "more.tsv", "--append", "--index", tmp_path / "idx")
    assert res.exit_code == 0, res.output
    postings = Manifest.read(tmp_path / "idx").num_postings
    assert postings > 1000 and res.stdout.strip() == (f"appended 2 documents: 3 documents, {postings:,} postings, "
                                                      f"2 shard(s) in {tmp_path / 'idx'}")


def test_terms_past_what_the_model_reads_are_noted_at_build_append_and_search(tmp_path):
    """A document's terms past the model's 4,000 (SPEC) are not indexed: a search for a word only there said
    "no documents match" and nothing else, and neither the build nor an append said any document was cut."""
    filler = " ".join(f"w{i % 3000}" for i in range(4400))
    (tmp_path / "c.tsv").write_text(f"d1\t{filler} quokka\nd2\tzebra finch\nd3\tshort\n")
    res = invoke("index", tmp_path / "c.tsv", "--out", tmp_path / "idx", "--model", "ndrm2")
    assert res.exit_code == 0, res.output
    assert res.stderr.strip() == ("note: 1 document longer than the model reads (4,000 terms, with any ORCAS field): "
                                  "terms past that are not indexed for them")
    res = invoke("search", "quokka zebra", "--index", tmp_path / "idx")
    assert res.exit_code == 0 and "d2" in res.stdout and "d1" not in res.stdout
    assert res.stderr.strip() == ("note: in the vocabulary but in no document's postings: quokka (a term only past a "
                                  "document's first 4,000 terms, all the model reads, is not indexed)")
    assert invoke("search", "zebra", "--index", tmp_path / "idx").stderr == ""  # stored terms: no note
    (tmp_path / "more.tsv").write_text(f"e1\t{filler}\ne2\t{filler}\ne3\tshort\n")
    res = invoke("index", tmp_path / "more.tsv", "--append", "--index", tmp_path / "idx")
    assert res.exit_code == 0 and "note: 2 documents longer than the model reads (4,000 terms" in res.stderr, res.output
    m = Manifest.read(tmp_path / "idx")
    assert (m.build["truncated_documents"], m.appends[0]["truncated_documents"]) == (1, 2)


def test_missing_index_is_a_clear_error(tmp_path):
    res = invoke("search", "x", "--index", tmp_path / "nope")
    assert res.exit_code != 0 and "no such index directory" in res.output


COUNTS = [  # (command line before the option, option): every count must be >= 1
    (["index", "CORPUS", "--out", "OUT"], "--shard-size"),
    (["index", "CORPUS", "--out", "OUT"], "--batch-size"),
    (["compact", "--index", "OUT"], "--shard-size"),
    (["search", "x", "--index", "OUT"], "-k"),
    (["search", "x", "--index", "OUT", "--mode", "anytime"], "--budget"),
    (["run", "--index", "OUT", "--queries", "CORPUS", "--out", "run.trec"], "-k"),
    (["run", "--index", "OUT", "--queries", "CORPUS", "--out", "run.trec"], "--threads"),
    (["rerank", "--queries", "CORPUS", "--candidates", "bm25", "--corpus", "CORPUS", "--out", "run.trec"], "--depth"),
    (["train", "--model", "ndrm2", "--corpus", "CORPUS", "--queries", "CORPUS", "--qrels", "CORPUS", "--out", "m.pt"], "--epochs"),
    (["serve", "--index", "OUT"], "--max-k"),
]


@pytest.mark.parametrize(("args", "option"), COUNTS, ids=[f"{a[0]}{o}" for a, o in COUNTS])
@pytest.mark.parametrize("value", ["0", "-3"])
def test_counts_below_one_are_usage_errors(tmp_path, scifact_small, args, option, value):
    out = tmp_path / "idx"
    line = [{"CORPUS": scifact_small, "OUT": out}.get(a, a) for a in args]
    res = invoke(*line, option, value)
    assert res.exit_code == 2, res.output
    assert f"Invalid value for '{option}'" in res.output and "Traceback" not in res.output
    assert not out.exists()


def test_index_built_with_another_model_is_refused(scifact_index, tmp_path):
    from ckqti.models.checkpoint import save_checkpoint
    from ckqti.models.ndrm import NDRMConfig, build_ndrm
    from ckqti.text import Analyzer
    from ckqti.vocab import Vocabulary

    vocab = Vocabulary.build([["white", "matter"], ["cell"]])
    config = NDRMConfig(vocab_size=len(vocab), variant="ndrm2")
    other = save_checkpoint(tmp_path / "m.pt", build_ndrm(config, vocab), "ndrm2", config.to_dict(), vocab, Analyzer())
    assert invoke("search", "white matter", "--index", scifact_index, "--model", "ndrm2").exit_code == 0
    res = invoke("search", "white matter", "--index", scifact_index, "--model", tmp_path / "m.pt")
    assert res.exit_code != 0 and len(res.output.strip().splitlines()) == 1
    assert f"built with model 'ndrm2-untrained', not '{other.id}'" in res.output
    garbage = tmp_path / "garbage.pt"
    garbage.write_bytes(b"not a checkpoint")
    res = invoke("search", "white matter", "--index", scifact_index, "--model", garbage)
    assert res.exit_code != 0 and "garbage.pt" in res.output and len(res.output.strip().splitlines()) == 1


def test_corrupted_shard_is_a_one_line_error(tmp_path, scifact_small):
    out = tmp_path / "idx"
    assert invoke("index", scifact_small, "--out", out, "--model", "ndrm2").exit_code == 0
    f = out / "shard-00000" / "segments.arrow"
    f.write_bytes(f.read_bytes()[:-8] + b"corrupt!")
    res = invoke("search", "white matter", "--index", out)
    assert res.exit_code != 0
    assert res.output.strip().splitlines() == [f"Error: {f}: index file corrupted (checksum mismatch); rebuild the index"]


@pytest.mark.skipif(not DEFAULT_CHECKPOINT.is_file(), reason="no bundled NDRM3 checkpoint")
def small_ndrm3(path, corpus, latent_gate=None):
    """A small random NDRM3 checkpoint over ``corpus``'s vocabulary (dense latent channel unless gated)."""
    import torch

    from ckqti.models.checkpoint import save_checkpoint
    from ckqti.models.ndrm import NDRMConfig, build_ndrm
    from ckqti.text import Analyzer
    from indexer.analyze import analyze_corpus

    vocab = analyze_corpus(corpus, Analyzer()).vocab
    torch.manual_seed(0)
    config = NDRMConfig(vocab_size=len(vocab), variant="ndrm3", dim=16, num_heads=4, conv_window=5, ff_dim=16,
                        mlp_hidden=16, num_layers=1, latent_gate=latent_gate)
    model = build_ndrm(config, vocab).eval()
    with torch.no_grad():
        model.combine.linear.weight.copy_(torch.tensor([[0.5, 1.0]]))
    return save_checkpoint(path, model, "ndrm3", config.to_dict(), vocab, Analyzer())


def test_neighbours_option_sets_a_latent_index_candidates(tmp_path, scifact_small):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(scifact_small.read_text().splitlines(keepends=True)[:40]))
    dense = small_ndrm3(tmp_path / "dense.pt", corpus)
    postings = {}
    for n in (0, 16):
        res = invoke("index", corpus, "--out", tmp_path / f"idx{n}", "--neighbours", n, "--model", dense.path)
        assert res.exit_code == 0, res.output
        m = Manifest.read(tmp_path / f"idx{n}")
        assert m.build["impact_config"]["neighbours"] == n
        postings[n] = m.num_postings
    assert postings[16] > postings[0]  # neighbour terms add latent postings
    res = invoke("index", corpus, "--append", "--index", tmp_path / "idx0", "--neighbours", 8)
    assert res.exit_code == 2 and "--neighbours" in res.output
    # a gated model stores exactly the pairs its gate opens: --neighbours is a usage error, nothing written
    gated = small_ndrm3(tmp_path / "gated.pt", corpus, latent_gate=0.9)
    res = invoke("index", corpus, "--out", tmp_path / "gated", "--neighbours", 16, "--model", gated.path)
    assert res.exit_code == 2 and res.output.startswith("Usage: cli index [OPTIONS] CORPUS\n"), res.output
    assert [line for line in res.output.splitlines() if "gated" in line] == res.output.splitlines()[-1:]
    assert not (tmp_path / "gated").exists()
    res = invoke("index", corpus, "--out", tmp_path / "gated", "--model", gated.path)
    assert res.exit_code == 0, res.output
    assert Manifest.read(tmp_path / "gated").model["latent_gate"] == 0.9


def test_train_loss_options_are_checked_before_any_work(tmp_path):
    """TK's --negatives needs --loss lce; NDRM takes no margin loss: usage errors, nothing written."""
    files = [tmp_path / n for n in ("c.jsonl", "q.jsonl", "r.tsv")]
    for f in files:
        f.write_text("x\n")
    common = ["--corpus", files[0], "--queries", files[1], "--qrels", files[2], "--out", tmp_path / "m.pt"]
    res = invoke("train", "--model", "tk", "--negatives", 4, *common)
    assert res.exit_code == 2 and "--loss lce" in res.output
    res = invoke("train", "--model", "ndrm3", "--loss", "margin", *common)
    assert res.exit_code == 2 and "TK, TKL and IDCM" in res.output
    assert not (tmp_path / "m.pt").exists()


def test_os_errors_and_bad_devices_are_one_line_errors(tmp_path, scifact_index, monkeypatch):
    """A run written onto a directory, a refusal by the operating system (a read-only folder) and a
    device torch does not know or this machine lacks: one line each, no traceback."""
    queries = tmp_path / "q.tsv"
    queries.write_text("q1\twhite matter\n")
    res = invoke("run", "--index", scifact_index, "--queries", queries, "--out", tmp_path)
    assert res.exit_code == 1 and res.output.strip().splitlines() == [f"Error: {tmp_path}: is a directory; a run is written to a file"]

    def refused(*args, **kwargs):
        raise PermissionError(13, "Permission denied", str(tmp_path / "ro" / "run.trec.ckqti-tmp"))

    monkeypatch.setattr(api, "run", refused)
    res = invoke("run", "--index", scifact_index, "--queries", queries, "--out", tmp_path / "ro" / "run.trec")
    assert res.exit_code == 1 and res.output.strip().splitlines() == [
        f"Error: {tmp_path / 'ro' / 'run.trec.ckqti-tmp'}: Permission denied"]
    monkeypatch.undo()
    corpus = tmp_path / "c.tsv"
    corpus.write_text("d1\tthe cat sat\n")
    for device, why in (("bogus", "is not a torch device"), ("cuda:99", "CUDA")):
        res = invoke("index", corpus, "--out", tmp_path / "idx", "--model", "ndrm2", "--device", device)
        assert res.exit_code == 1 and why in res.output and len(res.output.strip().splitlines()) == 1, res.output
    assert not (tmp_path / "idx").exists() and not (tmp_path / "idx.partial").exists()


def test_run_that_retrieves_nothing_says_so(tmp_path, scifact_index):
    queries = tmp_path / "q.tsv"
    queries.write_text("q1\tthe\nq2\tzzzqqq\n")
    res = invoke("run", "--index", scifact_index, "--queries", queries, "--out", tmp_path / "r.trec")
    assert res.exit_code == 0, res.output
    assert "no query retrieved a document; the run file is empty" in res.stderr
    assert "note: 1 query skipped (q1: query 'the' has no searchable terms" in res.stderr
    assert "note: 1 query retrieved nothing (q2: not in the index vocabulary: zzzqqq)" in res.stderr
    assert (tmp_path / "r.trec").read_text() == ""


def test_run_reports_a_slow_rate_in_significant_digits(tmp_path, scifact_index, monkeypatch):
    """A first run after an install compiles the batch kernel: one query in 12 s printed "(0 q/s)"."""
    queries = tmp_path / "q.tsv"
    queries.write_text("q1\tcell\n")
    for searched, seconds, shown in ((1, 12.05, "(0.083 q/s)"), (5, 2.0, "(2.5 q/s)"), (3000, 0.5, "(6,000 q/s)")):
        stats = api.RunStats(queries=searched, searched=searched, seconds=seconds, documents=1)
        monkeypatch.setattr(api, "run", lambda *a, stats=stats, **kw: stats)
        res = invoke("run", "--index", scifact_index, "--queries", queries, "--out", tmp_path / "r.trec")
        assert res.exit_code == 0 and shown in res.output, res.output


def test_run_notes_list_three_queries_then_an_ellipsis(tmp_path, scifact_index, monkeypatch):
    """The notes of a run name the first three queries that retrieved nothing (or were skipped), and
    end with "; ..." only when there were more."""
    queries = tmp_path / "q.tsv"
    queries.write_text("q1\tcell\n")
    for n, ending in ((3, "q3: none)"), (4, "q3: none; ...)")):
        qids = [f"q{i}" for i in range(1, n + 1)]
        stats = api.RunStats(queries=2 * n, searched=n, seconds=1.0, documents=0, skipped=[f"s{i}" for i in range(n)],
                             reasons={f"s{i}": "why" for i in range(n)}, empty=dict.fromkeys(qids, "none"))
        monkeypatch.setattr(api, "run", lambda *a, stats=stats, **kw: stats)
        res = invoke("run", "--index", scifact_index, "--queries", queries, "--out", tmp_path / "r.trec")
        notes = [line for line in res.stderr.splitlines() if "retrieved nothing" in line or "skipped (" in line]
        assert res.exit_code == 0 and len(notes) == 2, res.output
        assert notes[0].endswith("s2: why; ...)" if n > 3 else "s2: why)") and notes[1].endswith(ending), notes


def test_rerank_notes_unknown_words_from_exactly_the_threshold(tmp_path, monkeypatch):
    """The unknown-words note is said from UNKNOWN_WORDS_NOTE of the candidates' words on, not only above it."""
    from ckqti.cli.rerank import UNKNOWN_WORDS_NOTE
    from retriever.rerank import RerankStats

    queries = tmp_path / "q.tsv"
    queries.write_text("q1\tcell\n")
    for share, noted in ((UNKNOWN_WORDS_NOTE, True), (UNKNOWN_WORDS_NOTE / 2, False)):
        stats = RerankStats(queries=1, reranked=1, skipped=(), pairs=3, seconds=0.1, model_id="m", kind="ndrm",
                            candidates="run", out=tmp_path / "r.trec", unknown_words=share)
        monkeypatch.setattr(api, "rerank", lambda *a, stats=stats, **kw: stats)
        res = invoke("rerank", "--queries", queries, "--candidates", "bm25", "--corpus", queries, "--model", "m",
                     "--out", tmp_path / "r.trec")
        assert res.exit_code == 0, res.output
        assert ("as unknown" in res.stderr) == noted, (share, res.stderr)


def test_workers_without_ray_is_a_usage_error_with_or_without_append(tmp_path):
    """--workers sizes a Ray build: `index --append --workers 2` ignored it silently if not refused here."""
    corpus = tmp_path / "c.tsv"
    corpus.write_text("d1\tthe cat sat\n")
    for extra in (["--out", tmp_path / "idx"], ["--append", "--index", tmp_path / "idx"]):
        res = invoke("index", corpus, *extra, "--workers", 2)
        assert res.exit_code == 2 and res.stderr.strip().splitlines()[-1] == "Error: --workers needs --ray", res.output
    assert list(tmp_path.iterdir()) == [corpus]


def test_an_operating_system_refusal_names_the_path_it_concerns(tmp_path, scifact_index, monkeypatch):
    """A rename's error holds both paths: the destination (``filename2``) is the one named; else ``filename``."""
    import errno

    for error, said in ((OSError(errno.EACCES, "Permission denied", "/idx/.tmp-1", None, "/idx/manifest.json"),
                         "Error: /idx/manifest.json: Permission denied"),
                        (OSError(errno.EROFS, "Read-only file system", "/idx/shard"), "Error: /idx/shard: Read-only file system"),
                        (OSError(errno.EIO, "Input/output error"), "Error: [Errno 5] Input/output error")):
        def fail(*args, error=error, **kwargs):
            raise error

        monkeypatch.setattr(api, "info", fail)
        res = invoke("info", "--index", scifact_index)
        assert res.exit_code == 1 and res.output.strip().splitlines() == [said], res.output


def test_info_sizes_change_unit_at_exactly_a_kib_mib_and_gib():
    from ckqti.cli.index import human_bytes

    assert [human_bytes(n) for n in (0, 1023, 1024, 1536, 2**20, 2**30, 5 * 2**30)] == [
        "0 B", "1023 B", "1.0 KiB", "1.5 KiB", "1.0 MiB", "1.0 GiB", "5.0 GiB"]


def test_info_s_clipped_line_names_only_the_parts_that_clipped():
    """Impacts clipped by appends alone have no "0 at build" part; by the build alone, no appended part."""
    from ckqti.cli.index import clipped_line

    assert clipped_line(5, 5) == "clipped     5 impacts stored as 255: 5 appended, above the build's largest"
    assert clipped_line(3, 0) == "clipped     3 impacts stored as 255: 3 at build (forced quantization steps)"
    assert clipped_line(1012, 7) == ("clipped     1,012 impacts stored as 255: 1,005 at build (forced quantization "
                                     "steps); 7 appended, above the build's largest")


def test_eval_rel_level_reaches_the_binary_measures(tmp_path):
    """--rel-level is the grade from which RR, AP, P and R count a document (TREC DL reports 2);
    graded nDCG does not change."""
    (tmp_path / "qrels.txt").write_text("q1 0 d1 1\nq1 0 d2 2\n")
    (tmp_path / "run.trec").write_text("q1 Q0 d1 1 2.0 t\nq1 Q0 d2 2 1.0 t\n")
    one = api.evaluate(tmp_path / "run.trec", tmp_path / "qrels.txt")
    two = api.evaluate(tmp_path / "run.trec", tmp_path / "qrels.txt", rel_level=2)
    assert one.results[0].mean["RR@10"] == 1.0 and two.results[0].mean["RR@10"] == 0.5
    assert one.results[0].mean["nDCG@10"] == two.results[0].mean["nDCG@10"]
    res = invoke("eval", tmp_path / "run.trec", tmp_path / "qrels.txt", "--rel-level", 2)
    assert res.exit_code == 0 and res.stdout == two.table() + "\n"


def test_error_starts_its_own_line_after_an_open_progress_bar(tmp_path, monkeypatch):
    """A command that fails with a progress bar drawn leaves the bar's line finished before its error."""
    import sys

    from tqdm.auto import tqdm

    from ckqti.errors import InputError

    def fails_midway(*args, **kwargs):
        bar = tqdm(total=10, desc="scoring", file=sys.stderr, mininterval=0)
        bar.update(3)
        raise InputError("bad thing", tmp_path / "c.tsv", 7)

    monkeypatch.setattr(api, "info", fails_midway)
    res = invoke("info", "--index", tmp_path)
    assert res.exit_code == 1
    last = res.stderr.splitlines()[-1]
    assert last == f"Error: {tmp_path / 'c.tsv'}:7: bad thing", res.stderr
    assert "scoring" in res.stderr and not list(getattr(tqdm, "_instances", ()))



def test_a_file_cut_short_that_no_reader_names_is_one_line_not_aborted(tmp_path, monkeypatch):
    """click reads an EOFError as a closed terminal and prints only "Aborted!"."""
    def cut_short(*args, **kwargs):
        raise EOFError("Compressed file ended before the end-of-stream marker was reached")

    monkeypatch.setattr(api, "info", cut_short)
    res = invoke("info", "--index", tmp_path)
    assert res.exit_code == 1 and "Aborted" not in res.output
    assert res.output.strip().splitlines() == [
        "Error: a file ended before its data did (Compressed file ended before the end-of-stream marker was reached): "
        "an interrupted download or copy?"]


def test_a_file_cut_short_without_a_message_is_named_by_its_error(tmp_path, monkeypatch):
    """A bare EOFError (as some readers raise it) said "()" where its message would be."""
    def cut_short(*args, **kwargs):
        raise EOFError

    monkeypatch.setattr(api, "info", cut_short)
    res = invoke("info", "--index", tmp_path)
    assert res.exit_code == 1 and res.output.strip().splitlines() == [
        "Error: a file ended before its data did (EOFError): an interrupted download or copy?"]


def test_ctrl_c_is_one_line_and_exit_130(tmp_path, monkeypatch):
    from tqdm.auto import tqdm

    def interrupted(*args, **kwargs):
        tqdm(total=10, desc="scoring", file=sys.stderr, mininterval=0).update(3)
        raise KeyboardInterrupt

    monkeypatch.setattr(api, "info", interrupted)
    res = invoke("info", "--index", tmp_path)
    assert res.exit_code == 130
    assert res.stderr.splitlines()[-1] == "interrupted" and "Traceback" not in res.output
    assert not list(getattr(tqdm, "_instances", ()))


def test_ctrl_c_while_python_shuts_down_shows_no_traceback(tmp_path):
    """A command's work is over once ``main`` returns: a Ctrl-C during the interpreter's shutdown (here
    in an exit handler; in the wild inside torch's finalizers) ends the process as SIGINT does,
    rather than printing the KeyboardInterrupt it raised inside a finalizer and exiting 0."""
    code = ("import atexit, os, signal, sys, time\n"
            "from ckqti.cli import main\n"
            "atexit.register(lambda: (os.kill(os.getpid(), signal.SIGINT), time.sleep(5)))\n"
            "sys.argv = ['ckqti', '--help']\n"
            "main()\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    assert done.returncode == -signal.SIGINT and "Traceback" not in done.stderr, done.stderr
    assert "Usage: ckqti" in done.stdout

# Run as the child of the test below: an import hook holds the first import of HELD (importlib.metadata, for the
# package's version, or click, in the ~0.1 s of imports after start-up) until the test's SIGINT arrives, then starts
# ckqti as `python -m ckqti` (runpy) or as the console script does (`from ckqti.cli import main; main()`).
HELD_IMPORT = """\
import os, runpy, sys, time

class Hold:
    def find_spec(self, name, path=None, target=None):
        if name == os.environ["HELD"]:
            sys.meta_path.remove(self)
            os.write(1, b"importing " + name.encode() + b"\\n")
            time.sleep(120)  # ended by the test's SIGINT, a KeyboardInterrupt inside the import
        return None

sys.meta_path.insert(0, Hold())
sys.argv = ["ckqti", "--help"]
if os.environ["ENTRY"] == "module":
    runpy.run_module("ckqti", run_name="__main__", alter_sys=True)
else:
    from ckqti.cli import main
    main()
"""


@pytest.mark.parametrize("held", ["importlib.metadata", "click"])
@pytest.mark.parametrize("entry", ["module", "script"])
def test_ctrl_c_while_the_command_line_imports_is_one_line_and_exit_130(entry, held):
    """A Ctrl-C in the first ~0.2 s of `python -m ckqti ...` or `ckqti ...`, while the command line's modules are
    imported, printed a KeyboardInterrupt traceback (and ended the process by SIGINT): it is `interrupted` and exit
    130, as a Ctrl-C during the command. Deterministic: the child says when it is inside the import, and only
    then is it sent SIGINT (no timing)."""
    from tests.processes import sigint_from_a_terminal

    child = subprocess.Popen([sys.executable, "-c", HELD_IMPORT], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=dict(os.environ, ENTRY=entry, HELD=held, PYTHONPATH=os.pathsep.join(sys.path)),
                             preexec_fn=sigint_from_a_terminal)
    try:
        assert child.stdout.readline() == f"importing {held}\n".encode()
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=120)
    finally:
        child.kill()
    assert (child.returncode, err.decode(), out) == (130, "interrupted\n", b"")


def test_run_refuses_a_bad_tag_and_an_output_that_is_not_a_run(tmp_path, scifact_index, monkeypatch):
    """Checked before any search: a tag with whitespace, and --out naming a file a run would destroy."""
    queries = tmp_path / "q.tsv"
    queries.write_text("q1\twhite matter\n")

    def no_search(*args, **kwargs):
        raise AssertionError("searched before the checks")

    monkeypatch.setattr(api, "open_searcher", no_search)
    res = invoke("run", "--index", scifact_index, "--queries", queries, "--out", tmp_path / "r.trec", "--tag", "my tag")
    assert res.exit_code == 1 and res.output.strip() == "Error: run tag 'my tag' must be a non-empty string without whitespace"
    manifest = scifact_index / "manifest.json"
    before = manifest.read_bytes()
    for target in (manifest, queries):
        res = invoke("run", "--index", scifact_index, "--queries", queries, "--out", target)
        assert res.exit_code == 1 and res.output.strip() == (
            f"Error: {target}: exists and is not a TREC run; a run replaces only a run file")
    assert manifest.read_bytes() == before and queries.read_text() == "q1\twhite matter\n"
    res = invoke("rerank", "--queries", queries, "--candidates", tmp_path / "nope", "--model", "ndrm2",
                 "--out", tmp_path / "r.trec")
    assert res.exit_code == 1 and "candidates must be 'bm25', an index directory or a TREC run file" in res.output


def test_append_keeps_the_index_batch_size_unless_given(tmp_path, monkeypatch):
    """--append without --batch-size scores with the build's batch size (the API's None), not the flag's 32."""
    from types import SimpleNamespace

    seen = []

    def fake_append(corpus, index_path, model, fmt, orcas, shard_size, batch_size, device, progress=True):
        seen.append(batch_size)
        return SimpleNamespace(appends=[{"num_docs": 1}], num_docs=2, num_postings=3, shards=[1, 2])

    monkeypatch.setattr(api, "append", fake_append)
    corpus = tmp_path / "c.tsv"
    corpus.write_text("d1\tthe cat sat\n")
    for extra, want in (([], None), (["--batch-size", "8"], 8)):
        res = invoke("index", corpus, "--append", "--index", tmp_path, *extra)
        assert res.exit_code == 0 and seen[-1] == want, res.output


def no_api_calls(monkeypatch, *names: str) -> None:
    """The API functions ``names`` fail the test if called: the CLI must refuse before any work."""

    def fail(*args, **kwargs):
        raise AssertionError("the API must not be called")

    for name in names:
        monkeypatch.setattr(api, name, fail)


def test_index_options_that_do_not_apply_are_refused_not_ignored(tmp_path, monkeypatch):
    """--force and --no-resume concern a build of --out, and --index an --append: each given where it does nothing is a
    usage error naming it, before anything is read or written (they were silently ignored)."""
    no_api_calls(monkeypatch, "append", "index")
    corpus = tmp_path / "c.tsv"
    corpus.write_text("d1\tthe cat sat\n")
    for args, option in (([corpus, "--append", "--index", tmp_path, "--force"], "--force"),
                         ([corpus, "--append", "--index", tmp_path, "--no-resume"], "--no-resume"),
                         ([corpus, "--append", "--index", tmp_path, "--ray"], "--ray"),
                         ([corpus, "--out", tmp_path / "new", "--index", tmp_path], "--index")):
        res = invoke("index", *args)
        assert res.exit_code == 2 and option in res.output and "Traceback" not in res.output, res.output
    assert not (tmp_path / "new").exists()


def test_format_without_a_corpus_is_refused_not_ignored(tmp_path, monkeypatch):
    """rerank's and explain's --format is --corpus's format: with only an index or a run to read, a usage error."""
    no_api_calls(monkeypatch, "rerank", "explain")
    queries = tmp_path / "q.tsv"
    queries.write_text("1\tcat\n")
    for args in (("rerank", "--queries", queries, "--candidates", tmp_path, "--model", "ndrm2", "--out",
                  tmp_path / "r.trec", "--format", "tsv"),
                 ("explain", "cat", "d1", "--index", tmp_path, "--format", "jsonl")):
        res = invoke(*args)
        assert res.exit_code == 2 and "--format" in res.output and "--corpus" in res.output, res.output


def test_bm25_candidates_without_a_corpus_are_a_usage_error(tmp_path, monkeypatch):
    """`rerank --candidates bm25` without --corpus is options that do not combine (exit 2, the usage line), as
    --format without --corpus is; it was an input error (exit 1) from inside the API."""
    no_api_calls(monkeypatch, "rerank")
    queries = tmp_path / "q.tsv"
    queries.write_text("1\tcat\n")
    res = invoke("rerank", "--queries", queries, "--candidates", "bm25", "--model", "ndrm2", "--out", tmp_path / "r.trec")
    assert res.exit_code == 2 and "Usage:" in res.output, res.output
    assert res.stderr.strip().splitlines()[-1] == "Error: --candidates bm25 needs --corpus (BM25 searches the corpus file)"
    assert not (tmp_path / "r.trec").exists()


def test_a_reader_that_left_gets_no_error(tmp_path, scifact_index):
    """`ckqti info | head -1`: the closed pipe is not reported as an error of the command."""
    import os
    import subprocess
    import sys

    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before anything is written
    try:
        res = subprocess.run([sys.executable, "-m", "ckqti.cli", "info", "--index", str(scifact_index)],
                             stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write_end)
    assert res.returncode == 1 and res.stderr == "", res.stderr


def test_an_index_still_being_built_is_named(tmp_path):
    (tmp_path / "idx.partial").mkdir()
    res = invoke("search", "cell", "--index", tmp_path / "idx")
    assert res.exit_code == 1 and "an unfinished build is in" in res.output and "idx.partial" in res.output


def test_info_tells_a_running_build_from_an_interrupted_one(tmp_path, scifact_index):
    shutil.copytree(scifact_index, tmp_path / "idx")
    (tmp_path / "idx.partial").mkdir()
    (tmp_path / "idx.lock").write_text(str(os.getpid()))  # a build's lock names its process: this one, alive
    res = invoke("info", "--index", tmp_path / "idx")
    assert res.exit_code == 0 and f"(a build in progress, process {os.getpid()})" in res.output, res.output
    (tmp_path / "idx.lock").unlink()  # none, or a killed build's: interrupted
    assert "(an interrupted build; the same ckqti index command resumes it)" in invoke("info", "--index", tmp_path / "idx").output


def test_orcas_coverage_is_reported_by_index_append_and_info(tmp_path):
    """How many documents ORCAS clicks reached was never said: a file whose docids mostly miss the
    corpus (another id scheme for part of it) looked the same as one covering every document."""
    corpus, more, clicks = tmp_path / "c.tsv", tmp_path / "more.tsv", tmp_path / "orcas.tsv"
    corpus.write_text("D1\tcells divide\nD2\tmembranes hold\nD3\tproteins fold\n")
    more.write_text("D4\tgenes express\nD5\tenzymes bind\n")
    clicks.write_text("D1\tcell division\nD3\tfolding\nD3\tprotein shape\nX9\tnot here\nD5\tbinding\n")
    idx = tmp_path / "idx"
    built = invoke("index", corpus, "--out", idx, "--model", "ndrm2", "--orcas", clicks)
    assert built.exit_code == 0, built.output
    assert "(clicks joined to 2 documents)" in built.stdout
    assert Manifest.read(idx).corpus["orcas_documents"] == 2
    info = invoke("info", "--index", idx)
    assert "with ORCAS clicks from" in info.stdout and "(clicks joined to 2 documents)" in info.stdout
    assert api.info(idx).orcas_documents == 2
    grown = invoke("index", more, "--append", "--index", idx, "--model", "ndrm2", "--orcas", clicks)
    assert grown.exit_code == 0, grown.output
    assert "(clicks joined to 1 document)" in grown.stdout
    plain = invoke("index", corpus, "--out", tmp_path / "plain", "--model", "ndrm2")
    assert "clicks" not in plain.stdout and "orcas_documents" not in Manifest.read(tmp_path / "plain").corpus


def test_info_reports_the_clicks_appends_joined(tmp_path):
    """``info`` named only the build's ORCAS file: an index built without clicks and grown with
    ``index --append --orcas`` showed none at all, and one with clicks at build hid the appends'."""
    corpus, more, again, clicks = (tmp_path / n for n in ("c.tsv", "more.tsv", "again.tsv", "orcas.tsv"))
    corpus.write_text("D1\tcells divide\nD2\tmembranes hold\n")
    more.write_text("D3\tgenes express\nD4\tenzymes bind\n")
    again.write_text("D5\tproteins fold\n")
    clicks.write_text("D1\tcell division\nD3\texpression\nD4\tbinding\nD5\tfolding\n")
    plain, clicked = tmp_path / "plain", tmp_path / "clicked"
    for idx, orcas in ((plain, ()), (clicked, ("--orcas", clicks))):
        assert invoke("index", corpus, "--out", idx, "--model", "ndrm2", *orcas).exit_code == 0
        for grow in (more, again):
            grown = invoke("index", grow, "--append", "--index", idx, "--model", "ndrm2", "--orcas", clicks)
            assert grown.exit_code == 0, grown.output
    shown = invoke("info", "--index", plain)
    assert shown.exit_code == 0 and "with ORCAS clicks" not in shown.stdout
    assert f"clicks      by appends 1, 2 from {clicks} (clicks joined to 3 documents)\n" in shown.stdout
    assert json.loads(invoke("info", "--index", plain, "--json").stdout)["appended_orcas"] == [
        {"append": 1, "orcas": str(clicks), "documents": 2}, {"append": 2, "orcas": str(clicks), "documents": 1}]
    both = invoke("info", "--index", clicked).stdout
    assert f"built from  {corpus} with ORCAS clicks from {clicks} (clicks joined to 1 document)" in both
    assert "(clicks joined to 3 documents); 4 documents with clicks in all\n" in both
    assert (api.info(plain).clicked_documents, api.info(clicked).clicked_documents) == (3, 4)


def test_repeated_orcas_lines_count_once_in_index_append_and_rerank(tmp_path):
    """A repeated ``docid<TAB>query`` line (ORCAS lists each pair once: files joined, a pair written
    twice) weighed its query twice in the field index, append and rerank read; each now drops it
    and says how many it dropped, and reads the same field as from the file without the repeats."""
    corpus, more, queries = tmp_path / "c.tsv", tmp_path / "more.tsv", tmp_path / "q.tsv"
    corpus.write_text("D1\tcells divide\nD2\tmembranes hold\nD3\tproteins fold\n")
    more.write_text("D4\tgenes express\nD5\tenzymes bind\n")
    queries.write_text("q1\tcell division\n")
    once, twice = tmp_path / "once.tsv", tmp_path / "twice.tsv"
    once.write_text("D1\tcell division\nD3\tfolding\nD5\tbinding\n")
    twice.write_text(once.read_text() + "D1\tcell  division\nD5\tbinding\n")
    for clicks in (once, twice):
        built = invoke("index", corpus, "--out", tmp_path / clicks.stem, "--model", "ndrm2", "--orcas", clicks)
        assert built.exit_code == 0, built.output
        grown = invoke("index", more, "--append", "--index", tmp_path / clicks.stem, "--model", "ndrm2", "--orcas",
                       clicks)
        assert grown.exit_code == 0, grown.output
        ranked = invoke("rerank", "--queries", queries, "--candidates", tmp_path / clicks.stem, "--model", "ndrm2",
                        "--corpus", corpus, "--orcas", clicks, "--out", tmp_path / f"{clicks.stem}.trec")
        assert ranked.exit_code == 0, ranked.output
        notes = [r.stderr for r in (built, grown, ranked)]
    assert notes == [f"note: 2 repeated lines of {twice} dropped (a document's clicked query counts once)\n"] * 3
    assert Manifest.read(tmp_path / "twice").corpus["orcas_repeated"] == 2
    stored = {i: [shard.indexed_text(d) for shard in Index(tmp_path / i).shards for d in range(shard.num_docs)]
              for i in ("once", "twice")}
    assert stored["once"] == stored["twice"]
    assert read_run(tmp_path / "once.trec") == read_run(tmp_path / "twice.trec")


def test_python_dash_m_runs_the_cli_and_the_version_has_one_source():
    import subprocess
    import sys
    from importlib.metadata import PackageNotFoundError, version

    import ckqti

    try:
        installed = version("ckqti")
    except PackageNotFoundError:  # a checkout on the path, not installed (the lent GPU machine's tests)
        installed = "0+unknown"
    res = subprocess.run([sys.executable, "-m", "ckqti", "--version"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == f"ckqti, version {installed}" and ckqti.__version__ == installed


def test_stdout_in_an_encoding_without_a_character_gets_an_escape_not_a_traceback(clicked_collection, tmp_path):
    """Where stdout is Latin-1 or CP-1252 (an ISO-8859-1 locale, a Windows pipe), a character it
    lacks (an emoji in an index path or a document) ended `info` and `search` in a UnicodeEncodeError
    traceback; stderr already wrote such characters as escapes."""
    import os
    import shutil
    import subprocess
    import sys

    index = shutil.copytree(clicked_collection["index"], tmp_path / "idx-\U0001f355")
    env = {**os.environ, "PYTHONIOENCODING": "latin-1"}
    res = subprocess.run([sys.executable, "-m", "ckqti", "info", "--index", str(index)], capture_output=True,
                         env=env, timeout=120)
    assert res.returncode == 0 and b"Traceback" not in res.stderr, res.stderr.decode("latin-1")
    assert f"{tmp_path}/idx-\\U0001f355".encode("latin-1") in res.stdout


def test_the_version_of_a_source_tree_run_without_an_install_is_unknown_not_a_traceback():
    """On a lent GPU the checkout runs from PYTHONPATH, not installed: `python -m ckqti --version`
    raised click's RuntimeError "'ckqti' is not installed"."""
    import subprocess
    import sys

    code = ("import importlib.metadata as m\n"
            "def missing(name):\n    raise m.PackageNotFoundError(name)\n"
            "m.version = missing\n"
            "from ckqti.cli import cli\ncli(['--version'])\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "ckqti, version 0+unknown"


def test_cli_messages_helper_26(tmp_path, scifact_index):
    """What a day of use found (helper-26): option errors named the plain word too and exited 1 like an
    input error; a missing file gave exit 2 on some commands and 1 on others; a query's accented words
    were read as other words without a note; a short run's AP@100 looked like a worse ranking."""
    from ckqti.errors import OptionError

    assert OptionError("model is needed with a corpus (with an index, the index's model is the default)",
                       ("model",)).as_flags() == ("--model is needed with a corpus (with an index, the index's model "
                                                  "is the default)")
    assert OptionError("negatives > 1 needs loss lce", ("negatives", "loss")).as_flags() == "--negatives > 1 needs --loss lce"
    gated = invoke("search", "cell", "--index", scifact_index, "--mode", "anytime", "--slack", "0")
    assert gated.exit_code == 2 and "--slack" in gated.output
    neighbours = invoke("index", tmp_path / "c.tsv", "--out", tmp_path / "i", "--model", "ndrm2", "--neighbours", 5)
    assert neighbours.exit_code == 2 and "--neighbours are for dense latent models" in neighbours.output
    for args in (["rerank", "--queries", tmp_path / "nope.tsv", "--candidates", scifact_index, "--model", "ndrm2",
                  "--out", tmp_path / "r.trec"],
                 ["run", "--index", scifact_index, "--queries", tmp_path / "nope.tsv", "--out", tmp_path / "r.trec"],
                 ["explain", "cell", "D1", "--corpus", tmp_path / "nope.tsv", "--model", "ndrm2"]):
        res = invoke(*args)
        assert res.exit_code == 1 and res.output.strip() == f"Error: {tmp_path / 'nope.tsv'}: no such file", args
    accents = invoke("search", "résumé cell 日本", "--index", scifact_index, "-k", 1)
    assert "note: the analyzer reads ASCII letters and digits only: résumé as r sum; 日本 as nothing" in accents.stderr
    assert "analyzer reads" not in invoke("search", "cell", "--index", scifact_index).stderr
    queries = tmp_path / "q.tsv"
    queries.write_text("1\tcell growth\n2\tbrain white matter\n")
    qrels = tmp_path / "qrels.txt"
    docs = [h.docid for h in api.search("cell growth", scifact_index, k=30).hits]
    qrels.write_text("".join(f"1 0 {d} 1\n" for d in docs[15:30]) + "2 0 x 1\n")
    for k in (10, 1000):
        invoke("run", "--index", scifact_index, "--queries", queries, "--out", tmp_path / f"r{k}.trec", "-k", k)
    short = invoke("eval", tmp_path / "r10.trec", qrels, "--compare", tmp_path / "r1000.trec")
    assert ("r10.trec: rankings hold at most 10 documents, the other run's up to 63: AP@100, NCG@100, R@100 count "
            "the rest as not retrieved") in short.output
    assert "rankings hold" not in invoke("eval", tmp_path / "r1000.trec", qrels).output  # alone: nothing to compare


def test_eval_json_markdown_and_measures(tmp_path):
    """eval's --json is one object (per-query values with --per-query, the tests with --compare),
    --markdown the API's markdown table, --measures a subset; an unknown measure is a usage error."""
    qrels, run, other = tmp_path / "qrels.txt", tmp_path / "a.trec", tmp_path / "b.trec"
    qrels.write_text("q1 0 d1 1\nq1 0 d2 2\nq2 0 d3 1\nq3 0 d4 1\n")
    run.write_text("q1 Q0 d1 1 2.0 t\nq1 Q0 d2 2 1.0 t\nq2 Q0 d9 1 1.0 t\nq3 Q0 d4 1 1.0 t\n")
    other.write_text("q1 Q0 d2 1 2.0 t\nq2 Q0 d3 1 1.0 t\nq3 Q0 d8 1 1.0 t\n")
    res = invoke("eval", run, qrels, "--json", "--measures", "nDCG@10, RR@10")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    want = api.evaluate(run, qrels, measures=["nDCG@10", "RR@10"])
    assert out == json.loads(json.dumps(want.to_dict())) and out["measures"] == ["nDCG@10", "RR@10"]
    assert set(out["runs"]["a.trec"]) == {"queries", "nDCG@10", "RR@10"} and "per_query" not in out
    both = json.loads(invoke("eval", run, qrels, "--json", "--per-query", "--compare", other, "--measures", "P@1").stdout)
    assert both["per_query"]["a.trec"] == {"q1": {"P@1": 1.0}, "q2": {"P@1": 0.0}, "q3": {"P@1": 1.0}}
    assert both["per_query"]["b.trec"]["q2"] == {"P@1": 1.0}
    assert [c["measure"] for c in both["comparisons"]] == ["P@1"] and both["comparisons"][0]["t-test"]["n"] == 3
    md = invoke("eval", run, qrels, "--markdown", "--compare", other)
    assert md.exit_code == 0 and md.stdout == api.evaluate(run, qrels, compare=other).table(markdown=True) + "\n"
    assert "| delta (b.trec - a.trec)" in md.stdout
    three = invoke("eval", run, qrels, "--compare", other, "--compare", tmp_path / "c.trec")  # c: none yet
    assert three.exit_code == 1 and "c.trec" in three.output and three.output.count("\n") == 1, three.output
    (tmp_path / "c.trec").write_text("q1 Q0 d2 1 2.0 t\nq2 Q0 d9 1 1.0 t\nq3 Q0 d4 1 1.0 t\n")
    three = invoke("eval", run, qrels, "--compare", other, "--compare", tmp_path / "c.trec")
    assert three.exit_code == 0 and three.stdout == api.evaluate(run, qrels, compare=[other, tmp_path / "c.trec"]).table() + "\n"
    assert "delta (b.trec - a.trec)" in three.stdout and "delta (c.trec - a.trec)" in three.stdout
    trailing = invoke("eval", run, qrels, "--json", "--measures", "nDCG@10, RR@10,")  # a trailing comma names nothing
    assert trailing.exit_code == 0 and json.loads(trailing.stdout) == out, trailing.output
    typed = invoke("eval", run, qrels, "--json", "--measures", "ndcg@10,mrr@10")  # named as above, not as typed
    assert typed.exit_code == 0 and json.loads(typed.stdout) == out, typed.output
    header = invoke("eval", run, qrels, "--measures", "ndcg@010,map").stdout.splitlines()[0]
    assert header.split() == ["run", "queries", "nDCG@10", "AP"], header
    for measures in ("nDCG@10,bogus", "P@10,P@10", ","):
        bad = invoke("eval", run, qrels, "--measures", measures)
        assert bad.exit_code == 2 and "Traceback" not in bad.output, bad.output
        assert len(bad.stderr.strip().splitlines()[-1:]) == 1 and "--measures" in bad.stderr
    assert "use nDCG, RR (MRR), AP (MAP), NCG, P or R" in invoke("eval", run, qrels, "--measures", "bogus").stderr
    assert invoke("eval", run, qrels, "--json", "--markdown").exit_code == 2


@pytest.mark.skipif(not DEFAULT_CHECKPOINT.is_file(), reason="no bundled NDRM3 checkpoint")
def test_the_bundled_model_has_a_short_name(tmp_path):
    """--model ndrm3-scifact is the bundled checkpoint wherever --model is read: index builds what it
    builds by default, search accepts it, rerank and explain score with it."""
    corpus = tmp_path / "c.tsv"
    corpus.write_text("".join(f"d{i}\tcells divide and grow, number {i} of the tissue samples\n" for i in range(30)))
    named, default = tmp_path / "named", tmp_path / "default"
    assert invoke("index", corpus, "--out", named, "--model", "ndrm3-scifact").exit_code == 0
    assert invoke("index", corpus, "--out", default).exit_code == 0
    assert Manifest.read(named).model == Manifest.read(default).model
    assert Manifest.read(named).model["path"] == str(DEFAULT_CHECKPOINT)
    assert invoke("search", "cells", "--index", named, "--model", "ndrm3-scifact").exit_code == 0
    queries = tmp_path / "q.tsv"
    queries.write_text("q1\tcells divide\n")
    res = invoke("rerank", "--queries", queries, "--candidates", named, "--model", "ndrm3-scifact", "--depth", 5,
                 "--out", tmp_path / "r.trec")
    assert res.exit_code == 0 and "reranked by ndrm3-" in res.stdout, res.output
    res = invoke("explain", "cells divide", "d3", "--index", named, "--model", "ndrm3-scifact", "--json")
    assert res.exit_code == 0 and json.loads(res.stdout)["model_id"] == Manifest.read(named).model["id"], res.output


def test_a_model_neither_a_file_nor_a_name_is_one_line(tmp_path, scifact_index):
    queries = tmp_path / "q.tsv"
    queries.write_text("q1\tcells\n")
    for args in (["index", queries, "--out", tmp_path / "i", "--model", "nosuch"],
                 ["search", "cells", "--index", scifact_index, "--model", "nosuch"],
                 ["rerank", "--queries", queries, "--candidates", scifact_index, "--model", "nosuch",
                  "--out", tmp_path / "r.trec"],
                 ["explain", "cells", "d1", "--corpus", queries, "--model", "nosuch"]):
        res = invoke(*args)
        assert res.exit_code == 1 and res.output.strip().splitlines() == [
            "Error: nosuch: model not found: neither a file nor one of 'ndrm2', 'ndrm2-anserini', 'ndrm3-scifact' "
            "(the bundled model) or a checkpoint written by 'ckqti train'"], (args, res.output)
    assert not (tmp_path / "i").exists() and not (tmp_path / "r.trec").exists()


def test_a_model_that_is_a_directory_is_named_as_one(tmp_path, scifact_index):
    """An index given as --model was 'model not found', a path that is there."""
    queries = tmp_path / "q.tsv"
    queries.write_text("q1\tcells\n")
    for args in (["search", "cells", "--index", scifact_index, "--model", scifact_index],
                 ["rerank", "--queries", queries, "--candidates", scifact_index, "--model", scifact_index,
                  "--out", tmp_path / "r.trec"]):
        res = invoke(*args)
        assert res.exit_code == 1 and res.output.strip().splitlines() == [
            f"Error: {scifact_index}: is a directory; a model is 'ndrm2', 'ndrm2-anserini', 'ndrm3-scifact' "
            "(the bundled model) or a checkpoint written by 'ckqti train'"], (args, res.output)
    assert not (tmp_path / "r.trec").exists()


def test_a_search_still_running_after_a_while_says_why_it_may_be(scifact_index, monkeypatch):
    """A first search compiles the kernels for 10-20 s: a note says so, rather than leave a silent
    terminal; a search that returns in time prints none."""
    import time

    import ckqti.cli.search as cli_mod
    from retriever.search import Searcher

    api.open_searcher(scifact_index).search("white matter", 2)  # kernels compiled or loaded: a cold cache takes 10-20 s
    res = invoke("search", "white matter", "--index", scifact_index, "-k", "2")
    assert res.exit_code == 0 and "note: still searching" not in res.stderr

    real = Searcher.search

    def slow(self, *args, **kwargs):
        time.sleep(0.5)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Searcher, "search", slow)
    monkeypatch.setattr(cli_mod, "SLOW_SEARCH_AFTER", 0.05)
    res = invoke("search", "white matter", "--index", scifact_index, "-k", "2")
    assert res.exit_code == 0 and "note:" not in res.stderr, res.stderr  # slow, but with its kernel ready: no news
    monkeypatch.setattr(api, "kernels_compiling", lambda batch=False: not batch)  # as while a first search compiles
    res = invoke("search", "white matter", "--index", scifact_index, "-k", "2")
    assert res.exit_code == 0 and res.stderr.splitlines()[0] == cli_mod.SLOW_SEARCH_NOTE, res.stderr
    assert res.stdout.startswith("  1  ") and "note:" not in res.stdout  # the hits, on stdout alone


def slow_runs(monkeypatch) -> None:
    """``api.run`` half a second slower, and the CLI's slow-start note due after 0.05 s."""
    import time

    import ckqti.cli.search as cli_mod

    real = api.run

    def slow(*args, **kwargs):
        time.sleep(0.5)
        return real(*args, **kwargs)

    monkeypatch.setattr(api, "run", slow)
    monkeypatch.setattr(cli_mod, "SLOW_SEARCH_AFTER", 0.05)


def test_a_first_run_compiling_its_batch_kernel_says_so(tmp_path, scifact_index, monkeypatch):
    """``ckqti run`` compiled its batch kernel for 10-20 s in silence on a first run ("1 query in
    12.05s"); a note says why, and only while that kernel is not ready."""
    import subprocess
    import sys

    import ckqti.cli.search as cli_mod

    fresh = subprocess.run([sys.executable, "-c", "from ckqti import api; print(api.kernels_ready(), api.kernels_ready(True), "
                            "api.kernels_compiling(), api.kernels_compiling(True))"], capture_output=True, text=True, timeout=120)
    assert fresh.stdout.split() == ["False"] * 4, fresh.stderr  # nothing compiled, loaded or compiling before a first search
    queries = tmp_path / "q.tsv"
    queries.write_text("q1\tcell\n")
    slow_runs(monkeypatch)
    for compiling in (True, False):
        monkeypatch.setattr(api, "kernels_compiling", lambda batch=False, compiling=compiling: compiling and batch)
        res = invoke("run", "--index", scifact_index, "--queries", queries, "--out", tmp_path / "r.trec")
        assert res.exit_code == 0 and (cli_mod.SLOW_RUN_NOTE in res.stderr) == compiling, res.stderr
    from retriever.kernel_status import kernels_ready

    assert kernels_ready(batch=True)  # this process has run a batch by now


def test_the_compiling_note_says_when_numba_keeps_the_kernels_nowhere(tmp_path, scifact_index, monkeypatch):
    """From a read-only install beside a home without a writable ~/.cache (found from an installed wheel),
    an anytime search noted that Numba kept the kernels "for later searches", and so did a run, while
    every process compiled them again: there the note says so, and what to do."""
    import time

    import ckqti.cli.search as cli_mod
    from retriever.search import Searcher

    real = Searcher.search

    def slow(self, *args, **kwargs):
        time.sleep(0.5)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Searcher, "search", slow)
    slow_runs(monkeypatch)
    monkeypatch.setattr(api, "kernels_compiling", lambda batch=False: True)
    queries = tmp_path / "q.tsv"
    queries.write_text("q1\tcell\n")
    for kept in (False, True):
        monkeypatch.setattr(api, "kernels_cached", lambda batch=False, kept=kept: kept, raising=False)
        search = invoke("search", "white matter", "--index", scifact_index, "-k", "2")
        run = invoke("run", "--index", scifact_index, "--queries", queries, "--out", tmp_path / "r.trec")
        notes = [res.stderr.splitlines()[0] for res in (search, run)]
        assert (search.exit_code, run.exit_code) == (0, 0) and all(n.startswith("note: ") for n in notes), notes
        assert all(("for later" in n) == kept and ("set NUMBA_CACHE_DIR to a writable folder" in n) != kept
                   for n in notes), (kept, notes)
    assert notes == [cli_mod.SLOW_SEARCH_NOTE, cli_mod.SLOW_RUN_NOTE]


def test_a_slow_run_that_compiles_nothing_says_nothing_of_compiling(tmp_path, scifact_index, monkeypatch):
    """A run slow before its first search (a busy machine, a long queries file) printed the
    compiling note though nothing compiled, even when it then failed on its queries file."""
    from numba import njit

    import retriever.kernel_saat as kernels_mod
    from ckqti.cli.search import SLOW_RUN_NOTE, UNCACHED_RUN_NOTE

    queries = tmp_path / "q.tsv"
    queries.write_text("q1\n")  # no text column: the run fails before any search
    slow_runs(monkeypatch)
    # the control: as slow, while a kernel compiles, the note is said (so the wait above was shortened, and its
    # absence below is the check's, not a wait that never ended)
    with monkeypatch.context() as m:
        m.setattr(api, "kernels_compiling", lambda batch=False: True)
        said = invoke("run", "--index", scifact_index, "--queries", queries, "--out", tmp_path / "r.trec").stderr
        assert SLOW_RUN_NOTE in said or UNCACHED_RUN_NOTE in said, said
    monkeypatch.setattr(kernels_mod, "saat_batch", njit(lambda: 0))  # a batch kernel not yet called, as in a new process
    res = invoke("run", "--index", scifact_index, "--queries", queries, "--out", tmp_path / "r.trec")
    assert res.exit_code == 1 and res.stderr.splitlines() == [
        f"Error: {queries}:1: expected 2 tab-separated columns (qid, text), found 1"], res.stderr


def test_a_compile_that_begins_after_the_wait_is_still_noted(monkeypatch, capsys):
    """A run may read its index and queries for longer than the wait before its kernel starts
    compiling: the note comes when it does, not only if it already did at the wait's end."""
    import threading

    import ckqti.cli.search as cli_mod

    monkeypatch.setattr(cli_mod, "NOTE_POLL", 0.01)
    looks = []
    third = threading.Event()

    def compiling() -> bool:
        looks.append(1)
        if len(looks) >= 3:
            third.set()
        return len(looks) >= 3  # compiling from the third look on

    with cli_mod.note_if_slow(0.01, "note: compiling", compiling):
        assert third.wait(30)
    assert capsys.readouterr().err == "note: compiling\n" and len(looks) == 3


def test_rerank_and_explain_take_orcas_as_the_api_does_and_say_its_errors_as_index_does(clicked_collection, tmp_path):
    """--orcas reaches rerank's and explain's API; a malformed file is the one line ``index --orcas`` gives."""
    corpus, orcas, index = clicked_collection["corpus"], clicked_collection["orcas"], clicked_collection["index"]
    queries = tmp_path / "q.tsv"
    queries.write_text("q1\tcell division\n")
    api.rerank(queries, index, "ndrm2", tmp_path / "api.trec", 6, corpus, orcas=orcas)
    res = invoke("rerank", "--queries", queries, "--candidates", index, "--model", "ndrm2", "--out", tmp_path / "cli.trec",
                 "--depth", 6, "--corpus", corpus, "--orcas", orcas)
    assert res.exit_code == 0, res.output
    assert (tmp_path / "cli.trec").read_text() == (tmp_path / "api.trec").read_text()
    e = api.explain("cell division", "d1", "ndrm2", corpus, orcas=orcas, device="cpu")
    res = invoke("explain", "cell division", "d1", "--model", "ndrm2", "--corpus", corpus, "--orcas", orcas,
                 "--device", "cpu", "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout) == json.loads(json.dumps(e.to_dict())) and e.text.startswith("cell division")
    bad = tmp_path / "bad.tsv"
    bad.write_text("d1\tcell\n\nd2\n")
    errors = [invoke("index", corpus, "--out", tmp_path / "idx", "--model", "ndrm2", "--orcas", bad),
              invoke("rerank", "--queries", queries, "--candidates", index, "--model", "ndrm2", "--out",
                     tmp_path / "r.trec", "--corpus", corpus, "--orcas", bad),
              invoke("explain", "cell", "d1", "--model", "ndrm2", "--corpus", corpus, "--orcas", bad),
              invoke("explain", "cell", "d1", "--index", index, "--orcas", orcas)]
    assert all(r.exit_code == 1 and len(r.output.strip().splitlines()) == 1 for r in errors), [r.output for r in errors]
    assert errors[0].output == errors[1].output == errors[2].output and f"{bad}:3: expected 2 " in errors[0].output
    assert "join the documents of a corpus file (--corpus)" in errors[3].output
    assert not (tmp_path / "idx").exists() and not (tmp_path / "r.trec").exists()


def hits_of(res):
    return [h.docid for h in res.hits], [h.score for h in res.hits]


def test_search_and_run_rank_as_the_api_does_with_the_same_options(tmp_path, scifact_index):
    """--mode, --budget, -k, --channel-weight, --format and --tag each change what search and run return
    as the API's same argument does: a mutant dropping --mode or --budget on its way to the searcher, or
    --mode, --budget, --format or --model of run on their way to the API, passed every other test."""
    q = "white matter diffusion imaging"
    exact = api.search(q, scifact_index, k=5)
    cut = api.search(q, scifact_index, k=5, mode="anytime", budget=5)
    assert hits_of(cut) != hits_of(exact)  # a budget of 5 postings a shard stops this query early
    res = invoke("search", q, "--index", scifact_index, "-k", 5, "--json", "--mode", "anytime", "--budget", 5)
    assert res.exit_code == 0, res.output
    got = json.loads(res.stdout)["hits"]
    assert [h["docid"] for h in got] == hits_of(cut)[0] and [h["score"] for h in got] == pytest.approx(hits_of(cut)[1])

    queries, out = tmp_path / "queries.jsonl", tmp_path / "run.trec"  # TSV under a JSONL name: only --format reads it
    queries.write_text(f"q1\t{q}\nq2\tcancer risk\n")
    res = invoke("run", "--index", scifact_index, "--queries", queries, "--out", out, "-k", 3, "--mode", "anytime",
                 "--budget", 5, "--channel-weight", "idf=2", "--tag", "mine", "--format", "tsv")
    assert res.exit_code == 0, res.output
    rows = [line.split() for line in out.read_text().splitlines()]
    for qid, text in (("q1", q), ("q2", "cancer risk")):
        want = api.search(text, scifact_index, k=3, mode="anytime", budget=5, channel_weights={"idf": 2.0})
        mine = [r for r in rows if r[0] == qid]
        assert [r[2] for r in mine] == hits_of(want)[0] and len(mine) == 3
        assert [float(r[4]) for r in mine] == pytest.approx(hits_of(want)[1], abs=1e-4)
        assert {r[5] for r in mine} == {"mine"}
    assert invoke("run", "--index", scifact_index, "--queries", queries, "--out", out).exit_code == 1  # not JSONL
    for command in (["search", q], ["run", "--queries", queries, "--format", "tsv", "--out", tmp_path / "other.trec"]):
        other = invoke(*command, "--index", scifact_index, "--model", "ndrm2-anserini")  # built with ndrm2
        assert other.exit_code == 1 and "built with model 'ndrm2-untrained'" in other.output, other.output


def test_search_and_run_defaults_are_the_api_defaults(tmp_path, scifact_index):
    """Without -k (or any option) search and run return what the API's defaults return."""
    q = "human protein expression mice role"  # matches hundreds of documents
    res = invoke("search", q, "--index", scifact_index, "--json")
    assert res.exit_code == 0, res.output
    want = api.search(q, scifact_index)
    assert [h["docid"] for h in json.loads(res.stdout)["hits"]] == hits_of(want)[0]
    queries = tmp_path / "q.tsv"
    queries.write_text(f"q1\t{q}\nq2\twhite matter\n")
    assert invoke("run", "--index", scifact_index, "--queries", queries, "--out", tmp_path / "cli.trec").exit_code == 0
    api.run(scifact_index, queries, tmp_path / "api.trec")
    assert (tmp_path / "cli.trec").read_text() == (tmp_path / "api.trec").read_text()
    assert len((tmp_path / "api.trec").read_text().splitlines()) > 300


def test_search_and_run_hand_slack_and_threads_on(tmp_path, scifact_index, monkeypatch):
    """--slack and --threads change no result on a small index (slack prunes on long posting lists,
    threads only share the work), nor does the default --budget: the searcher they reach is looked at."""
    import inspect

    from retriever.search import Searcher

    budget = inspect.signature(api.open_searcher).parameters["budget"].default  # the API's default
    opened, asked = [], []
    open_searcher, topk_columns = api.open_searcher, Searcher.topk_columns
    monkeypatch.setattr(api, "open_searcher", lambda *a, **kw: opened.append(open_searcher(*a, **kw)) or opened[-1])
    monkeypatch.setattr(Searcher, "topk_columns",
                        lambda self, qs, k, threads=1: asked.append(threads) or topk_columns(self, qs, k, threads=threads))
    queries = tmp_path / "q.tsv"
    queries.write_text("q1\tprotein\n")
    for line in (["search", "protein"], ["run", "--queries", queries, "--out", tmp_path / "r.trec", "--threads", 2]):
        res = invoke(*line, "--index", scifact_index, "--mode", "anytime", "--slack", 0.5)
        assert res.exit_code == 0, res.output
        assert (opened[-1].mode, opened[-1].slack, opened[-1].budget) == ("anytime", 0.5, budget)
    assert asked == [2]


def test_eval_qrels_format_reaches_the_reader(tmp_path):
    """Space-separated 3-column qrels are ambiguous: --qrels-format names their third column's meaning
    (BEIR's gain, Cranfield's codes), and eval scores as the API does with that format."""
    qrels, run = tmp_path / "qrels.txt", tmp_path / "run.trec"
    qrels.write_text("q1 d1 1\nq1 d2 2\n")
    run.write_text("q1 Q0 d1 1 2.0 t\nq1 Q0 d2 2 1.0 t\n")
    assert invoke("eval", run, qrels).exit_code == 1  # which one: the reader asks
    for fmt in ("beir", "cranfield"):
        res = invoke("eval", run, qrels, "--qrels-format", fmt)
        assert res.exit_code == 0 and res.stdout == api.evaluate(run, qrels, qrels_format=fmt).table() + "\n", res.output
    beir, cranfield = (api.evaluate(run, qrels, qrels_format=f).results[0].mean["nDCG@10"] for f in ("beir", "cranfield"))
    assert beir != cranfield  # d2 is the better document in BEIR's grades, d1 in Cranfield's codes


def test_index_options_reach_the_build(tmp_path):
    """--format, --shard-size and --batch-size are what the build records, --force replaces an index,
    --no-resume discards an interrupted build, and --append --model is the model appended with (refused
    where it is not the index's): mutants dropping all but --shard-size on the way to the API passed every test."""
    corpus, out = tmp_path / "corpus.jsonl", tmp_path / "idx"  # TSV under a JSONL name: only --format reads it
    corpus.write_text("".join(f"d{i}\tcell {i} protein matter\n" for i in range(5)))
    args = ("index", corpus, "--out", out, "--model", "ndrm2", "--format", "tsv", "--shard-size", 2, "--batch-size", 3)
    res = invoke(*args)
    assert res.exit_code == 0, res.output
    m = Manifest.read(out)
    assert [s.num_docs for s in m.shards] == [2, 2, 1] and m.build["impact_config"]["batch_size"] == 3
    assert m.corpus["format"] == "tsv"
    again = invoke(*args)
    assert again.exit_code == 1 and "--force" in again.output, again.output
    assert invoke(*args, "--force").exit_code == 0
    (tmp_path / "new.partial").mkdir()  # what an interrupted build of other inputs left
    (tmp_path / "new.partial" / "FINGERPRINT").write_text("another build")
    res = invoke("index", corpus, "--out", tmp_path / "new", "--model", "ndrm2", "--format", "tsv", "--no-resume")
    assert res.exit_code == 0 and "(asked not to resume): starting over" in res.output, res.output
    other = invoke("index", corpus, "--append", "--index", out, "--format", "tsv", "--model", "ndrm2-anserini")
    assert other.exit_code == 1 and "append with its model" in other.output, other.output


def test_queries_format_reads_run_and_rerank_queries_whatever_their_name(tmp_path, scifact_index):
    """--queries-format is the queries file's format in run and rerank (train's: test_cli_train.py): rerank could
    not read a queries file under another format's name at all, and run's --format, the corpus's in index,
    rerank, train and explain, was the queries' there; it stays run's hidden old name of --queries-format."""
    queries = tmp_path / "queries.jsonl"  # TSV under a JSONL name: only a format option reads it
    queries.write_text("q1\thuman protein expression mice role\nq2\tcancer risk\n")
    run = ("run", "--index", scifact_index, "--queries", queries, "-k", 3)
    api.run(scifact_index, queries, tmp_path / "api.trec", k=3, fmt="tsv")
    for name, options in (("new", ["--queries-format", "tsv"]), ("old", ["--format", "tsv"]),
                          ("both", ["--format", "tsv", "--queries-format", "tsv"])):
        res = invoke(*run, "--out", tmp_path / f"{name}.trec", *options)
        assert res.exit_code == 0, (options, res.output)
        assert (tmp_path / f"{name}.trec").read_text() == (tmp_path / "api.trec").read_text() != ""
    both = invoke(*run, "--out", tmp_path / "r.trec", "--format", "jsonl", "--queries-format", "tsv")
    assert both.exit_code == 2 and "Usage:" in both.output and not (tmp_path / "r.trec").exists(), both.output
    assert both.stderr.strip().splitlines()[-1] == ("Error: --format is the old name of --queries-format: "
                                                    "give one (here jsonl and tsv)")
    shown = invoke("run", "--help").output
    assert "--queries-format [tsv|jsonl|trec|smart]" in shown and "--format" not in shown

    rerank = ("rerank", "--queries", queries, "--candidates", scifact_index, "--model", "ndrm2", "--depth", 4)
    res = invoke(*rerank, "--out", tmp_path / "cli.trec", "--queries-format", "tsv")
    assert res.exit_code == 0, res.output
    api.rerank(queries, scifact_index, "ndrm2", tmp_path / "api-rr.trec", 4, queries_format="tsv")
    assert (tmp_path / "cli.trec").read_text() == (tmp_path / "api-rr.trec").read_text() != ""
    unread = invoke(*rerank, "--out", tmp_path / "none.trec")  # read as JSONL, its name's format
    assert unread.exit_code == 1 and "bad JSON" in unread.output, unread.output


def test_rerank_options_reach_the_reranker(tmp_path, scifact_index):
    """--depth, --max-doc-length and --tag change rerank's run as the API's same arguments do."""
    queries = tmp_path / "q.tsv"
    queries.write_text("q1\thuman protein expression mice role\nq2\tcancer risk\n")
    res = invoke("rerank", "--queries", queries, "--candidates", scifact_index, "--model", "ndrm2", "--out",
                 tmp_path / "cli.trec", "--depth", 4, "--max-doc-length", 5, "--tag", "mine")
    assert res.exit_code == 0, res.output
    api.rerank(queries, scifact_index, "ndrm2", tmp_path / "api.trec", 4, max_doc_length=5, tag="mine")
    api.rerank(queries, scifact_index, "ndrm2", tmp_path / "plain.trec", 4)
    got = (tmp_path / "cli.trec").read_text()
    assert got == (tmp_path / "api.trec").read_text() and len(got.splitlines()) == 8
    plain = [line.split()[2:5] for line in (tmp_path / "plain.trec").read_text().splitlines()]
    assert [line.split()[2:5] for line in got.splitlines()] != plain  # 5 tokens a document rank differently


@pytest.mark.skipif(not DEFAULT_CHECKPOINT.is_file(), reason="no bundled NDRM3 checkpoint")
def test_explain_adapt_vocabulary_and_format_reach_the_model(tmp_path):
    """explain --adapt-vocabulary reads the corpus's words the checkpoint lacks (its score is the API's
    with adapt_vocabulary, not the score without), and --format reads a corpus whose name says otherwise."""
    corpus = tmp_path / "corpus.jsonl"  # TSV under a JSONL name: only --format reads it
    corpus.write_text("d1\tthe zyxwvut protein binds cancer cells\nd2\tother text here\n")
    query = "zyxwvut protein"
    res = invoke("explain", query, "d1", "--model", "ndrm3-scifact", "--corpus", corpus, "--format", "tsv",
                 "--adapt-vocabulary", "--json")
    assert res.exit_code == 0, res.output
    adapted = api.explain(query, "d1", "ndrm3-scifact", corpus, fmt="tsv", adapt_vocabulary=True).score
    plain = api.explain(query, "d1", "ndrm3-scifact", corpus, fmt="tsv").score
    assert json.loads(res.stdout)["score"] == pytest.approx(adapted) and adapted != pytest.approx(plain)


def test_explain_max_doc_length_explains_the_score_rerank_gave_with_it(tmp_path):
    """explain --max-doc-length reads as many document tokens as rerank's option (it had none: a long
    document reranked with --max-doc-length could not be explained at that score)."""
    corpus, queries, run = tmp_path / "c.tsv", tmp_path / "q.tsv", tmp_path / "cands.trec"
    corpus.write_text("d1\tprotein binds cancer cells in mice lungs\nd2\tother protein text here\n"
                      "d3\tcell division\nd4\tbone fractures\n")
    queries.write_text("q1\tmice lungs\n")
    run.write_text("q1 Q0 d1 1 2.0 x\nq1 Q0 d2 2 1.0 x\n")
    reranked = invoke("rerank", "--queries", queries, "--candidates", run, "--corpus", corpus, "--model", "ndrm2",
                      "--out", tmp_path / "r.trec", "--max-doc-length", 3)
    assert reranked.exit_code == 0, reranked.output
    score = {line.split()[2]: float(line.split()[4]) for line in (tmp_path / "r.trec").read_text().splitlines()}["d1"]
    res = invoke("explain", "mice lungs", "d1", "--model", "ndrm2", "--corpus", corpus, "--max-doc-length", 3, "--json")
    assert res.exit_code == 0, res.output
    got = json.loads(res.stdout)
    assert got["tokens_read"] == 3 and got["score"] == pytest.approx(score)
    assert got["score"] != pytest.approx(api.explain("mice lungs", "d1", "ndrm2", corpus).score)  # the words past 3


def test_explain_json_with_html_says_where_the_page_went_on_stderr(tmp_path):
    """explain --json --html wrote the page without the "wrote PAGE" note the terminal report gives;
    the note goes to stderr, so stdout stays one JSON object."""
    corpus, page = tmp_path / "c.tsv", tmp_path / "page.html"
    corpus.write_text("d1\tprotein binds cancer cells in mice lungs\nd2\tbone fractures\n")
    res = CliRunner().invoke(cli, ["explain", "mice lungs", "d1", "--model", "ndrm2", "--corpus", str(corpus), "--json",
                                   "--html", str(page)])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["docid"] == "d1" and page.is_file()
    assert res.stderr.splitlines()[-1] == f"wrote {page}"


@pytest.mark.skipif(not DEFAULT_CHECKPOINT.is_file(), reason="no bundled NDRM3 checkpoint")
def test_rerank_adapt_vocabulary_reaches_the_reranker(tmp_path):
    """rerank --adapt-vocabulary reads a word the checkpoint lacks (the run is the API's with
    adapt_vocabulary, its scores not those without)."""
    corpus, queries, run = tmp_path / "c.tsv", tmp_path / "q.tsv", tmp_path / "cands.trec"
    corpus.write_text("d1\tthe zyxwvut protein binds cancer cells\nd2\tother protein text here\n")
    queries.write_text("q1\tzyxwvut protein\n")
    run.write_text("q1 Q0 d1 1 2.0 x\nq1 Q0 d2 2 1.0 x\n")
    res = invoke("rerank", "--queries", queries, "--candidates", run, "--corpus", corpus, "--model", "ndrm3-scifact",
                 "--out", tmp_path / "cli.trec", "--adapt-vocabulary")
    assert res.exit_code == 0, res.output
    api.rerank(queries, str(run), "ndrm3-scifact", tmp_path / "api.trec", corpus=corpus, adapt_vocabulary=True)
    api.rerank(queries, str(run), "ndrm3-scifact", tmp_path / "plain.trec", corpus=corpus)
    got = (tmp_path / "cli.trec").read_text()
    assert got == (tmp_path / "api.trec").read_text() and len(got.splitlines()) == 2

    def scores(path):
        return [float(line.split()[4]) for line in path.read_text().splitlines()]

    assert scores(tmp_path / "cli.trec") != pytest.approx(scores(tmp_path / "plain.trec"))
    assert "as unknown" not in res.stderr


def test_rerank_says_when_the_model_reads_many_words_as_unknown(tmp_path):
    """The bundled NDRM3 reranking another collection reads its new words as unknown (Cranfield: 10% of them,
    nDCG@10 0.310 against 0.341 adapted) and nothing said so: a note gives the share and the option."""
    corpus, queries, run = tmp_path / "c.tsv", tmp_path / "q.tsv", tmp_path / "cands.trec"
    corpus.write_text("d1\tthe zyxwvut protein binds cancer cells\nd2\tother protein qwertzu text here\n"
                      "d3\tprotein cells\n")
    queries.write_text("q1\tzyxwvut protein\n")
    run.write_text("q1 Q0 d1 1 2.0 x\nq1 Q0 d2 2 1.0 x\n")
    res = invoke("rerank", "--queries", queries, "--candidates", run, "--corpus", corpus, "--model", "ndrm3-scifact",
                 "--out", tmp_path / "plain.trec")
    assert res.exit_code == 0 and "note: the model read 25% of the candidates' words as unknown" in res.stderr, res.output
    assert "--adapt-vocabulary" in res.stderr  # d1: 1 of 5 words (the: a stopword), d2: 1 of 3 (other, here too)
    stats = api.rerank(queries, str(run), "ndrm3-scifact", tmp_path / "api.trec", corpus=corpus)
    assert stats.unknown_words == pytest.approx(2 / 8)
    known = tmp_path / "known.tsv"
    known.write_text("d1\tprotein binds cancer cells\nd2\tother protein text here\n")
    res = invoke("rerank", "--queries", queries, "--candidates", run, "--corpus", known, "--model", "ndrm3-scifact",
                 "--out", tmp_path / "known.trec")
    assert res.exit_code == 0 and "unknown" not in res.stderr, res.output


def test_the_default_index_serves_the_briefs_commands(tmp_path, monkeypatch):
    """`ckqti index corpus.tsv` then `ckqti search "..."` with no paths: ./ckqti-index, or $CKQTI_INDEX;
    --index names another; every --index command and --append read the same default."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CKQTI_INDEX", raising=False)
    (tmp_path / "corpus.tsv").write_text("d1\taziz hashim opened a restaurant\nd2\tcells divide\nd3\tproteins fold\n")
    (tmp_path / "more.tsv").write_text("d4\thashim cooks rice\n")
    built = invoke("index", "corpus.tsv", "--model", "ndrm2")
    assert built.exit_code == 0 and built.output.strip().endswith("-> ckqti-index"), built.output
    assert (tmp_path / "ckqti-index" / "manifest.json").is_file()
    found = invoke("search", "who is aziz hashim", "--json")
    assert found.exit_code == 0 and [h["docid"] for h in json.loads(found.stdout)["hits"]] == ["d1"], found.output
    assert invoke("index", "more.tsv", "--append").exit_code == 0
    assert json.loads(invoke("info", "--json").stdout)["num_docs"] == 4
    assert invoke("compact").exit_code == 0 and len(json.loads(invoke("info", "--json").stdout)["shards"]) == 1
    (tmp_path / "q.tsv").write_text("1\taziz\n2\trice\n")
    assert invoke("run", "--queries", "q.tsv", "--out", "r.trec").exit_code == 0
    assert {line.split()[2] for line in (tmp_path / "r.trec").read_text().splitlines()} == {"d1", "d4"}

    monkeypatch.setenv("CKQTI_INDEX", str(tmp_path / "env-index"))
    assert invoke("index", "more.tsv", "--model", "ndrm2").exit_code == 0
    assert json.loads(invoke("info", "--json").stdout)["num_docs"] == 1  # the environment's index
    assert json.loads(invoke("info", "--json", "--index", "ckqti-index").stdout)["num_docs"] == 4  # --index wins


def test_a_missing_default_index_says_how_to_make_one(tmp_path, monkeypatch):
    """No index named and none at the default: one line naming the default and `ckqti index`, not a bare
    'no such index directory' for a path the user never typed; an unfinished build there is still named."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CKQTI_INDEX", raising=False)
    for args in (("search", "cells"), ("info",), ("compact",), ("run", "--queries", "q.tsv", "--out", "r.trec"),
                 ("index", "c.tsv", "--append")):
        res = invoke(*args)
        assert res.exit_code == 1 and res.output.count("\n") == 1, (args, res.output)
        assert "ckqti-index: no such index directory (the default index" in res.output and "ckqti index CORPUS" in res.output
    (tmp_path / "ckqti-index.partial").mkdir()
    res = invoke("search", "cells")
    assert res.exit_code == 1 and "an unfinished build is in" in res.output, res.output


def test_a_missing_required_option_is_said_before_a_missing_default_index(tmp_path, monkeypatch):
    """`ckqti run` alone, as a new user types it to see what it needs: click's usage error naming the missing
    option (exit 2), not the missing default index (exit 1), which the --index callback said first."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CKQTI_INDEX", raising=False)
    for args, missing in ((("run",), "--queries"), (("run", "--queries", "q.tsv"), "--out")):
        res = invoke(*args)
        assert res.exit_code == 2 and f"Error: Missing option '{missing}'." in res.output, (args, res.output)
        assert "run [OPTIONS]" in res.output and "no such index directory" not in res.output


def test_dash_h_is_help_on_the_group_and_every_command():
    """-h is --help, as in most command-line tools (click's default refused it: "No such option '-h'")."""
    for args in ((), *((name,) for name in sorted(cli.commands))):
        short, long = invoke(*args, "-h"), invoke(*args, "--help")
        assert short.exit_code == 0 and short.output == long.output, (args, short.output)


def test_a_leading_tilde_in_a_path_is_the_home_folder(tmp_path, monkeypatch):
    """`--out=~/idx`, a quoted "~/idx" and CKQTI_INDEX="~/idx" reach ckqti unexpanded (the shell expands
    ~ only at a word's start): the build wrote a folder named ~ in the working directory and said
    '-> ~/idx', as if it were the home folder's."""
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    (home / "c.tsv").write_text("d1\tcells divide\nd2\tmembranes hold\nd3\tproteins fold\nd4\tgenes copy\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(work)
    res = invoke("index", "~/c.tsv", "--out=~/idx", "--model", "ndrm2")
    assert res.exit_code == 0, res.output
    assert res.output.rstrip().endswith(f"-> {home / 'idx'}") and Manifest.read(home / "idx").num_docs == 4
    monkeypatch.setenv("CKQTI_INDEX", "~/idx")
    assert invoke("search", "cells").stdout.split()[:2] == ["1", "d1"]
    assert list(work.iterdir()) == []
    # --model and --candidates take a name or a path; a path's ~ is the home folder too
    (home / "q.tsv").write_text("q1\tcells\n")
    rr = ["rerank", "--queries", "~/q.tsv", "--corpus", "~/c.tsv", "--out", "~/rr.trec"]
    assert f"Error: {home / 'missing.pt'}: model not found" in invoke(*rr, "--candidates", "bm25", "--model=~/missing.pt").output
    assert f"Error: {home / 'nope.trec'}: candidates must be" in invoke(*rr, "--candidates=~/nope.trec", "--model", "ndrm2").output
    assert str(home / "e.pt") in invoke("train", "--model", "ndrm3", "--corpus", "~/c.tsv", "--queries", "~/q.tsv", "--qrels",
                                        "~/q.tsv", "--out", "~/m.pt", "--embeddings=~/e.pt").output
    assert f"Error: {home / 'm.pt'}" in invoke("search", "cells", "--model=~/m.pt").output


def test_help_reads_whole_at_80_columns():
    """`ckqti --help` listed 7 of its 10 commands cut mid-sentence ("Merge an index's consecutive shards into
    fewer (no rescoring;..."), and the options showed click's type names: `-k INTEGER RANGE`, `--slack FLOAT
    RANGE`, `--model TEXT`, `--device TEXT` (and `-k abc` said "'abc' is not a valid integer range")."""
    top = CliRunner().invoke(cli, ["--help"], terminal_width=80)
    listed = top.output.split("Commands:")[1].splitlines()[1:]
    assert len(listed) == len(cli.commands) and all(len(line) <= 80 for line in top.output.splitlines())
    assert not [line for line in listed if line.rstrip().endswith(("...", ";", ","))], listed
    for name in sorted(cli.commands):
        shown = CliRunner().invoke(cli, [name, "--help"], terminal_width=80).output
        assert " RANGE" not in shown and not {"--model TEXT", "--candidates TEXT", "--device TEXT"} & set(
            " ".join(line.split()[:2]) for line in shown.splitlines()), (name, shown)
    bad = invoke("search", "cell", "-k", "abc")
    assert bad.exit_code == 2 and bad.output.splitlines()[-1] == "Error: Invalid value for '-k': 'abc' is not a valid integer."


def test_explain_help_names_no_color():
    """The colours' default also depends on $NO_COLOR (docs/INSTALL.md: "else set NO_COLOR"): the help said only 'when
    stdout is a terminal'."""
    assert "NO_COLOR" in invoke("explain", "--help").output


def test_a_channel_weight_out_of_range_is_a_usage_error(scifact_index):
    """`--channel-weight idf=1e7` or `idf=-1` is a bad option value, as `--slack 0` is (exit 2, before the
    index is opened); it exited 1 from the searcher's check."""
    for w, says in (("1e7", "must be 0 or between 1e-06 and 1e+06"), ("-1", "must be a finite number >= 0"),
                    ("1e-7", "must be 0 or between 1e-06 and 1e+06")):
        for line in (["search", "cell"], ["run", "--queries", "q.tsv", "--out", "r.trec"], ["serve"]):
            res = invoke(*line, "--index", scifact_index, "--channel-weight", f"idf={w}")
            assert res.exit_code == 2 and says in res.output.splitlines()[-1], (w, line, res.output)
    assert invoke("search", "cell", "--index", scifact_index, "--channel-weight", "idf=1e6").exit_code == 0


def test_a_dash_for_an_output_is_refused_not_a_file_named_dash(tmp_path, scifact_index, monkeypatch):
    """`ckqti run ... --out -` wrote a file named '-' in the working directory and said '-> -', as if to
    standard output; every output ckqti writes is a file or a folder, so '-' is a usage error (./- names a
    file called -)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "q.tsv").write_text("q1\tcell membrane\n")
    for line in (["run", "--index", scifact_index, "--queries", "q.tsv", "--out", "-"],
                 ["index", "q.tsv", "--out", "-"],
                 ["rerank", "--queries", "q.tsv", "--candidates", scifact_index, "--model", "ndrm2", "--out", "-"],
                 ["train", "--corpus", "q.tsv", "--queries", "q.tsv", "--qrels", "q.tsv", "--out", "-"],
                 ["explain", "cell", "4983", "--index", scifact_index, "--html", "-"]):
        res = invoke(*line)
        assert res.exit_code == 2 and "standard output" in res.output.splitlines()[-1], (line, res.output)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["q.tsv"]
    res = invoke("run", "--index", scifact_index, "--queries", "q.tsv", "--out", "./-", "-k", 3)
    assert res.exit_code == 0 and len((tmp_path / "-").read_text().splitlines()) == 3, res.output


def test_quiet_leaves_only_errors_on_stderr(tmp_path, monkeypatch):
    """``-q/--quiet`` (index and --append, search, run, rerank, explain): no progress bar, note or ``wrote FILE`` on
    stderr, each of which the same command without it prints here; stdout as without it; an error is still one line
    (exit 1), a usage error still says its usage (exit 2)."""
    import re

    monkeypatch.setattr("ckqti.progress.on_terminal", lambda stream=None: True)  # bars drawn, as on a terminal
    filler = " ".join(f"w{i % 3000}" for i in range(4400))  # past the 4,000 terms the model reads: a note
    (tmp_path / "c.tsv").write_text(f"d1\t{filler} quokka\nd2\tzebra finch\nd3\tshort cell\n")
    (tmp_path / "more.tsv").write_text(f"e1\t{filler}\ne2\tfinch song\n")
    queries = tmp_path / "q.tsv"
    queries.write_text("q1\tzebra finch\nq2\tqqzzxx\n")  # q2: no known word (run retrieves nothing, rerank skips it)
    idx = tmp_path / "idx"
    pairs = {}
    for name, out in (("loud", tmp_path / "loud"), ("quiet", idx)):
        flag = ["-q"] if name == "quiet" else []
        pairs.setdefault("index", []).append(invoke("index", tmp_path / "c.tsv", "--out", out, "--model", "ndrm2", *flag))
        pairs.setdefault("append", []).append(invoke("index", tmp_path / "more.tsv", "--append", "--index", out, *flag))
    commands = {
        "search": ["search", "zebra qqzzxx", "--index", idx],
        "run": ["run", "--index", idx, "--queries", queries, "--out", tmp_path / "r.trec"],
        "rerank": ["rerank", "--queries", queries, "--candidates", idx, "--model", "ndrm2", "--out", tmp_path / "rr.trec",
                   "--depth", 3],
        "explain": ["explain", "zebra finch", "d2", "--index", idx, "--html", tmp_path / "e.html", "--device", "cpu"],
    }
    for name, args in commands.items():
        pairs[name] = [invoke(*args), invoke(*args, "--quiet")]
    timings = re.compile(r"\d[\d.,]*")  # run's and rerank's seconds and rates
    for name, (loud, quiet) in pairs.items():
        assert loud.exit_code == quiet.exit_code == 0, (name, loud.output, quiet.output)
        assert loud.stderr and quiet.stderr == "", (name, loud.stderr, quiet.stderr)
        assert timings.sub("N", quiet.stdout.replace(str(idx), str(tmp_path / "loud"))) == timings.sub("N", loud.stdout), name
    assert "impacts" in pairs["index"][0].stderr and "rerank" in pairs["rerank"][0].stderr  # the bars were drawn
    assert pairs["explain"][0].stderr == f"wrote {tmp_path / 'e.html'}\n"
    error = invoke("search", "the of and", "--index", idx, "-q")
    assert error.exit_code == 1 and len(error.stderr.splitlines()) == 1 and "no searchable terms" in error.stderr, error.output
    usage = invoke("run", "--index", idx, "-q")
    assert usage.exit_code == 2 and "run [OPTIONS]" in usage.stderr and "Missing option '--queries'" in usage.stderr


def test_quiet_silences_the_slow_start_note_said_from_another_thread(tmp_path, scifact_index, monkeypatch):
    """The compiling note of a slow run is printed by a watcher thread, outside click's context: it reads the command's
    ``--quiet`` all the same."""
    import ckqti.cli.search as cli_mod

    queries = tmp_path / "q.tsv"
    queries.write_text("q1\tcell\n")
    slow_runs(monkeypatch)
    monkeypatch.setattr(api, "kernels_compiling", lambda batch=False: batch)
    loud = invoke("run", "--index", scifact_index, "--queries", queries, "--out", tmp_path / "r.trec")
    quiet = invoke("run", "--index", scifact_index, "--queries", queries, "--out", tmp_path / "r.trec", "-q")
    assert loud.exit_code == quiet.exit_code == 0
    assert cli_mod.SLOW_RUN_NOTE in loud.stderr and quiet.stderr == "", quiet.stderr
