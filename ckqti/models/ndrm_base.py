"""What NDRM1, NDRM2 and NDRM3 share: the query terms that score, where they occur, and the scoring path.

Each model defines :meth:`QTIScorer.encoded_term_scores` (every query term alone against encoded
documents); :class:`QTIScorer` builds on it ``term_scores`` (training, reranking), ``forward`` (their
sum), ``score_encoded`` and ``channel_scores`` (indexing, in chunks of terms): the
:class:`ckqti.models.qti.QTIModel` interface the indexer uses.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ckqti.models.ndrm_config import NDRMConfig
from ckqti.models.qti import DocumentEncoding
from ckqti.vocab import UNK, Vocabulary


def query_term_mask(query: Tensor) -> Tensor:
    """True at query terms that can score: not padding (0), not unknown (1).

    Shape:
        ``[..., Q]`` long -> ``[..., Q]`` bool.
    """
    return query > UNK


def occurrences(query: Tensor, ids: Tensor, mask: Tensor) -> Tensor:
    """True where query term ``q`` is the real document term at position ``l``.

    Shape:
        query ``[B or 1, Q]``, ids ``[B, L]``, mask ``[B, L]`` bool -> ``[B, Q, L]`` bool.
    """
    return (ids.unsqueeze(1) == query.unsqueeze(2)) & mask.unsqueeze(1)


class QTIScorer(nn.Module):
    """The scoring path shared by all NDRM variants (subclasses define ``encoded_term_scores``).

    Shape:
        ``term_scores``: query ``[B, Q]``, doc ``[B, L]`` -> ``[B, Q]``;
        ``forward``: -> ``[B]``; ``score_encoded``: terms ``[T]`` -> ``[B, T]``;
        ``channel_scores``: terms ``[T]`` -> ``[B, T, C]``, ``C = len(impact_channels)``.
    """

    is_latent: bool = True

    def __init__(self, config: NDRMConfig):
        super().__init__()
        self.config = config

    def encode_documents(self, ids: Tensor, lengths: Tensor | None = None) -> DocumentEncoding:
        raise NotImplementedError

    def encoded_term_scores(self, query: Tensor, docs: DocumentEncoding) -> Tensor:
        """Score each query term alone against ``docs`` (B documents) -> ``[B, Q]``.

        ``query`` is ``[B, Q]`` (one query per document) or ``[1, Q]`` (the same terms for
        every document, as ``score_encoded`` passes them).
        """
        raise NotImplementedError

    def term_vectors(self, terms: Tensor) -> Tensor | None:
        return None

    def _work_per_position(self) -> int:
        """Intermediate elements per (document position, term) pair when scoring."""
        return 1

    def set_collection(self, vocab: Vocabulary) -> None:
        """Attach a collection's statistics (idf, mean document length); checks the vocabulary size."""
        if len(vocab) != self.config.vocab_size:
            raise ValueError(f"vocabulary has {len(vocab)} terms, the model was built for {self.config.vocab_size}")

    def term_scores(self, query: Tensor, doc: Tensor, doc_lengths: Tensor | None = None) -> Tensor:
        if query.dim() != 2 or doc.dim() != 2 or query.shape[0] != doc.shape[0]:
            raise ValueError(f"expected query [B, Q] and doc [B, L], got {tuple(query.shape)} and {tuple(doc.shape)}")
        return self.encoded_term_scores(query, self.encode_documents(doc, doc_lengths))

    def forward(self, query: Tensor, doc: Tensor, doc_lengths: Tensor | None = None) -> Tensor:
        return self.term_scores(query, doc, doc_lengths).sum(-1)

    def score_encoded(self, terms: Tensor, docs: DocumentEncoding) -> Tensor:
        """Every term scored alone against the documents -> ``[B, T]``, in chunks of terms: ``terms [T]``
        against every document, or ``[B, T]`` a row of terms for each document (0, padding, scores 0)."""
        b, length = docs.ids.shape
        chunk = max(1, self.config.score_chunk_elements // max(1, b * length * self._work_per_position()))
        rows = terms if terms.dim() == 2 else terms.unsqueeze(0)  # [B or 1, T]
        parts = [self.encoded_term_scores(part, docs) for part in rows.split(chunk, dim=1)]  # [B, chunk] each
        if not parts:
            return docs.lengths.new_zeros(b, 0)
        return torch.cat(parts, dim=1)  # [B, T]

    impact_channels: tuple[str, ...] = ("one",)

    def encoded_channel_scores(self, query: Tensor, docs: DocumentEncoding) -> Tensor:
        """Idf-free channel scores of each query term alone -> ``[B, Q, C]`` (see :mod:`ckqti.models.qti`)."""
        return self.encoded_term_scores(query, docs).unsqueeze(-1)

    def channel_scores(self, terms: Tensor, docs: DocumentEncoding) -> Tensor:
        """Channel scores of every term of ``terms [T]`` against every document -> ``[B, T, C]``, in chunks;
        ``score_encoded == sum_c weight_c * channel_scores`` (eval mode only: frozen statistics).
        ``terms [B, T]`` gives each document its own terms (each scored alone, so a row's padding
        changes none of its other scores)."""
        if self.training:
            raise RuntimeError(f"{type(self).__name__}.channel_scores needs eval mode (call model.eval())")
        b, length = docs.ids.shape
        chunk = max(1, self.config.score_chunk_elements // max(1, b * length * self._work_per_position()))
        rows = terms if terms.dim() == 2 else terms.unsqueeze(0)  # [B or 1, T]
        parts = [self.encoded_channel_scores(part, docs) for part in rows.split(chunk, dim=1)]  # [B, chunk, C]
        if not parts:
            return docs.lengths.new_zeros(b, 0, len(self.impact_channels))
        return torch.cat(parts, dim=1)  # [B, T, C]

    def index_constants(self) -> dict[str, float]:
        """Collection statistics other than idf that stored impacts depend on (none by default)."""
        return {}

    def set_index_constants(self, constants: dict[str, float]) -> None:
        if constants:
            raise ValueError(f"{type(self).__name__} has no index constants, got {sorted(constants)}")
