"""``ckqti eval``: measures of a TREC run against judgements, and comparisons of runs."""

from __future__ import annotations

import click

from ckqti import api
from ckqti.cli.base import command
from ckqti.cli.notes import echo
from ckqti.cli.options import PathArg, qrels_format_option, rel_level_option
from ckqti.json_form import json_text


@command("eval", short_help="Evaluate a TREC run against judgements; compare runs.")
@click.argument("run", type=PathArg())
@click.argument("qrels", type=PathArg())
@click.option("--per-query", is_flag=True, help="Also print every query's measures.")
@click.option("--compare", type=PathArg(), multiple=True,
              help="Another run: its delta against RUN, paired t-test and Wilcoxon signed-rank test; repeatable "
                   "(each run against RUN).")
@qrels_format_option
@rel_level_option("for RR, AP, P and R; nDCG and NCG keep every grade's gain")
@click.option("--measures", default=None, metavar="M1,M2,...",
              help="Comma-separated measures to report: nDCG, RR (MRR), AP (MAP), NCG, P or R, optionally @k "
                   "[default: nDCG@10,RR@10,AP@100,NCG@100,P@10,R@100].")
@click.option("--json", "as_json", is_flag=True,
              help="One JSON object for programs: measures, means, queries without results or judgements, tests (with "
                   "--compare), per-query values (with --per-query).")
@click.option("--markdown", is_flag=True, help="Markdown tables.")
def eval_cmd(run, qrels, per_query, compare, qrels_format, rel_level, measures, as_json, markdown):
    """Evaluate a TREC RUN against QRELS: nDCG@10, RR@10, AP@100, NCG@100, P@10, R@100 (with --compare,
    paired t-test and Wilcoxon signed-rank test)."""
    if as_json and markdown:
        raise click.UsageError("--json and --markdown do not combine")
    chosen = None if measures is None else [m.strip() for m in measures.split(",") if m.strip()]
    report = api.evaluate(run, qrels, per_query, list(compare) or None, qrels_format, rel_level, chosen)
    if as_json:
        click.echo(json_text(report.to_dict()))
        return
    echo(report.table(markdown))
