"""Effectiveness measures: parsing their names, and their per-query values.

Measures come from ``ir_measures``' pytrec_eval provider (trec_eval's own C code), pinned
so that every measure sees the same ranking: score descending, ties broken by docid
descending (ir_measures' default provider mix breaks ties differently for RR than for
nDCG), scores compared in single precision as trec_eval holds them (:func:`~retriever.runs.trec_order`).
RR@k is trec_eval's ``recip_rank`` on the run cut to its top k (that provider has
no cut-off RR). NCG, which trec_eval lacks, is :func:`ncg_at_k`, ordered the same way. A measure
without a cutoff takes every retrieved document: P and R are then trec_eval's ``set_P`` and
``set_recall`` (its ``P`` and ``recall`` need a cutoff).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import ir_measures

from ckqti.errors import InputError, OptionError

DEFAULT_MEASURES: tuple[str, ...] = ("nDCG@10", "RR@10", "AP@100", "NCG@100", "P@10", "R@100")

# Accepted families; MRR and MAP are read as RR and AP (the papers' names for them).
# Accepted in any case (ndcg@10, map@100, as trec_eval and ir_datasets users write them).
_FAMILIES = {"ndcg": "nDCG", "ncg": "NCG", "rr": "RR", "mrr": "RR", "ap": "AP", "map": "AP", "p": "P", "r": "R"}

_BINARY = frozenset({"RR", "AP", "P", "R"})

_UNCUT = {"P": "SetP", "R": "SetR"}  # ir_measures' P and R need a cutoff; over every retrieved document they are these

_MEASURE = re.compile(r"^([A-Za-z]+)(?:@([0-9]+))?$")  # ASCII digits: "nDCG@١٠" is not nDCG@10

# trec_eval reads a cutoff as a C long (32 bits on Windows); beyond 2**63 - 1 it named the measure otherwise than
# asked (ndcg_cut_9223372036854775807), which ir_measures met with a KeyError
MAX_CUTOFF = 2**31 - 1


@dataclass(frozen=True)
class Measure:
    """A parsed measure name: ``family`` (nDCG, NCG, RR, AP, P, R), an optional ``cutoff``, and the ``name`` every
    table and key uses: the family's and the cutoff's (``ndcg@010`` is ``nDCG@10``, ``MRR@10`` is ``RR@10``)."""

    family: str
    cutoff: int | None
    name: str


def parse_measure(name: str) -> Measure:
    """Parse ``"nDCG@10"``, ``"RR@10"`` (or ``"MRR@10"``), ``"AP@100"`` (or ``"MAP@100"``), ``"NCG@100"``, ``"P@10"``,
    ``"R@100"``, in any case; the cutoff is optional. The name is given back in that spelling (:class:`Measure`)."""
    match = _MEASURE.match(name.strip())
    family = _FAMILIES.get(match.group(1).lower()) if match else None
    if match is None or family is None:
        raise InputError(f"unknown measure {name!r}: use nDCG, RR (MRR), AP (MAP), NCG, P or R, optionally @k")
    cutoff = int(match.group(2)) if match.group(2) else None
    if cutoff == 0:
        raise InputError(f"measure {name!r}: the cutoff must be at least 1")
    if cutoff is not None and cutoff > MAX_CUTOFF:
        raise InputError(f"measure {name!r}: the cutoff must be at most {MAX_CUTOFF:,}")
    return Measure(family, cutoff, family if cutoff is None else f"{family}@{cutoff}")


def parse_measures(measures: Sequence[str]) -> list[Measure]:
    """Parse each of ``measures`` (see :func:`parse_measure`); none, or one listed twice, is an error."""
    parsed = [parse_measure(m) for m in measures]
    if not parsed:
        raise InputError("no measure given")
    if len({(m.family, m.cutoff) for m in parsed}) != len(parsed):
        raise InputError(f"a measure is listed twice in {list(measures)} (MRR is RR, MAP is AP)")
    return parsed


def checked_measures(measures) -> tuple[str, ...]:
    """:func:`ckqti.api.evaluate`'s ``measures`` as a tuple of names :func:`parse_measures` reads: None is
    :data:`DEFAULT_MEASURES`, an iterator is read once; else an :class:`OptionError` naming ``measures``."""
    if measures is None:
        measures = DEFAULT_MEASURES
    if not isinstance(measures, str):
        try:
            measures = tuple(measures)  # an iterator is read once: by the check below, then by the evaluation
        except TypeError:
            pass
    if not isinstance(measures, tuple) or not all(isinstance(m, str) for m in measures):
        raise OptionError(f"measures must be a list of names, e.g. {list(DEFAULT_MEASURES[:2])}", ("measures",))
    try:
        parse_measures(measures)
    except InputError as e:
        raise OptionError(f"measures: {e.message} (default: {','.join(DEFAULT_MEASURES)})", ("measures",)) from None
    return measures


def ncg_at_k(ranking: Sequence[str], gains: Mapping[str, int], k: int | None) -> float:
    """Normalized cumulative gain: the gain of the top ``k`` retrieved over the ``k`` largest gains judged.

    ``ranking`` is in rank order; unjudged documents and negative grades gain 0; ``k=None``
    takes every retrieved document and every judged gain. A query without positive gains scores 0.
    """
    top = ranking if k is None else ranking[:k]
    got = sum(max(gains.get(docid, 0), 0) for docid in top)
    best = sorted((g for g in gains.values() if g > 0), reverse=True)
    ideal = sum(best if k is None else best[:k])
    return got / ideal if ideal > 0 else 0.0


def trec_eval_scores(
    measures: list[Measure],
    run: dict[str, dict[str, float]],
    qrels: dict[str, dict[str, int]],
    rel_level: int,
    out: dict[str, dict[str, float]],
) -> None:
    """Fill ``out[qid][name]`` with trec_eval's values (ir_measures' pytrec_eval provider).

    ``run`` must already be in :func:`~retriever.runs.trec_order`. trec_eval has no
    cut-off reciprocal rank (and ir_measures' provider silently computes RR@k as RR), so
    RR@k is trec_eval's ``recip_rank`` on the run cut to its top k, as MS MARCO's MRR@10 does.
    """
    # trec_eval reads a negative grade as "pooled, not judged": no gain, not relevant, the same values as 0 for
    # these measures. But a query whose grades are all -2 or lower makes it size an array below 0 (pytrec_eval
    # 0.5.11): a segmentation fault, or another query's values. Given as 0, they score the same and cannot.
    qrels = {q: {d: max(g, 0) for d, g in docs.items()} for q, docs in qrels.items()}
    whole: dict = {}  # ir_measures measure -> our name, on the whole run
    for m in measures:
        family = getattr(ir_measures, _UNCUT.get(m.family, m.family) if m.cutoff is None else m.family)
        measure = family(rel=rel_level) if m.family in _BINARY else family
        if m.family == "RR" and m.cutoff is not None:
            cut = {qid: dict(list(docs.items())[: m.cutoff]) for qid, docs in run.items()}
            provider_scores({measure: m.name}, cut, qrels, out)
        else:
            whole[measure if m.cutoff is None else measure @ m.cutoff] = m.name
    provider_scores(whole, run, qrels, out)


def provider_scores(names: dict, run: dict[str, dict[str, float]], qrels: dict, out: dict) -> None:
    provider = ir_measures.pytrec_eval
    unsupported = [str(m) for m in names if not provider.supports(m)]
    if unsupported:
        raise RuntimeError(f"pytrec_eval cannot compute {unsupported}")
    if not names or not run:
        return
    for metric in provider.evaluator(list(names), qrels).iter_calc(run):
        out[metric.query_id][names[metric.measure]] = float(metric.value)
