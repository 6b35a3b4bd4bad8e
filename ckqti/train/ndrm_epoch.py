"""One epoch of NDRM training: its examples, Adam steps on the ranking (and distillation) loss, dev validation."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor, nn

from ckqti.models.inputs import pad_rows
from ckqti.train import pseudo
from ckqti.train.losses import distill_loss, finite_loss, listwise_loss, ranknet_loss
from ckqti.train.ndrm_config import TrainConfig
from ckqti.train.ndrm_data import TrainingData
from ckqti.train.sampling import LABELS_WITH_RELEVANT, Example, sample_epoch
from ckqti.train.scoring import as_run, encode_by_length, score_pairs


def epoch_examples(data: TrainingData, config: TrainConfig, epoch: int) -> list[Example]:
    """The examples of one epoch, a function of ``(seed, epoch)`` only."""
    rng = np.random.default_rng([config.seed, epoch])
    qids = list(data.train_qids) + pseudo.draw_pseudo(data.pseudo_qids, config.pseudo_per_epoch, rng)
    cands = {q: data.candidates.get(q, [])[: config.depth] for q in qids}
    return sample_epoch(qids, data.relevant, cands, len(data.collection), rng, config.negatives)


def _score_groups(model: nn.Module, data: TrainingData, qids: Sequence[str], docs: Sequence[int], per_query: int,
                  doc_terms: int, device: torch.device) -> Tensor:
    """Scores of ``per_query`` documents for each query, documents listed query by query -> ``[len(qids), per_query]``."""
    coll = data.collection
    query = pad_rows([data.query_ids[q] for q in qids]).to(device).repeat_interleave(per_query, dim=0)  # [B * k, Q]
    lengths = torch.tensor([len(coll.doc(d)) for d in docs], dtype=torch.float32, device=device)  # [B * k]
    enc = encode_by_length(model, [coll.doc(d)[:doc_terms] for d in docs], lengths, device)  # [B * k, L]
    # scored in one call: NDRM2's tf and length means and NDRM3's BatchNorm take the whole batch's statistics
    return model.encoded_term_scores(query, enc).sum(-1).view(len(qids), per_query)


def teacher_group(data: TrainingData, batch: Sequence[Example], k: int,
                  rng: np.random.Generator) -> tuple[list[str], list[int], np.ndarray]:
    """For each example whose query the teacher scored: ``k`` of its scored documents (without replacement
    when it has ``k``); returns ``(qids, documents query by query, teacher scores [B', k])``."""
    qids, docs, scores = [], [], []
    for ex in batch:
        if ex.qid not in data.teacher:
            continue
        idx, sc = data.teacher[ex.qid]
        pick = rng.choice(len(idx), size=k, replace=len(idx) < k)
        qids.append(ex.qid)
        docs += [int(i) for i in idx[pick]]
        scores.append(sc[pick])
    return qids, docs, np.asarray(scores, dtype=np.float32).reshape(len(qids), k)


def train_step(
    model: nn.Module, optimizer: torch.optim.Optimizer, batch: Sequence[Example], data: TrainingData,
    doc_terms: int, device: torch.device, config: TrainConfig | None = None, rng: np.random.Generator | None = None,
) -> float:
    """One Adam step on the ranking loss of a batch of examples (``config.loss``, RankNet without a config;
    plus the teacher's distillation loss when ``data.teacher`` and ``config.distill_weight`` are set);
    returns the loss."""
    docs = [d for ex in batch for d in ex.docs]
    per_query = len(batch[0].docs)
    scores = _score_groups(model, data, [ex.qid for ex in batch], docs, per_query, doc_terms, device)  # [B, n + 3]
    labels = torch.tensor([ex.labels for ex in batch], device=device)  # [B, n + 3]
    if config is not None and config.loss == "lce":  # examples without a relevant document (label 2) add nothing
        loss = listwise_loss(scores, labels, relevant=LABELS_WITH_RELEVANT[0])
    else:
        loss = ranknet_loss(scores, labels)
    if data.teacher and config is not None and config.distill_weight > 0:
        qids, t_docs, t_scores = teacher_group(data, batch, config.distill_docs, rng or np.random.default_rng(0))
        if qids:
            student = _score_groups(model, data, qids, t_docs, config.distill_docs, doc_terms, device)  # [B', k]
            loss = loss + config.distill_weight * distill_loss(student, torch.from_numpy(t_scores).to(device))
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    return float(loss.detach())


def run_epoch(
    model: nn.Module, optimizer: torch.optim.Optimizer, data: TrainingData, config: TrainConfig, epoch: int,
    device: torch.device,
) -> dict[str, float]:
    """Train one epoch (0-based ``epoch``); returns its mean loss and example count."""
    from ckqti.progress import progress_bar

    examples = epoch_examples(data, config, epoch)
    rng = np.random.default_rng([config.seed, epoch, 1])  # the teacher's documents (only drawn with a teacher)
    doc_terms = config.train_doc_terms or model.config.max_doc_terms
    model.train()
    losses = []
    steps = range(0, len(examples), config.batch_size)[: config.max_steps]
    bar = progress_bar(steps, desc=f"epoch {epoch + 1}/{config.epochs}", unit="step", show=config.progress)
    for start in bar:
        loss = train_step(model, optimizer, examples[start : start + config.batch_size], data, doc_terms, device, config,
                          rng)
        losses.append(finite_loss(loss, f"epoch {epoch + 1}, step {len(losses) + 1}"))
        bar.set_postfix(loss=f"{np.mean(losses[-20:]):.4f}")
    return {"loss": float(np.mean(losses)) if losses else 0.0, "examples": len(examples)}


def validate(model: nn.Module, data: TrainingData, config: TrainConfig, device: torch.device) -> float:
    """Mean nDCG@10 of the dev queries, reranking their top ``dev_depth`` candidates."""
    from ckqti.evaluate import evaluate

    cands = {q: data.candidates.get(q, [])[: config.dev_depth] for q in data.dev_qids}
    scores = score_pairs(model, data.query_ids, data.collection, cands, config.eval_batch_size,
                         model.config.max_doc_terms, device, progress=config.progress)
    run = as_run(scores, data.collection.docids)
    return float(evaluate(run, data.dev_qrels, ["nDCG@10"]).mean["nDCG@10"])
