"""TREC run files: order, exact round trip, gzip, and errors naming file and line."""

from __future__ import annotations

import gzip
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ckqti.errors import InputError
from ckqti.evaluate import evaluate
from indexer.readers.formats import open_binary
from retriever.runs import ARROW_LINES, check_run_path, read_run, trec_order, write_ranked_run, write_run


def test_trec_order_breaks_ties_by_docid_descending():
    assert trec_order({"a": 1.0, "c": 1.0, "b": 2.0, "d": 0.5}) == [("b", 2.0), ("c", 1.0), ("a", 1.0), ("d", 0.5)]
    assert trec_order([("9", 1.0), ("10", 1.0)]) == [("9", 1.0), ("10", 1.0)]  # string order, as trec_eval's strcmp


def test_trec_order_compares_scores_in_single_precision_as_trec_eval():
    """trec_eval reads a score into a C float: scores that differ only beyond it tie, and the docid
    decides; the pairs keep the scores as given. Past a float's range every score is infinite there."""
    assert trec_order({"a": 1.0000000001, "b": 1.0, "c": 1.0000001}) == [("c", 1.0000001), ("b", 1.0),
                                                                         ("a", 1.0000000001)]
    assert trec_order({"a": 2e39, "b": 1e39, "c": -1e39}) == [("b", 1e39), ("a", 2e39), ("c", -1e39)]
    assert trec_order([]) == []


def test_write_run_lines(tmp_path):
    path = tmp_path / "sub" / "r.run"
    write_run(path, {"q2": [("d1", 0.5), ("d3", 2.0), ("d2", 0.5)], "q1": {"x": 1}}, tag="mytag")
    assert path.read_text().splitlines() == [
        "q2 Q0 d3 1 2.0 mytag",
        "q2 Q0 d2 2 0.5 mytag",
        "q2 Q0 d1 3 0.5 mytag",
        "q1 Q0 x 1 1.0 mytag",
    ]
    assert [p.name for p in path.parent.iterdir()] == ["r.run"]  # no temporary file left


def test_round_trip_is_exact(tmp_path):
    scores = {"q1": [("a", 0.1 + 0.2), ("b", float(np.float32(1 / 3))), ("c", -1e-300)], "q2": [("a", 123456789.125)]}
    for name in ("r.run", "r.run.gz"):
        write_run(tmp_path / name, scores, tag="t")
        assert read_run(tmp_path / name) == {q: dict(docs) for q, docs in scores.items()}
    with gzip.open(tmp_path / "r.run.gz", "rt") as stream:
        assert stream.readline().split()[2] == "b"  # 1/3 > 0.1 + 0.2


def test_written_ranks_are_the_ones_evaluated(tmp_path):
    """With ties, trec_eval reorders by docid descending; the file's rank column must agree."""
    path = tmp_path / "t.run"
    write_run(path, {"q": [("rel", 1.0), ("zzz", 1.0), ("mmm", 1.0)]}, tag="t")
    rank = next(int(line.split()[3]) for line in path.read_text().splitlines() if line.split()[2] == "rel")
    assert rank == 2  # zzz, rel, mmm
    assert evaluate(read_run(path), {"q": {"rel": 1}}, ["RR@10"]).mean["RR@10"] == pytest.approx(1 / rank)


@pytest.mark.parametrize(
    "results, tag",
    [
        ({"q": [("d 1", 1.0)]}, "t"),
        ({"q 1": [("d", 1.0)]}, "t"),
        ({"q": [("d", 1.0)]}, "my tag"),
        ({"q": [("d", float("nan"))]}, "t"),
        ({"q": [("d", 1.0), ("d", 2.0)]}, "t"),
        ({"q": [("d\t1", 1.0)]}, "t"),  # a tab or a newline splits the line as a space does
        ({"q\n": [("d", 1.0)]}, "t"),
        ({"q": [("d", 1.0)]}, "my\ttag"),
    ],
)
def test_write_run_rejects_bad_results(tmp_path, results, tag):
    with pytest.raises(ValueError):
        write_run(tmp_path / "r.run", results, tag)
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("results, tag, message", [
    ({"q": [("d 1", 1.0)]}, "t", "docid 'd 1' must be a non-empty string without whitespace"),
    ({"q": [("d", 1.0)]}, "my tag", "run tag 'my tag' must be a non-empty string without whitespace"),
    ({"q": [("d", float("nan"))]}, "t", "score nan of query 'q', doc 'd' is not finite"),
    ({"q": {"d": "high"}}, "t", "query 'q': a ranking is {docid: score} or [(docid, score), ...] with numbers as "
                                "scores (could not convert string to float: 'high')"),
    ({"q": {"d": None}}, "t", "query 'q': a ranking is {docid: score}"),
    ({"q": ["d1"]}, "t", "query 'q': a ranking is {docid: score}"),  # docids without scores
])
def test_write_run_refuses_bad_results_with_the_project_s_error(tmp_path, results, tag, message):
    """write_run raised a bare ValueError (a TypeError for a score of None): a Python caller, or a command
    writing a run of bad input, got no CkqtiError, which the CLI says in one line. Its errors are InputErrors
    now, and still ValueErrors; the file an earlier run left is kept."""
    from ckqti.errors import InputError

    (tmp_path / "r.run").write_text("q Q0 old 1 1.0 t\n")
    with pytest.raises(InputError) as caught:
        write_run(tmp_path / "r.run", results, tag)
    assert isinstance(caught.value, ValueError) and str(caught.value).startswith(message), str(caught.value)
    assert (tmp_path / "r.run").read_text() == "q Q0 old 1 1.0 t\n" and len(list(tmp_path.iterdir())) == 1


@pytest.mark.parametrize("bad, message", [
    (("", 1.0), "docid '' must be a non-empty string without whitespace"),
    (("d\u20281", 1.0), r"docid 'd\u20281' must be a non-empty string"),  # a Unicode line separator is whitespace too
    (("d7", 1.0), "docid 'd7' appears twice in the results of query 'q'"),
    (("x", float("inf")), "score inf of query 'q', doc 'x' is not finite"),
])
def test_a_bad_row_among_many_is_named(tmp_path, bad, message):
    """A query's rows are checked all at once, and a bad one, wherever it is, is named as a check a row names it."""
    good = [(f"d{i}", float(100 - i)) for i in range(100)]
    ranked = good[:50] + [bad] + good[50:]
    with pytest.raises(ValueError, match=re.escape(message)):
        write_ranked_run(tmp_path / "r.run", [("q", [d for d, _ in ranked], [s for _, s in ranked])], "t")
    assert not list(tmp_path.iterdir())


def arrow_docids(docids: list, kind: str):
    """``docids`` as Arrow holds them: a ``string`` or ``large_string`` array, one sliced out of a longer
    one (its offsets start past 0), or a chunked array."""
    import pyarrow as pa

    if kind == "sliced":
        return pa.array(["pad", "ding", *docids, "tail"], pa.string()).slice(2, len(docids))
    if kind == "chunked":
        return pa.chunked_array([pa.array(docids[:7], pa.string()), pa.array(docids[7:], pa.string())])
    return pa.array(docids, getattr(pa, kind)())


ARROW_KINDS = ["string", "large_string", "sliced", "chunked"]


@pytest.mark.parametrize("kind", ARROW_KINDS)
@pytest.mark.parametrize("bad, message", [
    (("", 1.0), "docid '' must be a non-empty string without whitespace"),
    (("d\u20281", 1.0), r"docid 'd\u20281' must be a non-empty string"),
    (("d 1", 1.0), "docid 'd 1' must be a non-empty string"),
    ((None, 1.0), "docid None must be a non-empty string"),
    (("d7", 1.0), "docid 'd7' appears twice in the results of query 'q'"),
    (("x", float("inf")), "score inf of query 'q', doc 'x' is not finite"),
    (("x", float("nan")), "score nan of query 'q', doc 'x' is not finite"),
])
def test_a_bad_row_among_arrow_docids_is_named_as_in_a_list(tmp_path, bad, message, kind):
    """Docids given as an Arrow array and scores as a numpy array (``ckqti run``'s) are checked as a
    list's are: the first bad row raises the same error, wherever it is, however many rows there are."""
    for n in (10, 3 * ARROW_LINES):
        good = [(f"d{i}", float(n - i)) for i in range(n)]
        ranked = good[:n // 2] + [bad] + good[n // 2:]
        docids, scores = [d for d, _ in ranked], np.array([s for _, s in ranked])
        with pytest.raises(ValueError, match=re.escape(message)):
            write_ranked_run(tmp_path / "r.run", [("q", arrow_docids(docids, kind), scores)], "t")
        assert not list(tmp_path.iterdir())


def test_arrow_docids_that_are_not_strings_are_refused_as_in_a_list(tmp_path):
    import pyarrow as pa

    for n in (10, 3 * ARROW_LINES):
        with pytest.raises(ValueError, match=re.escape("docid 0 must be a non-empty string")):
            write_ranked_run(tmp_path / "r.run", [("q", pa.array(range(n)), np.ones(n))], "t")
        assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("arrow", [False, True])
def test_as_many_scores_as_docids(tmp_path, arrow):
    """A query's docids and scores are columns of one length: a short query's lines were cut to the
    shorter one, silently."""
    import pyarrow as pa

    for n in (10, 3 * ARROW_LINES):
        docids = [f"d{i}" for i in range(n)]
        for scores in ([1.0] * (n - 1), [1.0] * (n + 1)):
            with pytest.raises(ValueError, match=re.escape(f"query 'q' has {n} docids but {len(scores)} scores")):
                write_ranked_run(tmp_path / "r.run", [("q", pa.array(docids) if arrow else docids,
                                                       np.array(scores) if arrow else scores)], "t")
        assert not list(tmp_path.iterdir())


def awkward_scores() -> list[float]:
    """Scores of every size and sign, integral ones, both zeros, ties, and the bounds of what Arrow writes."""
    rng = np.random.default_rng(0)
    spread = (rng.standard_normal(3000) * 10.0 ** rng.integers(-12, 22, 3000)).tolist()
    edges = [1e-4, -1e-4, float(np.nextafter(1e-4, 0)), 1e9, -1e9, float(np.nextafter(1e9, 0)), 1e10 + 0.5,
             0.0, -0.0, 3.0, -2.0, 1e16, 123456789.125, 5e-324, 1.7976931348623157e308, 0.1 + 0.2, 1 / 3,
             float(np.float32(1 / 3)), 1.2403492132387708, -2.870137537680506e-05]
    return spread + edges + edges  # twice: ties


@pytest.mark.parametrize("name", ["r.run", "r.run.gz"])
def test_a_long_query_is_written_as_f_strings_write_it(tmp_path, name):
    """A query of ARROW_LINES lines or more is formatted in Arrow; its lines are those of ``repr``
    and f-strings, byte for byte, whatever the scores and docids (non-ASCII ones too)."""
    scores = awkward_scores()
    docids = [f"d{i}" if i % 3 else f"文档-é{i}" for i in range(len(scores))]
    short = (["x", "y"], [0.25, 1e-7])
    write_ranked_run(tmp_path / name, [("q-ü", docids, scores), ("q2", *short), ("q3", docids[:ARROW_LINES],
                                                                                    scores[:ARROW_LINES])], "tág")
    expected = "".join(f"{q} Q0 {d} {r} {s!r} tág\n" for q, ds, ss in [("q-ü", docids, scores), ("q2", *short),
                                                                    ("q3", docids[:ARROW_LINES], scores[:ARROW_LINES])]
                       for r, (d, s) in enumerate(zip(ds, ss), 1))
    with (gzip.open if name.endswith(".gz") else open)(tmp_path / name, "rb") as stream:
        assert stream.read() == expected.encode("utf-8")


@pytest.mark.parametrize("kind", ARROW_KINDS)
@pytest.mark.parametrize("name", ["r.run", "r.run.gz"])
def test_arrow_docids_and_numpy_scores_are_written_as_lists_are(tmp_path, name, kind):
    """Docids as an Arrow array and scores as a numpy array (``ckqti run``'s) make the run lists make,
    byte for byte: awkward scores and non-ASCII docids, queries shorter and longer than ARROW_LINES and
    than the one before (the rank strings are made once a run, and again longer), lists between them."""
    scores = awkward_scores()
    docids = [f"d{i}" if i % 3 else f"文档-é{i}" for i in range(len(scores))]
    cuts = [ARROW_LINES, 5, len(scores), ARROW_LINES - 1, 200, 2 * len(scores) // 3]
    queries = [(f"q{i}-ü", docids[i:i + n], scores[i:i + n]) for i, n in enumerate(cuts)]
    write_ranked_run(tmp_path / f"lists-{name}", queries, "tág")
    mixed = [(q, arrow_docids(d, kind), np.array(s)) if i != 3 else (q, d, s) for i, (q, d, s) in enumerate(queries)]
    write_ranked_run(tmp_path / name, mixed, "tág")
    opener = gzip.open if name.endswith(".gz") else open
    with opener(tmp_path / name, "rb") as new, opener(tmp_path / f"lists-{name}", "rb") as old:
        assert new.read() == old.read()


def test_write_ranked_run_keeps_the_given_order(tmp_path):
    """Rows already ranked (a search's) are written as given, ranks from 1, queries in order."""
    path = tmp_path / "r.run.gz"
    write_ranked_run(path, iter([("q2", ["b", "a"], [1.0, 1.0]), ("q1", ["x"], [0.5])]), "t")
    with gzip.open(path, "rt") as stream:
        assert stream.read().splitlines() == ["q2 Q0 b 1 1.0 t", "q2 Q0 a 2 1.0 t", "q1 Q0 x 1 0.5 t"]


def read_error(tmp_path, text: str) -> InputError:
    path = tmp_path / "bad.run"
    path.write_text(text)
    with pytest.raises(InputError) as info:
        read_run(path)
    return info.value


@pytest.mark.parametrize(
    "text, line, words",
    [
        ("q Q0 d 1 1.0 t\nq Q0 e 2 0.5\n", 2, "expected 6 run columns"),
        ("q Q0 d 1 1.0 t\n\nq Q0 e 2 high t\n", 3, "bad score 'high' (column 5"),
        ("q Q0 d one 1.0 t\n", 1, "bad rank 'one' (column 4"),
        ("q Q0 d 1 nan t\n", 1, "not finite"),
        ("q Q0 d 1 -inf t\n", 1, "not finite"),
        ("q Q0 d 1 1_0 t\n", 1, "bad score"),  # Python's float reads 10, trec_eval 1
        ("q Q0 d 1_0 1.0 t\n", 1, "bad rank"),
        ("q Q0 d 1 \u0661.5 t\n", 1, "bad score"),  # an Arabic-Indic digit, which float() reads as 1
        ("q Q0 d 1 1.0 t\nr Q0 d 1 1.0 t\nq Q0 d 2 0.5 t\n", 3, "twice (first at line 1)"),
        ("r Q0 d 1 1.0 t\nq Q0 d 1 1.0 t\nq Q0 d 2 0.5 t\n", 3, "twice (first at line 2)"),  # query r's d is another
        ("q Q0 d 1 1.0 my tag\n", 1, "expected 6 run columns (qid Q0 docid rank score tag), found 7"),
        # trec_eval (C strings) judged "d\0x" as "d"; a second file's byte-order mark after cat hid a query
        ("q Q0 d\x00x 1 1.0 t\n", 1, "docid 'd\\x00x' contains the invisible character U+0000"),
        ("q Q0 d 1 1.0 t\n\ufeffr Q0 d 1 1.0 t\n", 2, "query id '\\ufeffr' contains the invisible character U+FEFF"),
    ],
)
def test_read_run_errors_name_file_and_line(tmp_path, text, line, words):
    err = read_error(tmp_path, text)
    assert str(err).startswith(f"{tmp_path / 'bad.run'}:{line}: ")
    assert words in str(err)


def test_read_run_reads_every_decimal_trec_eval_reads(tmp_path):
    path = tmp_path / "ok.run"
    path.write_text("q Q0 a 1 3 t\nq Q0 b 2 2.5 t\nq Q0 c 3 .5 t\nq Q0 d 4 -1.5E-3 t\nq Q0 e 5 +7. t\n")
    assert read_run(path) == {"q": {"a": 3.0, "b": 2.5, "c": 0.5, "d": -0.0015, "e": 7.0}}


def test_read_run_empty(tmp_path):
    assert "no results" in str(read_error(tmp_path, "\n"))


def test_check_run_path_replaces_only_a_run(tmp_path):
    """A run may replace an earlier run (plain or gzip) or an empty file, never another file or a
    folder; a bad tag is refused before any work."""
    earlier = tmp_path / "earlier.trec"
    write_run(earlier, {"q": [("d", 1.0)]}, "t")
    gz = tmp_path / "earlier.trec.gz"
    write_run(gz, {"q": [("d", 1.0)]}, "t")
    (tmp_path / "empty.trec").write_text("")
    for fine in (earlier, gz, tmp_path / "empty.trec", tmp_path / "new.trec"):
        check_run_path(fine, "mine")
    (tmp_path / "queries.tsv").write_text("q1\twhite matter\n")
    (tmp_path / "manifest.json").write_text('{"format_version": 1}\n')
    (tmp_path / "model.pt").write_bytes(b"PK\x03\x04\xff\xfe binary")
    for other in ("queries.tsv", "manifest.json", "model.pt"):
        with pytest.raises(InputError, match=rf"{other}: exists and is not a TREC run; a run replaces only a run file"):
            check_run_path(tmp_path / other)
    assert (tmp_path / "queries.tsv").read_text() == "q1\twhite matter\n"
    with pytest.raises(InputError, match="is a directory"):
        check_run_path(tmp_path)
    for tag in ("my tag", "", 7):
        with pytest.raises(InputError, match="run tag .* must be a non-empty string without whitespace"):
            check_run_path(tmp_path / "new.trec", tag)


def test_check_run_path_names_a_file_in_the_way_and_refuses_an_input(tmp_path):
    """A file where the run's folder would be was found only when the run was written, after the
    search, as "File exists" naming that file; a run given as the run to write was replaced."""
    (tmp_path / "notes").write_text("mine")
    for below in (tmp_path / "notes" / "r.trec", tmp_path / "notes" / "sub" / "r.trec"):
        with pytest.raises(InputError) as err:
            check_run_path(below)
        assert str(err.value) == f"{below}: cannot write the run: {tmp_path / 'notes'} is a file, not a directory"
    first = tmp_path / "first.trec"
    write_run(first, {"q": [("d", 1.0)]}, "t")
    for spelling in (first, tmp_path / "." / "first.trec"):
        with pytest.raises(InputError) as err:
            check_run_path(spelling, inputs={"queries file": tmp_path / "q.tsv", "candidates run": first})
        assert str(err.value) == (f"{spelling}: is also the candidates run this command reads; choose another output "
                                  "(writing it would replace that input)")
    check_run_path(tmp_path / "new.trec", inputs={"candidates run": first, "corpus": None})
    assert (tmp_path / "notes").read_text() == "mine" and read_run(first) == {"q": {"d": 1.0}}


def test_a_gzip_run_names_itself_in_its_header(tmp_path):
    write_run(tmp_path / "r.trec.gz", {"q": [("d", 1.0)]}, "t")
    raw = (tmp_path / "r.trec.gz").read_bytes()
    assert raw[10:17] == b"r.trec\x00" and b"ckqti-tmp" not in raw  # FNAME: gunzip -N restores r.trec
    assert read_run(tmp_path / "r.trec.gz") == {"q": {"d": 1.0}}


VALID_RUNS = {
    "plain": "q1 Q0 d1 1 2.5 t\nq1 Q0 d2 2 -1e-3 t\nq2 Q0 d1 1 +.5E+2 t\n",
    "crlf, blank lines, tabs": "\r\nq1\tQ0\td1\t1\t2.5\tt\r\n\r\nq1 Q0 d2 2 5. t\r\n",
    "byte-order mark": "\ufeffq1 Q0 d1 1 1 t\n",
    "a query in two places": "q1 Q0 a 1 3 t\nq2 Q0 a 1 2 t\nq1 Q0 b 2 1 t\n",
    "non-ASCII ids, no final line feed": "q\u00e9 Q0 \u65e5\u672c 1 1.0 t\nq\u00e9 Q0 \U0001F600 2 0.5 t",
    "one line, no final line feed": "q Q0 d 1 1.0 t",
    "a byte-order mark, a first line longer than a block": "\ufeffq Q0 " + "d" * 80 + " 1 1.5 t\nq Q0 e 2 0.5 t\n",
    "long": "".join(f"q{i % 7} Q0 d{i}\u00e9 {i} {i / 3!r} t\n" for i in range(400)),
}


@pytest.mark.parametrize("name", list(VALID_RUNS))
@pytest.mark.parametrize("block", [64, 1 << 16])
def test_a_well_formed_run_is_read_a_block_at_a_time_as_line_by_line(tmp_path, monkeypatch, name, block):
    """The fast path reads what the line-by-line reader reads, block boundaries anywhere (a multi-byte
    character split between two reads included), plain and gzip; it does not fall back for these."""
    import retriever.runs as runs

    monkeypatch.setattr(runs, "READ_BLOCK", block)
    for path in (tmp_path / "r.trec", tmp_path / "r.trec.gz"):
        data = VALID_RUNS[name].encode("utf-8")
        path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)
        fast = runs._read_well_formed(path)
        assert fast is not None
        assert fast == runs._read_line_by_line(path) and list(fast) == list(runs._read_line_by_line(path))
        assert [list(d) for d in fast.values()] == [list(d) for d in runs._read_line_by_line(path).values()]


@pytest.mark.parametrize("text", [
    "q Q0 d 1 1.0 t\nq Q0 d 2 0.5 t\n",  # a docid twice
    "q Q0 d 1 1_0 t\n",  # float reads 10, trec_eval does not
    "q Q0 d \u0661 1.0 t\n",  # an Arabic-Indic digit as the rank
    "q Q0 d 1 nan t\n", "q Q0 d 1 1e999 t\n", "q Q0 d 1 1.0\n", "q Q0 d x 1.0 t\n", "",
    "q Q0 d 1 1.0 t\rq Q0 e 2 0.5 t\r",  # carriage returns alone
    "q Q0 d 1 1.0 t\n\xff\n",
    "q Q0 d\x00x 1 1.0 t\n", "q\u200b Q0 d 1 1.0 t\n",  # an invisible character in an id
])
def test_what_the_line_by_line_reader_refuses_is_left_to_it(tmp_path, text):
    """Every file the line-by-line reader refuses (or reads only because it reads line by line) makes
    the fast path step aside, so the error names the line as before."""
    import retriever.runs as runs

    path = tmp_path / "r.trec"
    path.write_bytes(text.encode("utf-8", "surrogateescape") if "\xff" not in text else text.encode("latin-1"))
    assert runs._read_well_formed(path) is None
    with pytest.raises(InputError):
        read_run(path)


@pytest.mark.parametrize("block", [64, 1 << 16])
def test_a_line_over_a_block_is_left_to_the_line_by_line_reader(tmp_path, monkeypatch, block):
    """Past its first, a line longer than a block is not gathered by the fast path (a file with few line
    feeds would be read whole into memory): the line-by-line reader reads it."""
    import retriever.runs as runs

    monkeypatch.setattr(runs, "READ_BLOCK", block)
    path = tmp_path / "r.trec"
    path.write_text(f"q Q0 d 1 1.0 t\nq Q0 {'e' * 2 * block} 2 0.5 t\n")
    assert runs._read_well_formed(path) is None
    assert read_run(path) == {"q": {"d": 1.0, "e" * 2 * block: 0.5}}



@pytest.mark.parametrize("name", [*VALID_RUNS, "columns", "a line over a block"])
def test_read_run_queries_holds_the_queries_kept(tmp_path, name):
    """read_run_queries holds the rankings of the queries kept, as read_run reads them, and names every query
    of the file in order, on each of its paths: in columns (a block of 1 MB or more), a block of rows at a
    time, and line by line (a line longer than a block)."""
    import retriever.runs as runs

    text = {"columns": "".join(f"q{i % 7} Q0 d{i} {i} {i / 3!r} t\n" for i in range(40_000)),
            "a line over a block": f"q1 Q0 d 1 1.0 t\nq2 Q0 {'e' * 2 * runs.READ_BLOCK} 2 0.5 t\nq1 Q0 f 3 0.1 t\n",
            }.get(name) or VALID_RUNS[name]
    path = tmp_path / "r.trec"
    path.write_bytes(text.encode("utf-8"))
    assert (name == "columns") == (len(text) >= runs.ARROW_MIN)
    whole = read_run(path)
    for keep in (set(), {"q1"}, {"q1", "q\u00e9", "q3", "q"}, set(whole)):
        run, qids = runs.read_run_queries(path, keep)
        assert run == {q: docs for q, docs in whole.items() if q in keep} and qids == list(whole)
        assert [list(d) for d in run.values()] == [list(whole[q]) for q in run]
    assert runs.read_run_queries(path) == (whole, list(whole))

class _CountingReads:
    """A binary file that counts the bytes read from it (decompressed, for gzip)."""

    def __init__(self, stream):
        self.stream, self.read_bytes = stream, 0

    def read(self, size=-1):
        data = self.stream.read(size)
        self.read_bytes += len(data)
        return data

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stream.close()


@pytest.mark.parametrize("suffix", [".trec", ".trec.gz"])
def test_iter_run_queries_gives_a_grouped_run_a_query_at_a_time(tmp_path, monkeypatch, suffix):
    """A run grouped by query is given a query at a time, each once the block after its lines has been read: the
    first long before the file is read through, and every ranking as read_run_queries holds it (the queries kept,
    in file order; a query spanning blocks joined), plain and gzip. A query whose lines come back after another's
    (concatenated runs) or a docid repeated across blocks raises NotGrouped, and so does a file read_run
    complains of (read_run_queries then reads it whole and names what is wrong)."""
    import retriever.runs as runs

    monkeypatch.setattr(runs, "READ_BLOCK", 1 << 12)
    monkeypatch.setattr(runs, "ARROW_BLOCK", 1 << 14)  # blocks of ~16 KB, ~500 lines (of a 120 KB run)
    lines = [f"q{q} Q0 d{d} {d + 1} {(d * 7) % 13 / 3!r} t\n" for q in range(60) for d in range(40 + q)]
    path = tmp_path / f"r{suffix}"

    def write(text: str) -> None:
        data = text.encode("utf-8")
        path.write_bytes(gzip.compress(data) if suffix.endswith(".gz") else data)

    opened: list[_CountingReads] = []
    monkeypatch.setattr(runs, "open_binary", lambda p: opened.append(_CountingReads(open_binary(p))) or opened[-1])
    write("".join(lines))
    size = len("".join(lines))
    for keep in (None, {f"q{q}" for q in range(0, 60, 7)}):
        at = []  # bytes read when each query is given
        given = [(qid, docs, at.append(opened[-1].read_bytes)) for qid, docs in runs.iter_run_queries(path, keep)]
        assert at[0] < size / 4 and at == sorted(at), (at[0], size)
        assert [(qid, docs) for qid, docs, _ in given] == list(runs.read_run_queries(path, keep)[0].items())
    long_query = [f"z Q0 d{d} 1 1.5 t\n" for d in range(1000)]  # ~40 KB: over blocks
    for bad in ("".join(lines[1500:] + lines[:1500]), "".join(lines + [lines[1500].replace("q", "r")] + lines[:3]),
                "".join(lines + long_query + long_query[:1]), "".join(lines) + "q1 Q0 x\n"):
        write(bad)
        with pytest.raises(runs.NotGrouped):
            list(runs.iter_run_queries(path))



def test_iter_run_queries_at_block_edges_and_rows_reads_what_read_run_queries_reads(tmp_path, monkeypatch):
    """A query whose last line ends a block is held until the next block shows it does not go on, then given
    (each query once), and coming back later is NotGrouped; a run led by a byte-order mark, and blocks that
    Arrow leaves to rows (a docid not ASCII), are given a query at a time as read_run_queries holds them; an
    empty run and a docid repeated within a block are NotGrouped (read_run_queries names what is wrong)."""
    import retriever.runs as runs

    monkeypatch.setattr(runs, "READ_BLOCK", 1 << 12)
    monkeypatch.setattr(runs, "ARROW_BLOCK", 1 << 14)
    monkeypatch.setattr(runs, "ARROW_MIN", 1 << 12)  # a 16 KB block is read in columns when plain
    path = tmp_path / "r.trec"

    def given(text: str) -> list:
        path.write_bytes(text.encode("utf-8"))
        return list(runs.iter_run_queries(path))

    # 64-byte lines, 256 a query: each 16 KB block is one whole query
    lines = {q: [f"q{q:02d} Q0 {'d' * 41}{d:04d} {d + 1:04d} 1.5 t\n" for d in range(256)] for q in range(4)}
    aligned = "".join(line for q in lines for line in lines[q])
    assert {len(line) for q in lines for line in lines[q]} == {64}
    for text in (aligned, "\ufeff" + aligned, aligned.replace("dd0", "dé0")):
        assert given(text) == list(runs.read_run_queries(path)[0].items())
        assert [qid for qid, _ in given(text)] == ["q00", "q01", "q02", "q03"]
    for bad in (aligned + lines[0][0].replace("0000", "9999"), "", "\n\n", "q Q0 d1 1 1.0 t\nq Q0 d1 2 0.5 t\n"):
        with pytest.raises(runs.NotGrouped):
            given(bad)


def test_a_well_formed_run_is_read_once(tmp_path, monkeypatch):
    """read_run takes the fast path's result: a well-formed run is not read again line by line."""
    import retriever.runs as runs

    def line_by_line(path):
        raise AssertionError("read line by line")

    monkeypatch.setattr(runs, "_read_line_by_line", line_by_line)
    path = tmp_path / "r.trec"
    path.write_text(VALID_RUNS["long"])
    assert read_run(path) == runs._read_well_formed(path) and len(read_run(path)) == 7


def _gzip_damaged(kind: str) -> bytes:
    data = gzip.compress("".join(f"q Q0 d{i} {i + 1} 1.0 t\n" for i in range(5000)).encode())
    if kind == "truncated":
        return data[:len(data) // 2]
    if kind == "bad header":  # the gzip magic, then no deflate method
        return data[:2] + b"garbage" * 10
    return data[:10] + b"\xff" * 40  # a deflate block of an invalid type


@pytest.mark.parametrize("kind", ["truncated", "bad header", "bad deflate data"])
def test_a_damaged_gzip_run_is_an_input_error_naming_the_file(tmp_path, kind):
    """Whatever gzip raises in the fast path (EOFError, BadGzipFile, zlib.error) leaves the file to the
    line-by-line reader, whose error names the file: never a traceback."""
    path = tmp_path / "r.trec.gz"
    path.write_bytes(_gzip_damaged(kind))
    with pytest.raises(InputError, match=re.escape(str(path)) + ":[0-9]+: corrupt gzip data"):
        read_run(path)


def test_writing_a_long_query_imports_no_pandas(tmp_path):
    """Arrow's arrays are made from buffers: ``pa.array`` would import pandas, 0.3 s of a ``ckqti run``."""
    code = ("import sys; from retriever.runs import write_ranked_run; "
            f"write_ranked_run({str(tmp_path / 'r.run')!r}, [('q', [f'd{{i}}' for i in range(100)], "
            "[i + 0.5 for i in range(100, 0, -1)])], 't'); print('pandas' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.stdout.split() == ["False"]
    assert (tmp_path / "r.run").read_text().splitlines()[:2] == ["q Q0 d0 1 100.5 t", "q Q0 d1 2 99.5 t"]


# Scores whose parse is easy to get wrong: many digits, exponents past the range, subnormals, signed zeros.
AWKWARD_SCORES = [
    "-0", "+0", "-0.", "+.0", "00", ".5", "5.", "+7.", "-.5e-3", "1E5", "1e+0000000000000000000001", "1e-320", "-1e-320",
    "4.9406564584124654e-324", "2.4703282292062327e-324", "2.4703282292062328e-324", "2.2250738585072011e-308",
    "1.7976931348623157e308", "1.7976931348623158e308", "0e99999999999999999999", "1e-99999999999999999999",
    "9007199254740993", "9007199254740992.5000000000000000001", "0.1000000000000000055511151231257827021181583404541015625",
    "0.1000000000000000055511151231257827021181583404541015624", "1" + "0" * 400 + "e-400", "0." + "0" * 400 + "1e400",
    "123456789012345678901234567890e-30", "9" * 300, "0." + "9" * 800, "0.30000000000000004", "1.2403492132387708",
]


def _random_score(rng) -> str:
    if rng.random() < 0.3:
        return repr(rng.uniform(-1e3, 1e3) * 10.0 ** rng.randint(-330, 300))
    whole, part = (rng.choices("0123456789", k=rng.randint(0, n)) for n in (25, 40))
    text = "".join(whole) + rng.choice([".", "", "."]) + "".join(part)
    text = text if any(c.isdigit() for c in text) else "0"
    if rng.random() < 0.4:
        sign = rng.choice(["-", "", "+"])  # below 1e300 (65 digits at most before the exponent)
        text += rng.choice("eE") + sign + str(rng.randint(0, 400 if sign == "-" else 234))
    return rng.choice(["", "", "+", "-"]) + text


def _random_run(rng, lines: int) -> list[str]:
    """Lines of a plain run: queries of a few to many lines, some query coming back later, awkward scores."""
    out, qids = [], [f"q{i}" for i in range(rng.randint(1, 9))]
    while len(out) < lines:
        qid, docs = rng.choice(qids), rng.randint(1, 60)
        used = {line.split()[2] for line in out if line.split()[0] == qid}
        fresh = [d for d in (f"d{rng.randint(0, 10**6)}-{k}" for k in range(docs)) if d not in used]
        out += [f"{qid} {rng.choice(['Q0', '0'])} {doc} {rank} {_random_score(rng)} {rng.choice(['t', 'run.1'])}"
                for rank, doc in enumerate(fresh, 1)]
    return out


def _same_as_line_by_line(runs, path):
    """read_run's result or error for ``path`` is the line-by-line reader's, floats bit for bit, keys in order."""
    try:
        want = runs._read_line_by_line(path)
    except InputError as err:
        with pytest.raises(InputError) as got:
            read_run(path)
        assert str(got.value) == str(err)
        return
    got = read_run(path)
    assert list(got) == list(want)
    assert [[(d, repr(s)) for d, s in docs.items()] for docs in got.values()] == \
           [[(d, repr(s)) for d, s in docs.items()] for docs in want.values()]


def _spy_columns(runs, monkeypatch) -> list:
    """Read in columns from the smallest block, gathering 1.5 KB (a line of 1 KB is read whole); what each
    _add_columns call returned."""
    monkeypatch.setattr(runs, "READ_BLOCK", 1024)
    monkeypatch.setattr(runs, "ARROW_BLOCK", 1536)
    monkeypatch.setattr(runs, "ARROW_MIN", 0)
    calls, add_columns = [], runs._add_columns
    monkeypatch.setattr(runs, "_add_columns", lambda *args: calls.append(add_columns(*args)) or calls[-1])
    return calls


@pytest.mark.parametrize("seed", range(6))
def test_a_plain_run_is_read_in_columns_as_line_by_line(tmp_path, monkeypatch, seed):
    """Plain runs (random queries, one coming back later, awkward scores, no final line feed) are read in
    columns, every block, with the line-by-line reader's floats bit for bit, plain and gzip."""
    import random

    import retriever.runs as runs

    rng = random.Random(seed)
    lines = _random_run(rng, 300)
    lines += [f"qa Q0 a{i} {i} {score} t" for i, score in enumerate(AWKWARD_SCORES)]
    calls = _spy_columns(runs, monkeypatch)
    for path in (tmp_path / "r.trec", tmp_path / "r.trec.gz"):
        data = ("\n".join(lines) + rng.choice(["\n", ""])).encode()
        path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)
        calls.clear()
        _same_as_line_by_line(runs, path)
        assert len(calls) > 5 and None not in calls  # every block in columns


def _column_is(k: int, text: str):
    return lambda cols: " ".join(cols[:k] + [text] + cols[k + 1:])


def _score_is(score: str):
    return _column_is(4, score)


# One change to a line of a plain run: ``{}`` is the line's columns, space-separated, as strings.
MUTATIONS = [
    lambda c: "  ".join(c), lambda c: " " + " ".join(c), lambda c: " ".join(c) + " ", lambda c: " ".join(c) + "\n",
    lambda c: "\n" + " ".join(c), lambda c: "\t".join(c), lambda c: " ".join(c) + "\r", lambda c: " ".join(c[:5]),
    lambda c: " ".join(c + ["x"]), lambda c: " ".join(c[:2] + [c[2] + "\t1"] + c[3:]),
    lambda c: " ".join(c[:2] + [c[2] + "\x0b1"] + c[3:]), lambda c: " ".join(c[:2] + [c[2] + "\x1c1"] + c[3:]),
    lambda c: " ".join(c[:2] + [c[2] + "\x00"] + c[3:]), lambda c: " ".join(c[:2] + [c[2] + "\x85x"] + c[3:]),
    lambda c: " ".join(c[:2] + [c[2] + "\u00e9"] + c[3:]), lambda c: " ".join(c[:2] + [c[2] + "\u3000x"] + c[3:]),
    lambda c: " ".join(c[:3] + ["+" + c[3]] + c[4:]), lambda c: " ".join(c[:3] + ["-" + c[3]] + c[4:]),
    lambda c: " ".join(c[:3] + [c[3] + ".0"] + c[4:]), lambda c: " ".join(c[:3] + ["x"] + c[4:]),
    lambda c: " ".join(c[:3] + ["1_0"] + c[4:]), lambda c: " ".join(c[:3] + ["\u0661"] + c[4:]),
    *[_score_is(score) for score in ["1_0", "nan", "-inf", "Infinity", "1e999", "-1e400", "9" * 400, "1.2.3", "0x1p3",
                                     "1e", "e5", ".", "+", "1d5", "\u0661.5", "1,5", "1e5.0", "0b1", "1j", "\uff11"]],
    *[_column_is(k, "") for k in range(6)],  # a column gone, its spaces not
    lambda c: '"' + " ".join(c) + '"', lambda c: " ".join(c[:2] + ['"' + c[2] + '"'] + c[3:]),
]


@pytest.mark.parametrize("seed", range(4))
def test_a_subtly_changed_run_reads_or_fails_as_line_by_line(tmp_path, monkeypatch, seed):
    """Each change to one line of a plain run (extra or other whitespace, a column more or less, a signed
    or bad rank, scores float reads and trec_eval does not, a docid twice) leaves read_run's result or
    InputError the line-by-line reader's, wherever the line lies."""
    import random

    import retriever.runs as runs

    rng = random.Random(seed)
    calls = _spy_columns(runs, monkeypatch)
    path = tmp_path / "r.trec"
    for number, mutate in enumerate(MUTATIONS + ["twice"]):
        lines = _random_run(rng, 60)
        at = rng.randrange(len(lines))
        if mutate == "twice":
            cols = lines[at].split()
            lines.insert(rng.randint(at + 1, len(lines)), f"{cols[0]} Q0 {cols[2]} 99 1.5 t")
        else:
            lines[at] = mutate(lines[at].split())
        path.write_bytes(("\n".join(lines) + "\n").encode("utf-8", "surrogatepass"))
        calls.clear()
        _same_as_line_by_line(runs, path)
        assert calls, number


def test_reading_a_run_in_columns_imports_no_pandas(tmp_path):
    """A run of more than ARROW_MIN bytes is read in columns, without pandas (0.3 s of a process)."""
    path = tmp_path / "r.run"
    path.write_text("".join(f"q{i // 1000} Q0 d{i} {i % 1000 + 1} {1 / (i + 1)!r} t\n" for i in range(40_000)))
    code = ("import sys; import retriever.runs as runs; calls = []; add = runs._add_columns; "
            "runs._add_columns = lambda *a: calls.append(add(*a)) or calls[-1]; "
            f"run = runs.read_run({str(path)!r}); print(len(run), len(calls), None in calls, 'pandas' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.stdout.split() == ["40", "1", "False", "False"]
