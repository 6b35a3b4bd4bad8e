"""Evaluating runs against judgements: a run's per-query and mean measures (:mod:`ckqti.measures`),
other runs tested against it (:mod:`ckqti.significance`), and the report's tables (:mod:`ckqti.tables`).

Conventions (trec_eval's ``-c``):
- a query counts when the qrels judge at least one document for it; run queries without
  judgements are ignored (and listed in :attr:`EvalResult.unjudged`);
- a judged query with no results scores 0 on every measure (listed in
  :attr:`EvalResult.missing`);
- a judged query without any relevant document scores 0.
Gains are the qrels grades as written (linear gain, as trec_eval's nDCG). Binary measures
(RR, AP, P, R) count a document relevant when its grade is at least ``rel_level``: 1 by
default; TREC DL passage evaluations use 2. nDCG and NCG use the graded gains whatever
``rel_level`` is.

This module starts no JVM and imports no torch; scipy is imported only by the tests.
"""

from __future__ import annotations

import math
import numbers
import os
import reprlib
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from ckqti.errors import InputError, OptionError, all_ids, id_type_message, is_id, is_real
from ckqti.measures import DEFAULT_MEASURES, ncg_at_k, parse_measures, trec_eval_scores
from ckqti.significance import Comparison, compare_results
from ckqti.tables import format_table
from ckqti.terminal import counted
from retriever.runs import Ranking, all_numbers, trec_order

SHOWN_QIDS = 5  # query ids an EvalResult's repr shows of its missing and unjudged ones; the rest are counted


@dataclass(frozen=True)
class EvalResult:
    """Scores of one run.

    Attributes:
        measures: the measure names, in the order asked.
        mean: measure -> mean over the judged queries.
        by_query: qid -> measure -> value, for every judged query (qrels order).
        missing: judged queries the run has no results for (scored 0).
        unjudged: run queries without judgements (ignored).
        rel_level: the grade from which binary measures count a document relevant.
        per_query: whether :meth:`table` lists the queries.
        depth: documents in the run's longest ranking of a judged query.
    """

    measures: tuple[str, ...]
    mean: dict[str, float]
    by_query: dict[str, dict[str, float]]
    missing: tuple[str, ...] = ()
    unjudged: tuple[str, ...] = ()
    rel_level: int = 1
    per_query: bool = False
    depth: int = 0

    __hash__ = None  # type: ignore[assignment]  # equal by value, but its dicts change: unhashable, as a dict

    def __repr__(self) -> str:
        """One line: ``by_query`` as its count of queries, ``missing`` and ``unjudged`` cut to their first
        qids (SciFact's 300 test claims' values and 809 unjudged claims took 37,812 characters)."""
        shown = []
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            if name == "by_query":
                shown.append(f"by_query=<{counted(len(value), 'query', 'queries')}>")
            elif isinstance(value, tuple) and len(value) > SHOWN_QIDS:
                shown.append(f"{name}=({', '.join(map(repr, value[:SHOWN_QIDS]))}, ... {len(value) - SHOWN_QIDS:,} more)")
            else:
                shown.append(f"{name}={value!r}")
        return f"EvalResult({', '.join(shown)})"

    @property
    def num_queries(self) -> int:
        return len(self.by_query)

    def values(self, measure: str) -> dict[str, float]:
        """qid -> value of one measure (the input of :func:`ckqti.significance.paired_ttest` and :func:`ckqti.significance.wilcoxon`).

        Raises:
            InputError: ``measure`` is not one of :attr:`measures` (named as they are: ``nDCG@10``)."""
        if measure not in self.measures:
            raise InputError(f"no measure {measure!r} in this result ({', '.join(self.measures)})")
        return {qid: scores[measure] for qid, scores in self.by_query.items()}

    def table(self, markdown: bool = False, name: str = "run") -> str:
        """A plain-text (or markdown) table: the per-query rows when asked, then the means."""
        return EvalReport((name,), (self,)).table(markdown)


def evaluate(
    run: Mapping[str, Ranking],
    qrels: Mapping[str, Mapping[str, int]],
    measures: Sequence[str] = DEFAULT_MEASURES,
    per_query: bool = False,
    rel_level: int = 1,
) -> EvalResult:
    """Score a run against relevance judgements (see the module docstring for the conventions).

    Args:
        run: qid -> {docid: score} (as :func:`retriever.run_reader.read_run` returns) or qid -> [(docid, score), ...].
        qrels: qid -> {docid: grade} (as :func:`indexer.readers.read_qrels` returns).
        measures: measure names, see :func:`ckqti.measures.parse_measure` (results name them as it does: ``ndcg@10`` is ``nDCG@10``).
        per_query: list every query in :meth:`EvalResult.table`; per-query values are always kept in ``by_query``.
        rel_level: minimum grade counted relevant by RR, AP, P and R (1 by default; 2 for TREC DL passages).

    Raises:
        InputError: an unknown measure (or one string for the list of them), ``rel_level`` not an integer of
            at least 1, qrels without any judgement, a run or qrels of another shape (the error names the
            entry: ``run['3']``), or a NaN score in a judged query's ranking.
    """
    if isinstance(measures, str):  # else read a letter at a time: "unknown measure 'n'"
        raise InputError(f"measures must be a list of names, e.g. [{measures!r}], got a string")
    parsed = parse_measures(measures)
    if isinstance(rel_level, bool) or not isinstance(rel_level, numbers.Integral) or rel_level < 1:
        raise InputError(f"rel_level must be an integer >= 1, got {rel_level!r}")
    judged = checked_qrels(qrels)
    if not isinstance(run, Mapping):
        raise InputError(f"run: expected a dict qid -> {{docid: score}}, found {type(run).__name__}")
    from indexer.readers.formats import MAX_GRADE  # the readers' bound (pytrec_eval allocates every grade level)

    if any(abs(g) > MAX_GRADE for docs in judged.values() for g in docs.values()):
        raise InputError(f"a qrels grade is out of range (at most {MAX_GRADE:,} either side of 0)")
    if not judged:
        raise InputError("the qrels judge no query")
    check_rel_level(judged, rel_level)
    check_query_ids(run, "run")
    # only the judged queries are sorted: SciFact's run of 1,109 claims has 300 judged (test split)
    ranked = {str(q): checked_ranking(q, docs) for q, docs in run.items() if str(q) in judged and ranks_any(docs)}
    for qid, docs in ranked.items():  # NaN compares false with every score: it would rank anywhere
        if (nan := next((d for d, s in docs.items() if s != s), None)) is not None:
            raise InputError(f"query {qid!r}: document {nan!r} has score nan, which ranks nowhere")
    by_query: dict[str, dict[str, float]] = {q: dict.fromkeys((m.name for m in parsed), 0.0) for q in judged}
    trec_eval_scores([m for m in parsed if m.family != "NCG"], ranked, judged, rel_level, by_query)
    for m in (m for m in parsed if m.family == "NCG"):
        for qid, docs in ranked.items():
            by_query[qid][m.name] = ncg_at_k(list(docs), judged[qid], m.cutoff)
    mean = {m.name: math.fsum(s[m.name] for s in by_query.values()) / len(by_query) for m in parsed}
    return EvalResult(
        measures=tuple(m.name for m in parsed),
        mean=mean,
        by_query=by_query,
        missing=tuple(q for q in judged if q not in ranked),
        unjudged=tuple(str(q) for q in run if str(q) not in judged),
        rel_level=rel_level,
        per_query=per_query,
        depth=max(map(len, ranked.values()), default=0),
    )


def checked_qrels(qrels: Mapping[str, Mapping[str, int]]) -> dict[str, dict[str, int]]:
    """``qrels`` with string ids and ``int`` grades, its queries without judgements left out; another shape
    (lists of docids, a grade written as text or a fraction) is an :class:`InputError` naming the entry."""
    if not isinstance(qrels, Mapping):
        raise InputError(f"qrels: expected a dict qid -> {{docid: grade}}, found {type(qrels).__name__}")
    check_query_ids(qrels, "qrels")
    judged = {}
    for q, docs in qrels.items():
        if not isinstance(docs, Mapping):
            raise InputError(f"qrels[{q!r}]: expected a dict docid -> grade, found {type(docs).__name__}")
        if not all_ids(docs):
            raise InputError(f"qrels[{q!r}]: {id_type_message(next(d for d in docs if not is_id(d)), 'docid')}")
        for d, g in docs.items():
            if isinstance(g, bool) or not isinstance(g, numbers.Integral):
                raise InputError(f"qrels[{q!r}][{d!r}]: a grade is an integer, found {type(g).__name__}")
        if docs:
            judged[str(q)] = grades = {str(d): int(g) for d, g in docs.items()}
            if len(grades) < len(docs):  # 7 and "7": one docid, as a qrels file's repeated line is refused
                twice = next(d for d, n in Counter(map(str, docs)).items() if n > 1)
                raise InputError(f"qrels[{q!r}]: repeated judgement of query {str(q)!r}, doc {twice!r}")
    return judged


def check_query_ids(entries: Mapping, name: str) -> None:
    """Query ids of a run or qrels in memory (``name``) that are neither a string nor an integer (:func:`ckqti.errors.is_id`:
    ``1.0`` was read as ``'1.0'``, never a file's ``1``), or that are one id as text (``1`` and ``"1"``): an
    :class:`InputError` naming the first such, where one would have replaced the other's rankings or judgements."""
    if not all_ids(entries):
        bad = next(q for q in entries if not is_id(q))
        raise InputError(f"{name}[{bad!r}]: {id_type_message(bad, 'query id')}")
    if len(set(map(str, entries))) < len(entries):
        first: dict[str, object] = {}
        for q in entries:
            if str(q) in first:
                raise InputError(f"{name}[{q!r}]: duplicate query id {str(q)!r} (first at {name}[{first[str(q)]!r}])")
            first[str(q)] = q


def ranks_any(docs) -> bool:
    """Whether a query's ranking in memory may hold a document: not None nor empty (a numpy array's truth is
    ambiguous; an iterator's length unknown until :func:`checked_ranking` reads it)."""
    if docs is None:
        return False
    try:
        return len(docs) > 0
    except TypeError:
        return True


def checked_ranking(qid, docs: Ranking) -> dict[str, float]:
    """One query's ranking in :func:`~retriever.runs.trec_order` (``{docid: score}``); another shape (docids
    without scores, a number) is an :class:`InputError` naming the query: a list of two-character docids
    unpacked into (docid, score) pairs."""
    if not isinstance(docs, Mapping):
        pairs = list(docs) if isinstance(docs, Iterable) and not isinstance(docs, (str, bytes)) else None
        if pairs is None or not all(isinstance(p, (tuple, list)) and len(p) == 2 for p in pairs):
            raise InputError(f"run[{qid!r}]: a ranking is {{docid: score}} or [(docid, score), ...], found "
                             f"{type(docs).__name__}")
        docs = pairs  # an iterator, read once
    docids = list(docs) if isinstance(docs, Mapping) else [d for d, _ in docs]
    if not all_ids(docids):  # a string or an integer, as rerank's candidates and a corpus in memory take them
        raise InputError(f"run[{qid!r}]: {id_type_message(next(d for d in docids if not is_id(d)), 'docid')}")
    scores = list(docs.values()) if isinstance(docs, Mapping) else [s for _, s in docs]
    if not all_numbers(scores):
        bad = next(s for s in scores if not is_real(s))  # text ("1.0") or a bool: as rerank's candidates refuse them
        raise InputError(f"run[{qid!r}]: a score is a number, found {type(bad).__name__} {reprlib.repr(bad)}")
    try:
        ranked = trec_order(docs)
    except (TypeError, ValueError, OverflowError) as e:  # OverflowError: an int beyond a float's range
        raise InputError(f"run[{qid!r}]: a score is a number ({e})") from None
    held = dict(ranked)
    if len(held) < len(ranked):  # a docid twice, as a run file's is refused (or 7 and "7")
        twice = next(d for d, n in Counter(d for d, _ in ranked).items() if n > 1)
        raise InputError(f"run[{qid!r}]: query {str(qid)!r} retrieves doc {twice!r} twice")
    return held


def check_rel_level(qrels: Mapping[str, Mapping[str, int]], rel_level: int, path: str | Path | None = None) -> None:
    """A ``rel_level`` above every grade of ``qrels`` (read from ``path``, which the error names) would
    score every binary measure 0: an error."""
    top = max((g for docs in qrels.values() for g in docs.values()), default=None)
    if rel_level > 1 and top is not None and top < rel_level:  # asked for a level these qrels do not have
        raise InputError(f"no judgement reaches grade {rel_level} (the highest is {top}): every binary measure "
                         "would be 0; lower the level (--rel-level)", path)


@dataclass(frozen=True)
class EvalReport:
    """Results of runs on the same qrels, with the tests of every other run against the first."""

    names: tuple[str, ...]
    results: tuple[EvalResult, ...]
    comparisons: tuple[Comparison, ...] = field(default=())

    def table(self, markdown: bool = False) -> str:
        """Per-query rows (when the results ask for them; a query's runs together), the means, the tests, and notes."""
        measures = self.results[0].measures
        parts = []
        if any(r.per_query for r in self.results):  # by query, then run: a query's rows side by side, as compared
            queries = dict.fromkeys(q for r in self.results for q in r.by_query)
            rows = [
                [n, q, *(_num(r.by_query[q][m]) for m in measures)]
                for q in queries
                for n, r in zip(self.names, self.results)
                if q in r.by_query
            ]
            parts.append(format_table(["run", "query", *measures], rows, markdown))
        rows = [[n, str(r.num_queries), *(_num(r.mean[m]) for m in measures)] for n, r in zip(self.names, self.results)]
        for run in sorted({c.run for c in self.comparisons}):
            tests = {c.measure: c for c in self.comparisons if c.run == run}
            rows.append(
                [
                    f"delta ({self.names[run]} - {self.names[0]})",
                    "",
                    *(_num(tests[m].ttest.mean_delta, True) for m in measures),
                ]
            )
            rows.append(["paired t-test p", "", *(_p(tests[m].ttest.p_value) for m in measures)])
            rows.append(["Wilcoxon p", "", *(_p(tests[m].wilcoxon.p_value) for m in measures)])
        parts.append(format_table(["run", "queries", *measures], rows, markdown))
        parts.append("\n".join(self._notes()))
        return "\n\n".join(p for p in parts if p)

    def _notes(self) -> list[str]:
        notes = [f"binary measures (RR, AP, P, R) count grade >= {self.results[0].rel_level} relevant"]
        if (compared := len({c.run for c in self.comparisons})) > 1:
            notes.append(f"{compared} runs tested against {self.names[0]}: p-values are not corrected for "
                         f"multiple comparisons (Bonferroni: multiply by {compared})")
        longest = max(r.depth for r in self.results)
        for name, r in zip(self.names, self.results):
            if r.missing:
                notes.append(f"{name}: judged queries without results (scored 0): {len(r.missing)}")
            if r.unjudged:
                notes.append(f"{name}: queries without judgements (ignored): {len(r.unjudged)}")
            if zeros := leading_zero_pairs(r.unjudged, r.missing):
                ours, theirs = zeros[0]
                notes.append(f"{name}: query ids that differ from judged ones only in leading zeros (scored 0; write "
                             f"them alike): {len(zeros)}, e.g. {ours!r} in the run, {theirs!r} in the qrels")
            cut = [m for m in r.measures if "@" in m and r.depth < min(longest, int(m.rpartition("@")[2]))]
            if cut and r.depth:  # a reranked top 10 beside a run of 1,000: AP@100 compares lengths, not rankings
                notes.append(f"{name}: rankings hold at most {counted(r.depth, 'document')}, the other run's up to {longest}: "
                             f"{', '.join(cut)} count the rest as not retrieved")
        return notes

    def to_dict(self) -> dict:
        """A JSON-ready summary: the measures, means per run, the tests when comparing (a value
        that is not a number, such as a test's p on fewer than 2 queries, is None), each run's judged
        queries without results (scored 0) and run queries without judgements (ignored), as the
        table's notes count them (run -> qids), and each run's per-query values (run -> qid ->
        measure -> value) when the results ask for them."""
        out = {
            "measures": list(self.results[0].measures),
            "runs": {n: {"queries": r.num_queries, **r.mean} for n, r in zip(self.names, self.results)},
            "missing": {n: list(r.missing) for n, r in zip(self.names, self.results)},
            "unjudged": {n: list(r.unjudged) for n, r in zip(self.names, self.results)},
            "rel_level": self.results[0].rel_level,
            "comparisons": [
                {
                    "run": self.names[c.run],
                    "against": self.names[0],
                    "measure": c.measure,
                    **{
                        t.test: {"statistic": _json_number(t.statistic), "p": _json_number(t.p_value),
                                 "mean_delta": _json_number(t.mean_delta), "n": t.n}
                        for t in (c.ttest, c.wilcoxon)
                    },
                }
                for c in self.comparisons
            ],
        }
        if any(r.per_query for r in self.results):
            out["per_query"] = {n: r.by_query for n, r in zip(self.names, self.results)}
        return out


def evaluate_files(
    run_path: str | Path,
    qrels_path: str | Path,
    *,
    measures: Sequence[str] = DEFAULT_MEASURES,
    per_query: bool = False,
    rel_level: int = 1,
    compare: str | Path | Sequence[str | Path] | None = None,
    qrels_format: str | None = None,
) -> EvalReport:
    """Evaluate a run file (and optionally compare others with it) against a qrels file.

    The one call behind ``ckqti eval RUN QRELS [--per-query] [--compare RUN2 ...]``; see
    :func:`evaluate` for the arguments and conventions. With ``compare`` (a run file, or several)
    the report holds every run and the paired tests of each compared run against the first.
    :func:`evaluate_runs` takes runs and qrels in memory too.

    Raises:
        InputError: unreadable run or qrels files (naming file and line), or bad arguments.
    """
    return evaluate_runs(run_path, qrels_path, measures=measures, per_query=per_query, rel_level=rel_level,
                         compare=compare, qrels_format=qrels_format)


RunSource = str | Path | Mapping[str, Ranking]  # a run file, or a run in memory: qid -> {docid: score}


def check_run_source(run, name: str) -> None:
    """A run to evaluate is a path or a run in memory (a dict), else an :class:`OptionError` naming ``name``."""
    if not isinstance(run, (str, os.PathLike, Mapping)):
        raise OptionError(f"{name} must be a path, got {type(run).__name__} (or a run in memory: a dict "
                          "qid -> {docid: score})", (name,))


def checked_compare(compare):
    """:func:`ckqti.api.evaluate`'s ``compare``: None, one run (a path or a dict), or runs in any iterable, read
    once into a tuple; each checked by :func:`check_run_source`."""
    if compare is not None and not isinstance(compare, (str, os.PathLike, Mapping)):
        try:
            compare = tuple(compare)  # an iterator is read once, here
        except TypeError:
            compare = (compare,)
        for other in compare:
            check_run_source(other, "compare")
    elif compare is not None:
        check_run_source(compare, "compare")
    return compare


def evaluate_runs(
    run: RunSource,
    qrels: str | Path | Mapping[str, Mapping[str, int]],
    *,
    measures: Sequence[str] = DEFAULT_MEASURES,
    per_query: bool = False,
    rel_level: int = 1,
    compare: RunSource | Sequence[RunSource] | None = None,
    qrels_format: str | None = None,
) -> EvalReport:
    """:func:`evaluate_files` of runs and qrels that are files or in memory, mixed as they come: a run in memory is
    ``qid -> {docid: score}`` or ``qid -> [(docid, score), ...]``, qrels ``qid -> {docid: grade}``
    (:func:`evaluate`'s). A run file is named by its file name in the report (its path when two share one), a run
    in memory by its place: ``"run"`` first, then ``"run 2"``, ``"run 3"``.

    Raises:
        InputError: unreadable run or qrels files (naming file and line), runs or qrels in memory of another shape
            (naming the entry), a run given twice, or bad arguments.
    """
    from indexer.readers import read_qrels  # imported on use: keeps this module free of the indexer package
    from retriever.run_reader import read_run_queries

    others = [] if compare is None else [compare] if isinstance(compare, (str, os.PathLike, Mapping)) else list(compare)
    runs = [run, *others]
    names = [Path(r).name if isinstance(r, (str, os.PathLike)) else "run" if i == 0 else f"run {i + 1}"
             for i, r in enumerate(runs)]
    for i, r in enumerate(runs):
        if any(given is r or (isinstance(r, (str, os.PathLike)) and isinstance(given, (str, os.PathLike))
                              and Path(r).resolve() == Path(given).resolve()) for given in runs[:i]):
            raise InputError("is given twice: a run compared with itself", r if isinstance(r, (str, os.PathLike)) else names[i])
    if isinstance(qrels, Mapping):
        qrels_path: str | Path = "qrels"
        judgements = checked_qrels(qrels)
    else:
        qrels_path, judgements = qrels, read_qrels(qrels, qrels_format)
    check_rel_level(judgements, rel_level, None if isinstance(qrels, Mapping) else qrels_path)
    judged = {str(q) for q, docs in judgements.items() if docs}
    results = []
    for r, name in zip(runs, names):  # one run file held at a time, and of it only the judged queries' rankings
        if isinstance(r, Mapping):
            check_overlap(r, judgements, name, qrels_path)
            results.append(evaluate(r, judgements, measures, per_query, rel_level))
            continue
        held, qids = read_run_queries(r, judged)
        check_overlap(qids, judgements, r, qrels_path)
        result = evaluate(held, judgements, measures, per_query, rel_level)
        results.append(replace(result, unjudged=tuple(q for q in qids if q not in judged)))
        del held
    if len(set(names)) < len(names):
        names = [str(r) if isinstance(r, (str, os.PathLike)) else name for r, name in zip(runs, names)]
    comparisons = tuple(c for i in range(1, len(results)) for c in compare_results(results[0], results[i], i))
    return EvalReport(tuple(names), tuple(results), comparisons)


def check_overlap(run: Mapping[str, Ranking] | Sequence[str], qrels: Mapping[str, Mapping[str, int]],
                  run_path: str | Path, qrels_path: str | Path) -> None:
    """A run (or the ids of its queries, each of which ranks a document, as a run file's do) that ranks
    documents for none of the judged queries is evaluated against the wrong qrels (or query ids written
    differently): an error, where trec_eval would print zeros."""
    judged = {str(q) for q, docs in qrels.items() if docs}
    ranked = [str(q) for q, docs in run.items() if ranks_any(docs)] if isinstance(run, Mapping) else [str(q) for q in run]
    if ranked and judged and judged.isdisjoint(ranked):
        raise InputError(f"none of its {counted(len(ranked), 'query', 'queries')} is judged in {qrels_path} "
                         f"(query ids such as {ranked[0]!r} against {min(judged)!r} there): "
                         "are these the qrels of this run's queries?", run_path)


def leading_zero_pairs(unjudged: Sequence[str], missing: Sequence[str]) -> list[tuple[str, str]]:
    """``(run qid, judged qid)`` pairs among a run's unjudged queries and its missing judged ones that
    write one number with different leading zeros (``"051"`` and ``"51"``): the same query, which
    query ids compared as strings (here, as in trec_eval) never match."""
    number = {q.lstrip("0"): q for q in missing if q.isascii() and q.isdigit()}
    return [(q, number[q.lstrip("0")]) for q in unjudged if q.isascii() and q.isdigit() and q.lstrip("0") in number]


def _json_number(value: float) -> float | None:
    """``value``, or None where it is not a finite number (JSON has no NaN or infinity)."""
    return value if math.isfinite(value) else None


def _num(value: float, signed: bool = False) -> str:
    return f"{value:+.4f}" if signed else f"{value:.4f}"


def _p(value: float) -> str:
    return "nan" if math.isnan(value) else (f"{value:.1e}" if value < 1e-4 else f"{value:.4f}")
