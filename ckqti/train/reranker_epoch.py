"""One epoch of re-ranker training: batches of triples or groups, their losses, a teacher's distillation, Adam steps."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch
from torch import Tensor, nn

from ckqti.models.inputs import pad_rows
from ckqti.train.reranker_config import RerankerTrainConfig
from ckqti.train.reranker_data import PairData
from ckqti.train.reranker_sampling import epoch_groups, epoch_triples

ScoreFn = Callable[[Tensor, Tensor], Tensor]  # query ids [B, Q], doc ids [B, L] -> scores [B]
LossFn = Callable[[Tensor, Tensor], Tensor]  # query ids [B, Q], doc ids [B, L] -> scalar (stage 3)


def pair_loss(pos: Tensor, neg: Tensor, config: RerankerTrainConfig) -> Tensor:
    """Margin ranking or RankNet loss of positive over negative scores (each ``[B]``) -> scalar."""
    if config.loss == "ranknet":
        return nn.functional.softplus(neg - pos).mean()
    return nn.functional.margin_ranking_loss(pos, neg, torch.ones_like(pos), margin=config.margin)


def triple_batch(data: PairData, batch: Sequence[tuple[str, int, int]], device: torch.device) -> tuple[Tensor, Tensor]:
    """Queries ``[2B, Q]`` and documents ``[2B, L]``: the B positives, then the B negatives."""
    q = pad_rows([data.queries[qid] for qid, _, _ in batch])
    d = pad_rows([data.docs[p] for _, p, _ in batch] + [data.docs[n] for _, _, n in batch])
    return q.repeat(2, 1).to(device), d.to(device)


def group_batch(data: PairData, batch: Sequence[tuple[str, int, tuple[int, ...]]],
                device: torch.device) -> tuple[Tensor, Tensor]:
    """Queries ``[B * G, Q]`` and documents ``[B * G, L]``, group by group: each relevant document
    followed by its ``G - 1`` negatives (``G`` = 1 + negatives)."""
    size = 1 + len(batch[0][2])
    q = pad_rows([data.queries[qid] for qid, _, _ in batch]).repeat_interleave(size, dim=0)
    d = pad_rows([data.docs[i] for _, pos, negs in batch for i in (pos, *negs)])
    return q.to(device), d.to(device)


def group_loss(scores: Tensor, size: int) -> Tensor:
    """Softmax cross-entropy of each group's first (relevant) document; ``[B * size] -> scalar``."""
    logits = scores.view(-1, size)  # [B, size]
    return nn.functional.cross_entropy(logits, torch.zeros(logits.shape[0], dtype=torch.long, device=logits.device))


def teacher_batch(data: PairData, qids: Sequence[str], k: int, rng: np.random.Generator,
                  device: torch.device) -> tuple[Tensor, Tensor, Tensor] | None:
    """For each of ``qids`` the teacher scored, ``k`` of its scored documents (without replacement
    when it has ``k``): queries ``[B' * k, Q]``, documents ``[B' * k, L]`` query by query and the
    teacher's scores ``[B', k]``; None when the teacher scored none of them."""
    picked = [(q, rng.choice(len(data.teacher[q][0]), size=k, replace=len(data.teacher[q][0]) < k))
              for q in qids if q in data.teacher]
    if not picked:
        return None
    q = pad_rows([data.queries[qid] for qid, _ in picked]).repeat_interleave(k, dim=0)
    d = pad_rows([data.docs[int(i)] for qid, pick in picked for i in data.teacher[qid][0][pick]])
    t = torch.from_numpy(np.stack([data.teacher[qid][1][pick] for qid, pick in picked]).astype(np.float32))
    return q.to(device), d.to(device), t.to(device)


def train_epoch(score: ScoreFn | None, loss_fn: LossFn | None, model: nn.Module, optimizer, data: PairData,
                config: RerankerTrainConfig, epoch: int, device: torch.device) -> dict[str, float]:
    """One epoch of pairwise steps (``score``) or of a per-batch loss (``loss_fn``, IDCM stage 3),
    plus the teacher's distillation loss when ``data.teacher`` is set (``score`` only)."""
    from ckqti.progress import progress_bar
    from ckqti.train.losses import distill_loss, finite_loss

    rng = np.random.default_rng([config.seed, epoch, 2])  # the teacher's documents (drawn only with a teacher)
    listwise = config.loss == "lce" and loss_fn is None
    triples = (epoch_groups(data, config.depth, config.seed, epoch, config.negatives, config.pseudo_per_epoch)
               if listwise else epoch_triples(data, config.depth, config.seed, epoch, config.pseudo_per_epoch))
    starts = list(range(0, len(triples), config.batch_size))[: config.max_steps]
    model.train()
    losses = []
    for start in progress_bar(starts, desc=f"epoch {epoch + 1}", unit="step", show=config.progress, leave=False):
        part = triples[start: start + config.batch_size]
        if listwise:
            q, d = group_batch(data, part, device)
            loss = group_loss(score(q, d), 1 + config.negatives)
        elif loss_fn is not None:
            q, d = triple_batch(data, part, device)
            loss = loss_fn(q, d)
        else:
            q, d = triple_batch(data, part, device)
            s = score(q, d)  # [2B]
            half = s.shape[0] // 2
            loss = pair_loss(s[:half], s[half:], config)
        if data.teacher and loss_fn is None and config.distill_weight > 0:
            group = teacher_batch(data, [qid for qid, *_ in part], config.distill_docs, rng, device)
            if group is not None:
                tq, td, t_scores = group
                student = score(tq, td).view(t_scores.shape)  # [B', k]
                loss = loss + config.distill_weight * distill_loss(student, t_scores)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(finite_loss(loss, f"epoch {epoch + 1}, step {len(losses) + 1}"))
    return {"loss": float(np.mean(losses)) if losses else 0.0, "steps": len(losses)}
