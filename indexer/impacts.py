"""Impact computation: a QTI model's s(t, d) for the (t, d) pairs the index stores.

Which pairs are stored (see docs/INDEX.md). Every score is stored per channel
(:mod:`ckqti.models.qti`): the model's idf-free ``channel_scores``, so that idf is applied
at query time from the index's current statistics; below, "s(t, d)" is one channel's score.

* Explicit models (NDRM2, ``is_latent`` False): s(t, d) is 0 unless t occurs in d, so
  each document's own terms are its candidates and the index is exact up to
  quantization.
* Latent models (NDRM1, NDRM3): every term scores against every document. Each term t
  gets an offset c_t on its ``"one"`` channel, the median of that channel over a sample of
  documents; the index stores ``s(t, d) - c_t`` for the document's candidate terms whose
  difference is positive, and an unstored pair scores c_t. Since a per-term constant
  changes no ranking, only
  the clipping of below-median scores and the choice of candidates lose information.
  Candidates are the document's own terms plus the ``neighbours`` other vocabulary terms
  (not in the document) whose query vector is closest to any of the document's contextual
  vectors (``max_j cos(t, d_j)``), restricted to terms with ``df >= min_df``.
* Gated latent models (``NDRMConfig.latent_gate``, :class:`ckqti.models.ndrm1.LatentGate`):
  the model itself scores a pair the same constant unless t occurs in d or
  ``max_j cos(t, d_j) >= tau``. Candidates are exactly those open pairs (every vocabulary
  term, whatever its df), the offset of every term is the closed pairs' score, and the
  index is exact up to quantization, as for explicit models.

Scores are produced in batches on the model's device (CUDA when present).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass

import numpy as np
import torch

from ckqti.errors import CkqtiError
from ckqti.models.qti import DocumentEncoding, QTIModel
from ckqti.threads import ThreadChooser, batch_threads
from indexer.cosine_bound import ThresholdCosines

# Documents sorted by length within blocks of this many before they are cut into batches
# (:func:`length_batches`): SciFact's abstracts padded to the longest of each batch of 32 in
# corpus order are 1.72M tokens for 787k real ones; sorted within blocks of 4,096, 0.81M.
SORT_BLOCK = 4096
# Largest ``[B, L, terms]`` product of :meth:`ImpactScorer.max_cosines` (64 MB of float32).
MAX_PRODUCT_ELEMENTS = 1 << 24


@dataclass(frozen=True)
class ImpactConfig:
    """How impacts are computed.

    Args:
        batch_size: documents encoded at once.
        max_doc_terms: document truncation (SPEC: 4,000 terms).
        neighbours: latent models: candidate terms per document beyond its own.
        min_df: latent models: only terms in at least this many documents are extra candidates.
        offset_sample: latent models: documents sampled to estimate per-term offsets.
        seed: sampling seed.
        batched: score a batch's candidate pairs in a few large products (:meth:`ImpactScorer.batch_impacts`)
            instead of document by document; None: on CUDA only, where the per-document kernels'
            launch and synchronisation, not arithmetic, bound the build (a lent H200, SciFact's
            bundled-NDRM3 build: 190 -> 878 documents a second), and for explicit models (NDRM2)
            everywhere: their scores are exact elementwise arithmetic, the same bits either way, and
            a document's dozen small tensor operations cost more than its arithmetic (Vaswani's
            11,429 abstracts, one thread: 5.9-6.3 -> 1.0-1.2 s). For a latent model on a CPU the
            per-document way does less arithmetic (the cosine bound of :mod:`indexer.cosine_bound`):
            9.5 s against 11.6 s batched for 1,000 SciFact abstracts on this project's 2 cores.
    """

    batch_size: int = 32
    max_doc_terms: int = 4000
    neighbours: int = 64
    min_df: int = 2
    offset_sample: int = 64
    seed: int = 0
    batched: bool | None = None

    def __post_init__(self) -> None:
        for name in ("batch_size", "max_doc_terms", "offset_sample"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1")
        if self.neighbours < 0 or self.min_df < 1:
            raise ValueError("neighbours must be >= 0 and min_df >= 1")


@dataclass(frozen=True)
class DocImpacts:
    """Float impacts of one document: ``lists`` int32[n] posting list ids (``term * C + channel``)
    and ``scores`` float32[n] (> 0)."""

    lists: np.ndarray
    scores: np.ndarray


def refuse_non_finite(finite: bool) -> None:
    """Stop a build whose model scores NaN or infinity: such impacts would be dropped as not
    positive, leaving an index without postings (a model trained into NaN weights)."""
    if not finite:
        raise CkqtiError("the model scores some terms NaN or infinite (are its weights finite?); nothing was indexed")


def pad_batch(docs: Sequence[np.ndarray], max_len: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Token id arrays -> ``[B, L]`` padded ids (0 = padding) and ``[B]`` true lengths."""
    lengths = torch.tensor([len(d) for d in docs], dtype=torch.float32)
    width = max(1, min(max_len, max((len(d) for d in docs), default=1)))
    ids = torch.zeros((len(docs), width), dtype=torch.long)
    for b, d in enumerate(docs):
        n = min(len(d), width)
        if n:
            ids[b, :n] = torch.from_numpy(np.asarray(d[:n], dtype=np.int64))
    return ids.to(device), lengths.to(device)


def length_batches(lengths: Sequence[int], batch_size: int, block: int = SORT_BLOCK) -> Iterator[np.ndarray]:
    """Batches of document positions, each block of ``block`` consecutive documents sorted by
    length (stable) before it is cut into batches of ``batch_size``, so a batch pads little.
    Every position appears once; blocks come in order, so a caller can hand results back in
    corpus order a block at a time."""
    lengths = np.asarray(lengths, dtype=np.int64)
    for start in range(0, lengths.size, block):
        order = start + np.argsort(lengths[start: start + block], kind="stable")
        for i in range(0, order.size, batch_size):
            yield order[i: i + batch_size]


def slice_encoding(enc: DocumentEncoding, b: int) -> DocumentEncoding:
    v = None if enc.vectors is None else enc.vectors[b : b + 1]
    return DocumentEncoding(enc.ids[b : b + 1], enc.mask[b : b + 1], enc.lengths[b : b + 1], v)


def model_device(model: torch.nn.Module) -> torch.device:
    for p in model.parameters():
        return p.device
    for b in model.buffers():
        return b.device
    return torch.device("cpu")


class ImpactScorer:
    """Computes stored impacts for documents with one model.

    Args:
        model: a QTI model (``ckqti.models.qti.QTIModel``), already set up for the
            corpus vocabulary, in eval mode.
        df: document frequency per term id (for latent candidate restriction).
        config: :class:`ImpactConfig`.
    """

    def __init__(self, model: QTIModel, df: np.ndarray, config: ImpactConfig = ImpactConfig()):
        self.model = model
        self.config = config
        self.device = model_device(model)
        self.channels: tuple[str, ...] = tuple(model.impact_channels)
        # latent models: the per-term offset applies to the "one" channel
        self.offset_channel = self.channels.index("one") if model.is_latent and "one" in self.channels else None
        self.offsets = np.zeros(len(df), dtype=np.float32)
        self._cand_terms = None
        self._cand_vectors = None
        self._term_table = None  # latent models: every term's query vector [V, D], computed once
        self._search: ThresholdCosines | None = None  # latent models: max cosines of the candidate terms
        self.gate = getattr(model, "gate_threshold", None) if model.is_latent else None
        self.batched = (self.device.type == "cuda" or not model.is_latent) if config.batched is None else config.batched
        if model.is_latent:
            ids = np.flatnonzero(np.asarray(df) >= (1 if self.gate is not None else config.min_df))
            ids = ids[ids >= 2]
            self._cand_terms = torch.from_numpy(ids.astype(np.int64)).to(self.device)
            with torch.no_grad():
                self._term_table = model.term_vectors(torch.arange(len(df), device=self.device))  # [V, D]
                # every term a candidate (gated models): a view of the table, not a copy
                self._cand_vectors = self._term_table[2:] if ids.size == len(df) - 2 else self._term_table[self._cand_terms]
                self._search = ThresholdCosines(self._cand_vectors, None if self.gate is not None else 0)

    @torch.no_grad()
    def fit_offsets(self, documents: Sequence[np.ndarray], vocab_size: int) -> np.ndarray:
        """Latent models: per-term offset c_t = median of the ``"one"`` channel over a document sample;
        gated latent models: the closed pairs' score, the same for every term."""
        if self.offset_channel is None:
            return self.offsets
        if self.gate is not None:
            self.offsets = np.zeros(vocab_size, dtype=np.float32)
            self.offsets[2:] = self.model.closed_pair_score()
            return self.offsets
        rng = np.random.default_rng(self.config.seed)
        n = min(self.config.offset_sample, len(documents))
        pick = rng.choice(len(documents), size=n, replace=False)
        pick = pick[np.argsort([len(documents[j]) for j in pick], kind="stable")]  # the median ignores order
        all_terms = torch.arange(2, vocab_size, device=self.device)
        rows = []
        for i in range(0, n, self.config.batch_size):
            batch = [documents[j] for j in pick[i : i + self.config.batch_size]]
            ids, lengths = pad_batch(batch, self.config.max_doc_terms, self.device)
            scores = self.model.channel_scores(all_terms, self.model.encode_documents(ids, lengths))  # [B, V-2, C]
            rows.append(scores[..., self.offset_channel].float().cpu())
        med = torch.cat(rows).median(dim=0).values.numpy()
        self.offsets = np.zeros(vocab_size, dtype=np.float32)
        self.offsets[2:] = med
        return self.offsets

    @property
    def own_terms_only(self) -> bool:
        """Whether a document's candidates are its own terms alone (explicit models, an empty
        candidate vocabulary, or a dense latent model with no neighbours)."""
        return not self.model.is_latent or self._cand_terms.numel() == 0 or (
            self.gate is None and self.config.neighbours == 0)

    def reached(self, enc: DocumentEncoding) -> list[torch.Tensor] | None:
        """Gated latent models: which candidate terms ``[V']`` reach the gate's cosine with each document
        of an encoded batch (:meth:`ThresholdCosines.reaching_batch`, one bound product for the batch);
        None for other models."""
        if self.gate is None or self.own_terms_only:
            return None
        return self._search.reaching_batch(enc.vectors, enc.mask, self.gate)

    def candidates(self, enc: DocumentEncoding, b: int, reached: torch.Tensor | None = None) -> torch.Tensor:
        """Candidate term ids of document ``b`` of an encoded batch (``reached``: :meth:`reached`'s row
        ``b``, else found here)."""
        own = enc.ids[b][enc.mask[b]]
        if self.own_terms_only:
            return torch.unique(own)
        vecs = enc.vectors[b][enc.mask[b]]
        if self.gate is not None:  # exactly the pairs the model's gate opens
            near = self._search.reaching(vecs, self.gate) if reached is None else reached
            return torch.unique(torch.cat([own, self._cand_terms[near]]))
        best = self._search.plain_max(vecs)  # [V'] max_j cos(t, d_j)
        # neighbours are terms the document does not hold: its own terms are nearest to it and
        # would otherwise fill the slots (a SciFact abstract has ~100 distinct terms)
        pos = torch.searchsorted(self._cand_terms, own).clamp(max=best.numel() - 1)
        best[pos[self._cand_terms[pos] == own]] = float("-inf")
        k = min(self.config.neighbours, best.numel())
        top = best.topk(k)
        near = self._cand_terms[top.indices[top.values > float("-inf")]]
        return torch.unique(torch.cat([own, near]))

    def frozen_weights(self) -> AbstractContextManager:
        """The model's ``frozen_weights`` block (NDRM1, NDRM3: query vectors read from the table computed once,
        not projected again for every document: the bundled NDRM3's projection of 200 terms took 0.9 ms on
        one thread, 21 ms on two threads of a busy machine, where OpenMP's threads spin-wait); a no-op for
        other models."""
        frozen = getattr(self.model, "frozen_weights", None)
        return nullcontext() if frozen is None or self._term_table is None else frozen(self._term_table)

    @torch.inference_mode()
    def score_batch(self, documents: Sequence[np.ndarray]) -> list[DocImpacts]:
        """Impacts of a batch of documents (token id arrays), in inference mode: no autograd bookkeeping (version
        counters, view tracking) for the few hundred small tensor operations a document's scoring makes, the same
        arithmetic as ``no_grad`` (the bundled sample's 1,500 passages: 0.73 -> 0.61 s of per-document scoring on
        one thread, session 46); what comes back is numpy arrays, so no inference tensor leaves the block."""
        ids, lengths = pad_batch(documents, self.config.max_doc_terms, self.device)
        with self.frozen_weights():
            enc = self.model.encode_documents(ids, lengths)
            if self.batched:
                return self.batch_impacts(enc)
            reached = self.reached(enc) or [None] * len(documents)
            return [self.document_impacts(enc, b, r) for b, r in enumerate(reached)]

    def max_cosines(self, enc: DocumentEncoding) -> torch.Tensor:
        """``max_j cos(t, d_j)`` of every candidate term against every document of the batch
        ``[B, V']``, one product per block of terms (-2 for a document without vectors, as
        :meth:`ThresholdCosines.plain_max`)."""
        vecs, mask = enc.vectors, enc.mask  # [B, L, D], [B, L]
        block = max(1, MAX_PRODUCT_ELEMENTS // max(1, vecs.shape[0] * vecs.shape[1]))
        parts = [(vecs @ part.T).masked_fill_(~mask.unsqueeze(-1), float("-inf")).amax(1)  # [B, block]
                 for part in self._cand_vectors.split(block)]
        best = torch.cat(parts, dim=1)  # [B, V']
        return best.masked_fill_(~mask.any(1, keepdim=True), -2.0)

    def candidate_pairs(self, enc: DocumentEncoding) -> tuple[torch.Tensor, torch.Tensor]:
        """:meth:`candidates` of every document of the batch as ``(rows, terms)``, row-major, each row's
        terms ascending (as ``torch.unique``). A document's own terms alone come from its sorted ids,
        not a ``[B, V]`` mask: that mask's cost grows with the vocabulary (32 rows of MS MARCO's
        millions of terms for each batch of 32 documents)."""
        if not self.own_terms_only:
            return self.candidate_mask(enc).nonzero(as_tuple=True)
        ids = (enc.ids * enc.mask).sort(dim=1).values  # [B, L]; padding is id 0
        first = torch.ones_like(ids, dtype=torch.bool)
        first[:, 1:] = ids[:, 1:] != ids[:, :-1]  # [B, L]: the first of each run of one id
        rows, cols = (first & (ids >= 2)).nonzero(as_tuple=True)  # neither padding nor unknown
        return rows, ids[rows, cols]

    def candidate_mask(self, enc: DocumentEncoding) -> torch.Tensor:
        """:meth:`candidates` of every document of the batch as a ``[B, V]`` bool mask."""
        b = enc.ids.shape[0]
        own = torch.zeros(b, len(self.offsets), dtype=torch.bool, device=self.device)
        own.scatter_(1, enc.ids * enc.mask, True)  # padding lands on id 0
        own[:, :2] = False  # padding and unknown
        if self.own_terms_only:
            return own
        best = self.max_cosines(enc)  # [B, V']
        if self.gate is not None:  # exactly the pairs the model's gate opens
            near = best >= self.gate
        else:  # the nearest terms the document does not hold (see :meth:`candidates`)
            best.masked_fill_(own[:, self._cand_terms], float("-inf"))
            top = best.topk(min(self.config.neighbours, best.shape[1]), dim=1)
            near = torch.zeros_like(best, dtype=torch.bool).scatter_(1, top.indices, top.values > float("-inf"))
        out = own.clone()
        out[:, self._cand_terms] |= near
        return out

    def batch_impacts(self, enc: DocumentEncoding) -> list[DocImpacts]:
        """:meth:`document_impacts` of every document of an encoded batch at once: candidates as
        :meth:`candidate_pairs`, each document's candidate terms packed into a row of a ``[B, T]`` matrix scored by
        one :meth:`~ckqti.models.qti.QTIModel.channel_scores` call, offsets taken off on the device, one copy to the host."""
        rows, terms = self.candidate_pairs(enc)  # row-major: each row's terms ascending, as torch.unique
        counts = torch.bincount(rows, minlength=enc.ids.shape[0])  # [B]
        slots = torch.arange(rows.numel(), device=self.device) - (counts.cumsum(0) - counts)[rows]
        width = max(1, int(counts.max()) if counts.numel() else 1)
        packed = torch.zeros(enc.ids.shape[0], width, dtype=torch.long, device=self.device)
        packed[rows, slots] = terms
        s = self.model.channel_scores(packed, enc).float()  # [B, T, C]
        real = torch.arange(width, device=self.device) < counts.unsqueeze(1)  # [B, T]
        if self.offset_channel is not None:
            s[..., self.offset_channel] -= torch.from_numpy(self.offsets).to(self.device)[packed]
        keep = (s > 0) & real.unsqueeze(-1)  # [B, T, C]
        s, packed, keep = s.cpu().numpy(), packed.cpu().numpy(), keep.cpu().numpy()
        refuse_non_finite(bool(np.isfinite(s[real.cpu().numpy()]).all()))  # on the host copy: no extra device sync
        out = []
        for b in range(s.shape[0]):
            ti, ci = np.nonzero(keep[b])
            lists = packed[b, ti].astype(np.int64) * len(self.channels) + ci
            out.append(DocImpacts(lists.astype(np.int32), s[b, ti, ci].astype(np.float32)))
        return out

    def document_impacts(self, enc: DocumentEncoding, b: int, reached: torch.Tensor | None = None) -> DocImpacts:
        """Positive channel scores of document ``b``'s candidate terms (``reached``: as :meth:`candidates`),
        offsets taken off."""
        terms = self.candidates(enc, b, reached)
        terms = terms[terms >= 2]
        if terms.numel() == 0:
            return DocImpacts(np.zeros(0, np.int32), np.zeros(0, np.float32))
        s = self.model.channel_scores(terms, slice_encoding(enc, b))[0].float().cpu().numpy()  # [T, C]
        refuse_non_finite(bool(np.isfinite(s).all()))
        t = terms.cpu().numpy()
        if self.offset_channel is not None:
            s[:, self.offset_channel] -= self.offsets[t]
        keep = s > 0  # [T, C]
        ti, ci = np.nonzero(keep)
        lists = t[ti].astype(np.int64) * len(self.channels) + ci
        return DocImpacts(lists.astype(np.int32), s[ti, ci].astype(np.float32))

    def score_all(self, documents: Sequence[np.ndarray], progress=None) -> Iterator[DocImpacts]:
        """Impacts of every document, in order; encoded in batches of similar lengths
        (:func:`length_batches`), so the encoder spends little on padding. On a CPU each batch
        runs on as many of torch's threads as have lately been the faster (:class:`ThreadChooser`:
        torch's count or one, which wins when other jobs hold the cores); the impacts are the same."""
        lengths = [min(len(d), self.config.max_doc_terms) for d in documents]
        pending: dict[int, DocImpacts] = {}
        nxt = 0
        chooser = ThreadChooser.for_device(self.device)
        for batch in length_batches(lengths, self.config.batch_size):
            docs = [documents[j] for j in batch]
            with batch_threads(chooser, len(docs) * max(1, max(lengths[j] for j in batch))):  # padded tokens
                scored = self.score_batch(docs)
            for j, imp in zip(batch.tolist(), scored):
                pending[j] = imp
            if progress is not None:
                progress.update(len(batch))
            while nxt in pending:
                yield pending.pop(nxt)
                nxt += 1
