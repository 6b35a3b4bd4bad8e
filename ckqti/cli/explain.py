"""``ckqti explain``: why a model scores a document as it does for a query."""

from __future__ import annotations

import click

from ckqti import api
from ckqti.cli.base import command
from ckqti.cli.notes import note, repeated_note
from ckqti.cli.options import (
    POSITIVE,
    NameOrPath,
    OutPath,
    PathArg,
    check_format_needs_corpus,
    corpus_orcas_option,
    device_option,
    quiet_option,
)
from ckqti.json_form import json_text
from ckqti.terminal import decoded_argument


@command("explain", short_help="Why a model scores DOCID as it does for QUERY.")
@click.argument("query")
@click.argument("docid")
@click.option("--model", "model_path", default=None, type=NameOrPath(),
              help="Checkpoint of any kind, 'ndrm3-scifact' (the bundled NDRM3), or 'ndrm2' / 'ndrm2-anserini' "
                   "(untrained, on the collection's statistics); with --index, default: the index's model.")
@click.option("--corpus", type=PathArg(), default=None, help="Corpus file holding DOCID.")
@click.option("--index", "index_path", type=PathArg(), default=None,
              help="Or an index holding DOCID (an NDRM model then reads with the index's vocabulary: its score).")
@click.option("--html", "html_out", type=OutPath(), default=None, help="Also write a self-contained HTML page.")
@click.option("--format", "fmt", type=click.Choice(["tsv", "jsonl", "trec", "smart"]), default=None,
              help="Corpus format (default: from the file).")
@click.option("--color/--no-color", default=None, help="ANSI colours (default: when stdout is a terminal and $NO_COLOR is unset or empty).")
@click.option("--json", "as_json", is_flag=True, help="JSON output for programs.")
@device_option
@click.option("--max-doc-length", type=POSITIVE, default=None,
              help="Document tokens read (TKL, IDCM and NDRM), as rerank's option: the score rerank gave with it.")
@click.option("--adapt-vocabulary", is_flag=True, help="Read text with the corpus's (or index's) vocabulary (zero-shot).")
@corpus_orcas_option()
@quiet_option
def explain_cmd(query, docid, model_path, corpus, index_path, html_out, fmt, color, as_json, device, max_doc_length,
                adapt_vocabulary, orcas):
    """Why the model scores DOCID as it does for QUERY: regions, kernels or term contributions."""
    check_format_needs_corpus(fmt, corpus)
    if (corpus is None) == (index_path is None):
        raise click.UsageError("give exactly one of --corpus or --index: where to read DOCID from")
    query = decoded_argument(query)
    e = api.explain(query, docid, model_path, corpus, index_path, html_out, fmt=fmt, device=device,
                    max_doc_length=max_doc_length, adapt_vocabulary=adapt_vocabulary, orcas=orcas)
    repeated_note(e.repeated_clicks, orcas)
    if as_json:
        click.echo(json_text(e.to_dict()))
    else:
        click.echo(e.render_terminal(color), color=color)
    if html_out:  # on stderr: --json's stdout stays one object
        note(f"wrote {html_out}")
