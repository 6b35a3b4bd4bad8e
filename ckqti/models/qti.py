"""The query-term-independent (QTI) model interface the index builder uses.

Under query term independence a query's score is the sum of its terms' scores,
``score(q, d) = sum_t s(t, d)``, so every ``s(t, d)`` can be computed at indexing time.
The indexer encodes a batch of documents once (:meth:`QTIModel.encode_documents`) and
then scores candidate terms against the encoded batch (:meth:`QTIModel.score_encoded`);
``score_encoded(terms, encode_documents(doc))[:, i]`` equals the model's
``term_scores(terms[i:i+1][None], doc)`` (a one-term query).

For latent models (NDRM1, NDRM3) any term may score against any document; the indexer
picks candidate terms per document with ``max_j cos(term_vectors(t), vectors[b, j])``.
For the explicit model (NDRM2) ``s(t, d) = 0`` exactly when ``t`` does not occur in
``d`` (``is_latent`` is False, ``vectors`` and ``term_vectors`` are None), so the
document's own terms are the only candidates.

Impact channels keep collection statistics out of the stored numbers. A model declares
``impact_channels``, one weighting per channel: ``"one"`` (the channel is used as stored)
or ``"idf"`` (the channel is multiplied by the term's idf at query time), and
``channel_scores(terms, docs) -> [B, T, C]`` such that

    score_encoded(terms, docs) == sum_c weight_c(t) * channel_scores(terms, docs)[..., c]

with ``weight_c(t) = idf(t)`` for ``"idf"`` channels and 1 for ``"one"``. The index stores
every channel, and search takes idf from the index's current document frequencies, so
documents appended later change idf without rescoring stored impacts.
``index_constants()`` returns the other collection statistics baked into stored impacts
(NDRM2's prior mean document length); an append sets them back with
``set_index_constants`` so that new documents are scored as the old ones were.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import torch
from torch import Tensor

CHANNEL_WEIGHTS = ("one", "idf")


@dataclass
class DocumentEncoding:
    """A batch of encoded documents.

    Attributes:
        ids: ``[B, L]`` long term ids, 0 = padding.
        mask: ``[B, L]`` bool, True at real terms.
        lengths: ``[B]`` float document length in terms (before truncation when the
            caller passed it, else the count of non-padding ids).
        vectors: ``[B, L, D]`` unit-norm contextual document vectors, zero at padding;
            None for explicit-only models.
    """

    ids: Tensor
    mask: Tensor
    lengths: Tensor
    vectors: Tensor | None = None

    def to(self, device: torch.device | str) -> "DocumentEncoding":
        vectors = None if self.vectors is None else self.vectors.to(device)
        return DocumentEncoding(self.ids.to(device), self.mask.to(device), self.lengths.to(device), vectors)

    def __len__(self) -> int:
        return int(self.ids.shape[0])


@runtime_checkable
class QTIModel(Protocol):
    """What the index builder needs from a query-term-independent model."""

    is_latent: bool

    def encode_documents(self, ids: Tensor, lengths: Tensor | None = None) -> DocumentEncoding:
        """Encode documents ``ids [B, L]`` (0 = padding); ``lengths [B]`` optional true lengths."""
        ...

    def score_encoded(self, terms: Tensor, docs: DocumentEncoding) -> Tensor:
        """Score every term of ``terms [T]`` alone against every document: ``[B, T]``."""
        ...

    def term_vectors(self, terms: Tensor) -> Tensor | None:
        """Unit-norm query-side vectors ``[T, D]`` of ``terms [T]``; None for explicit models."""
        ...

    @property
    def impact_channels(self) -> tuple[str, ...]:
        """The weighting of each stored channel: ``"one"`` or ``"idf"``."""
        ...

    def channel_scores(self, terms: Tensor, docs: DocumentEncoding) -> Tensor:
        """Idf-free channel scores of every term of ``terms [T]`` against every document: ``[B, T, C]``;
        ``terms [B, T]``: each document's own terms (0 = padding)."""
        ...

    def index_constants(self) -> dict[str, float]:
        """Collection statistics other than idf that stored impacts depend on (JSON-able)."""
        ...

    def set_index_constants(self, constants: dict[str, float]) -> None:
        """Set what :meth:`index_constants` returned (appending to an index scores as its build did)."""
        ...


def document_lengths(ids: Tensor, lengths: Tensor | None = None, dtype: torch.dtype = torch.float32) -> Tensor:
    """``lengths`` as ``dtype`` (the model's), or the count of non-padding ids per row when None.

    Shape:
        ids ``[B, L]`` -> ``[B]`` float.
    """
    if lengths is None:
        return (ids != 0).sum(-1).to(dtype)
    return lengths.to(device=ids.device, dtype=dtype)
