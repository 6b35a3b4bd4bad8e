"""``ckqti rerank``: rerank each query's top candidates with a model into a TREC run."""

from __future__ import annotations

import click

from ckqti import api
from ckqti.cli.base import command
from ckqti.cli.notes import count_queries, echo, note, repeated_note, skipped_reasons
from ckqti.cli.options import (
    POSITIVE,
    NameOrPath,
    OutPath,
    PathArg,
    check_format_needs_corpus,
    corpus_orcas_option,
    device_option,
    queries_format_option,
    quiet,
    quiet_option,
)
from ckqti.terminal import counted

UNKNOWN_WORDS_NOTE = 0.02  # rerank's note: this share of the candidates' words unknown to the model (SciFact's own: 0)


@command("rerank", short_help="Rerank each query's top candidates with a model.")
@click.option("--queries", required=True, type=PathArg(), help="Queries file (TSV, JSONL, TREC, SMART).")
@queries_format_option
@click.option("--candidates", required=True, type=NameOrPath(), help="'bm25' (needs --corpus), an index directory, or a TREC run file.")
@click.option("--model", "model_path", required=True, type=NameOrPath(),
              help="Checkpoint (TK, TKL, IDCM or NDRM), 'ndrm3-scifact' (the bundled NDRM3), or 'ndrm2' / "
                   "'ndrm2-anserini' (untrained, on the collection's statistics: --corpus's, else the index of --candidates).")
@click.option("--out", required=True, type=OutPath(),
              help="TREC run file to write (BM25's Lucene index is kept in OUT.work for later runs on the same corpus).")
@click.option("--depth", type=POSITIVE, default=100, show_default=True, help="Candidates reranked per query.")
@click.option("--corpus", type=PathArg(), default=None, help="Corpus for BM25 and document text.")
@click.option("--format", "fmt", type=click.Choice(["tsv", "jsonl", "trec", "smart"]), default=None,
              help="Corpus format (default: from the file).")
@click.option("--batch-size", type=POSITIVE, default=32, show_default=True, help="Documents scored at once.")
@device_option
@click.option("--tag", default=None, help="Run tag, no whitespace (default: ckqti-<kind>).")
@click.option("--max-doc-length", type=POSITIVE, default=None,
              help="Document tokens read (TKL, IDCM and NDRM; default: the length the checkpoint was trained "
                   "with, saved in it; the untrained NDRM2's 4,000 terms).")
@click.option("--adapt-vocabulary", is_flag=True,
              help="Read text with the collection's vocabulary (zero-shot): --corpus's, else the --candidates index's.")
@corpus_orcas_option(" (BM25 candidates still search the plain corpus; an index's text holds its own).")
@quiet_option
def rerank_cmd(queries, queries_format, candidates, model_path, out, depth, corpus, fmt, batch_size, device, tag,
               max_doc_length, adapt_vocabulary, orcas):
    """Rerank each query's top --depth candidates with a model; writes a TREC run."""
    check_format_needs_corpus(fmt, corpus)
    if str(candidates) == "bm25" and corpus is None:  # options that do not combine: a usage error, said first
        raise click.UsageError("--candidates bm25 needs --corpus (BM25 searches the corpus file)")
    s = api.rerank(queries, candidates, model_path, out, depth, corpus, fmt=fmt, queries_format=queries_format,
                   batch_size=batch_size, device=device, tag=tag, max_doc_length=max_doc_length,
                   adapt_vocabulary=adapt_vocabulary, orcas=orcas, progress=not quiet())
    repeated_note(s.repeated_clicks, orcas)
    if s.skipped:
        note(f"note: {count_queries(len(s.skipped))} skipped ({skipped_reasons(s.skipped, s.reasons)})")
    if s.unknown_words is not None and s.unknown_words >= UNKNOWN_WORDS_NOTE and not adapt_vocabulary:
        note(f"note: the model read {s.unknown_words:.0%} of the candidates' words as unknown (trained on another "
             "collection?); --adapt-vocabulary reads them as `ckqti index` does")
    echo(f"{count_queries(s.reranked) if s.reranked == s.queries else f'{s.reranked} of {count_queries(s.queries)}'}, "
         f"{counted(s.pairs, 'document')} reranked by {s.model_id} in {s.seconds:.2f}s ({s.ms_per_query:.0f} ms/query) -> {out}")
