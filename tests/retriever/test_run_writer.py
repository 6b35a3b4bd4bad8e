"""Writing TREC run files: lines in trec_eval's order, exact round trip, gzip, Arrow columns written as lists are,
and bad results refused."""

from __future__ import annotations

import gzip
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ckqti.evaluate import evaluate
from retriever.run_reader import read_run
from retriever.run_writer import ARROW_LINES, write_ranked_run, write_run


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


def test_a_gzip_run_names_itself_in_its_header(tmp_path):
    write_run(tmp_path / "r.trec.gz", {"q": [("d", 1.0)]}, "t")
    raw = (tmp_path / "r.trec.gz").read_bytes()
    assert raw[10:17] == b"r.trec\x00" and b"ckqti-tmp" not in raw  # FNAME: gunzip -N restores r.trec
    assert read_run(tmp_path / "r.trec.gz") == {"q": {"d": 1.0}}


def test_writing_a_long_query_imports_no_pandas(tmp_path):
    """Arrow's arrays are made from buffers: ``pa.array`` would import pandas, 0.3 s of a ``ckqti run``."""
    code = ("import sys; from retriever.run_writer import write_ranked_run; "
            f"write_ranked_run({str(tmp_path / 'r.run')!r}, [('q', [f'd{{i}}' for i in range(100)], "
            "[i + 0.5 for i in range(100, 0, -1)])], 't'); print('pandas' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.stdout.split() == ["False"]
    assert (tmp_path / "r.run").read_text().splitlines()[:2] == ["q Q0 d0 1 100.5 t", "q Q0 d1 2 99.5 t"]
