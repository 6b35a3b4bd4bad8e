"""TREC run files: trec_eval's order, and the checks of a run's path before any work."""

from __future__ import annotations

import pytest

from ckqti.errors import InputError
from retriever.run_reader import read_run
from retriever.run_writer import write_run
from retriever.runs import check_run_path, trec_order


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
