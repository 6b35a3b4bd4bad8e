"""``ckqti train``: train a model on judged queries and BM25 candidates."""

from __future__ import annotations

import click

from ckqti import api
from ckqti.cli.base import command
from ckqti.cli.notes import echo, note
from ckqti.cli.options import (
    POSITIVE,
    Float,
    Integer,
    OutPath,
    PathArg,
    corpus_orcas_option,
    device_option,
    home_expanded,
    qrels_format_option,
    queries_format_option,
    quiet,
    quiet_option,
    rel_level_option,
)


class EmbeddingStart(click.ParamType):
    """``--embeddings``: a named start (skipgram, minilm, random) or an existing checkpoint file (``.pt``)."""

    name = "skipgram|minilm|random|FILE.pt"

    def convert(self, value, param, ctx):
        from pathlib import Path

        from ckqti.train.embedding_init import EMBEDDING_INITS

        value = home_expanded(value)
        if value in EMBEDDING_INITS or (str(value).endswith(".pt") and Path(value).is_file()):
            return str(value)
        self.fail(f"{value!r} is neither one of {', '.join(EMBEDDING_INITS)} nor an existing checkpoint file (.pt)",
                  param, ctx)


@command("train", short_help="Train a model on judged queries and BM25 candidates.")
@click.option("--model", "variant", type=click.Choice(["ndrm1", "ndrm2", "ndrm3", "tk", "tkl", "idcm"]), default="ndrm3",
              show_default=True, help="Kind of model to train (other commands' --model takes the checkpoint it writes).")
@click.option("--corpus", required=True, type=PathArg(), help="Corpus file (TSV, JSONL, TREC, SMART).")
@click.option("--queries", required=True, type=PathArg(), help="Queries file (TSV, JSONL, TREC, SMART).")
@queries_format_option
@click.option("--qrels", required=True, type=PathArg(), help="Training judgements.")
@click.option("--out", required=True, type=OutPath(), help="Checkpoint to write (best dev epoch).")
@click.option("--dev-qrels", type=PathArg(), default=None,
              help="NDRM: dev judgements (else carved from --qrels, as TK, TKL and IDCM always do).")
@click.option("--dev-fraction", type=Float(0, 1, min_open=True, max_open=True), default=0.1, show_default=True, help="Share of training queries held out as dev.")
@click.option("--epochs", type=POSITIVE, default=10, show_default=True,
              help="Passes over the training queries at most (IDCM: in stages 1 and 2 each); --patience may stop sooner.")
@click.option("--patience", type=POSITIVE, default=3, show_default=True, help="Epochs without a better dev nDCG@10 before stopping.")
@click.option("--max-steps", type=POSITIVE, default=None,
              help="Optimizer steps per epoch at most, for a quick trial of a set-up (default: every training query).")
@click.option("--batch-size", type=POSITIVE, default=32, show_default=True,
              help="Queries per step (NDRM: the relevant, --negatives BM25 and 2 random documents each; "
                   "TK/TKL/IDCM: a triple each, or with --loss lce the relevant and --negatives).")
@click.option("--lr", type=Float(0, min_open=True), default=None,
              help="NDRM learning rate [default: 1e-4] (TK/TKL/IDCM train with the SPEC's two rates).")
@click.option("--seed", type=Integer(0, 2**32 - 1), default=0, show_default=True,
              help="Seeds the dev split, sampling, initial weights, dropout and skip-gram.")
@device_option
@click.option("--weak-supervision", type=click.Choice(["titles"]), default=None, help="Documents' titles as pseudo-queries for their own documents (NDRM, TK, TKL).")
@click.option("--embeddings", type=EmbeddingStart(), default=None,
              help="Initial word vectors (NDRM, TK, TKL): skipgram, minilm, random, or a checkpoint file whose word "
                   "vectors of the same width start the model [default: skipgram].")
@click.option("--init", "init", type=click.Choice(["paper", "match"]), default=None,
              help="Initial weights (NDRM, TK, TKL) [default: paper for NDRM, match for TK/TKL].")
@click.option("--format", "fmt", type=click.Choice(["tsv", "jsonl", "trec", "smart"]), default=None,
              help="Corpus format (default: from the file).")
@corpus_orcas_option(" (BM25 candidates still search the plain corpus).")
@qrels_format_option
@rel_level_option("the positives training samples, and the queries that may be held out as dev")
@click.option("--resume", is_flag=True,
              help="Continue an interrupted run from its last finished epoch, saved in <out>.work (state.pt; IDCM: "
                   "stage<N>.state.pt; same settings and data, epochs and patience may change). IDCM reuses its "
                   "finished stages in <out>.work by itself when settings and data match.")
@click.option("--loss", type=click.Choice(["margin", "ranknet", "lce"]), default=None,
              help="Pairwise margin (TK/TKL/IDCM's default), RankNet (NDRM's default), or listwise (lce: the relevant "
                   "document's softmax cross-entropy against the query's other documents).")
@click.option("--negatives", type=Integer(1), default=1, show_default=True,
              help="BM25 negatives per query and step (TK/TKL/IDCM: with --loss lce; NDRM: in each example, next to "
                   "the relevant and 2 random documents; 1 is the published sampling).")
@click.option("--term-weights", type=click.Choice(["none", "idf"]), default="none", show_default=True,
              help="TK/TKL: weigh each query term by its idf in the collection read (none: the papers' sum).")
@click.option("--tail-windows", type=click.Choice(["partial", "whole"]), default=None,
              help="TKL: keep the saturation windows that run past a document's end (partial, the reference's) or drop "
                   "them (whole: no one-token region at a document's end) [default: partial].")
@click.option("--max-doc-length", type=POSITIVE, default=None,
              help="TKL/IDCM: document tokens the model reads in training, kept in its checkpoint for rerank and "
                   "explain [default: 2,000] (TK's cap is the SPEC's 200, NDRM's 4,000 terms).")
@click.option("--explicit", is_flag=True,
              help="TK/TKL: combine the score with NDRM2's explicit (BM25-like) term matching, as NDRM3 combines its "
                   "channels; the model starts as NDRM2 alone.")
@click.option("--teacher", type=PathArg(dir_okay=False), default=None,
              help="NDRM/TK/TKL: a teacher's scores ({'scores': {qid: {docid: score}}}, .json or .json.gz) to distil "
                   "listwise beside the ranking loss (training queries only).")
@click.option("--distill-docs", type=Integer(1), default=8, show_default=True,
              help="With --teacher: teacher-scored documents per query and step.")
@click.option("--distill-weight", type=Float(0), default=1.0, show_default=True,
              help="With --teacher: weight of the distillation loss.")
@click.option("--latent-gate", type=Float(0, 1, min_open=True), default=None,
              help="NDRM1/NDRM3: score a term's latent channel only where it occurs in the document or its cosine "
                   "with a document vector reaches this threshold (0 elsewhere), so that the learned index is exact.")
@click.option("--fixed-bm25", is_flag=True,
              help="NDRM2/NDRM3: the explicit channel is BM25 with Anserini's k1 0.9, b 0.4 and stays so (its two "
                   "parameters and statistics are not trained; on any collection it reads that collection's avgdl).")
@click.option("--frozen-embeddings", is_flag=True,
              help="NDRM1/NDRM3/TK/TKL: keep the initial word vectors (e.g. --embeddings minilm) as they are; the "
                   "rest of the model trains.")
@click.option("--selector-loss", type=click.Choice(["lambda", "mse", "kl"]), default=None,
              help="IDCM: stage 3's loss distilling the window selector from the cross-encoder: LambdaLoss over its "
                   "top windows (the paper's), or the MSE / KL alternatives [default: lambda].")
@quiet_option
def train_cmd(variant, corpus, queries, queries_format, qrels, out, dev_qrels, dev_fraction, epochs, patience, max_steps,
              batch_size, lr, seed, device, weak_supervision, embeddings, init, fmt, orcas, qrels_format, rel_level, resume, loss,
              negatives, term_weights, teacher, distill_docs, distill_weight, latent_gate, tail_windows, max_doc_length, explicit,
              fixed_bm25, frozen_embeddings, selector_loss):
    """Train a model on BM25 candidates (NDRM: RankNet or listwise; TK/TKL/IDCM: pairwise or listwise); writes the best dev epoch to --out."""
    r = api.train(variant, corpus, queries, qrels, out, dev_qrels=dev_qrels, fmt=fmt, qrels_format=qrels_format,
                  queries_format=queries_format, resume=resume, orcas=orcas, epochs=epochs, patience=patience,
                  max_steps=max_steps, batch_size=batch_size, lr=lr, seed=seed,
                  dev_fraction=dev_fraction, rel_level=rel_level, device=device,
                  weak_supervision=weak_supervision, embeddings=embeddings, init=init, loss=loss,
                  negatives=negatives, term_weights=term_weights, tail_windows=tail_windows,
                  max_doc_length=max_doc_length, explicit=explicit, teacher=teacher,
                  distill_docs=distill_docs, distill_weight=distill_weight, latent_gate=latent_gate,
                  fixed_bm25=fixed_bm25, frozen_embeddings=frozen_embeddings, selector_loss=selector_loss,
                  progress=not quiet())
    stage = f" of stage {r.history[-1]['stage']}" if variant == "idcm" else ""
    if r.best_dev_ndcg10 == 0:
        note("note: dev nDCG@10 was 0 at every epoch (the dev queries' relevant documents were never ranked in "
             "the top 10): dev did not choose this model")
    start = " (the model before training: no epoch beat it)" if r.best_epoch == 0 else ""
    echo(f"{r.model_id}: best dev nDCG@10 {r.best_dev_ndcg10:.4f} at epoch {r.best_epoch} of {r.epochs_run}{stage}{start} "
         f"-> {out}")
