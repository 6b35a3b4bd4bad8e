"""Which vocabulary terms reach a cosine threshold with some vector of a document, exactly,
without the full product of every term with every vector.

A gated latent model (``NDRMConfig.latent_gate``) opens the pair ``(t, d)`` when
``max_j cos(t, d_j) >= tau``; indexing asks that of every vocabulary term for every document,
and the ``[n, V]`` product was most of a CPU build's time (SciFact: 28k terms, 150 vectors an
abstract). With ``P`` ``[D, k]`` an orthonormal basis of the term vectors' ``k`` leading
principal directions, Cauchy-Schwarz on the parts outside it bounds every product:

    t . d = (P^T t) . (P^T d) + t_perp . d_perp <= (P^T t) . (P^T d) + |t_perp| |d_perp|

which is one product of ``k + 1`` columns (the residual norms appended to both sides). Only
terms whose bound reaches ``tau`` (less :data:`BOUND_SLACK`, for rounding) are then checked
with their exact product, so the answer is the plain computation's. For the bundled NDRM3 on
SciFact, ``k = D / 2`` leaves ~700 of 28k terms to check and halves the time (one thread,
128 abstracts: 5.1 -> 2.6 s; ``k`` 112: 1.7x, 144: 1.7x, 96: 1.6x, 64: slower than plain).
Where the bound prunes badly (vectors spread over every direction, an untrained model), the
search notices and goes back to the plain product, which then costs less.

A build asks for a batch of documents at once (:meth:`ThresholdCosines.reaching_batch`): the
bound of several short documents is one product of their vectors, padding included (a padding
row can only raise a maximum, so the bound still holds), about :data:`BOUND_ROWS` rows against
:data:`BLOCK` terms; only the check of the few terms it leaves is per document. Bundled NDRM3,
the bound alone on a quiet 2-core machine: the bundled sample's 1,500 passages 1.1-1.6 s a
document at a time, 0.7 grouped; 511 SciFact abstracts 5.0-7.2 s, 4.2-4.3 (all of a batch of 32
in one product: 6.8-8.6 s, out of cache). Under load the per-document way's many small
products wait on each other's threads: the sample's bound took 40 s of a 2-minute build.
"""

from __future__ import annotations

import torch
from torch import Tensor

BLOCK = 1024  # vocabulary columns a product: each [n, BLOCK] product stays in cache
BOUND_ROWS = 1024  # document vectors a bound product of reaching_batch (several documents' when short)
BOUND_SLACK = 1e-4  # float32 rounding of a 256-term dot product is ~1e-5
PLAIN_ABOVE = 0.25  # checked share of the vocabulary above which the plain product is cheaper
WATCH_DOCS = 64  # documents seen before that share is judged


class ThresholdCosines:
    """``max_j t . d_j >= threshold`` for every row ``t`` of ``vectors``, by a projection bound.

    Args:
        vectors: ``[V, D]`` term vectors (unit length for cosines; the bound holds for any).
        rank: principal directions kept (default ``D // 2``; 0: always the plain product).

    Shape:
        :meth:`reaching`: vecs ``[n, D]`` -> ``[V]`` bool; :meth:`reaching_batch`: vectors
        ``[B, L, D]``, mask ``[B, L]`` bool -> ``B`` of ``[V]`` bool; :meth:`bound_max`: vecs
        ``[..., n, D]`` -> ``[..., V]``.
    """

    def __init__(self, vectors: Tensor, rank: int | None = None):
        self.vectors = vectors
        dim = vectors.shape[1]
        rank = dim // 2 if rank is None else rank
        self.projection = None
        self.bound_vectors = None
        self.checked = self.seen = self.docs = 0
        if 0 < rank < dim and vectors.shape[0] > 0:
            gram = (vectors.double().T @ vectors.double())  # [D, D]: its eigenvectors are V's principal directions
            _, eigvecs = torch.linalg.eigh(gram)  # ascending eigenvalues
            self.projection = eigvecs[:, -rank:].to(vectors.dtype).contiguous()  # [D, k]
            projected = vectors @ self.projection  # [V, k]
            residual = (vectors - projected @ self.projection.T).norm(dim=1, keepdim=True)  # [V, 1]
            self.bound_vectors = torch.cat([projected, residual], 1).contiguous()  # [V, k + 1]

    def plain_max(self, vecs: Tensor) -> Tensor:
        """``max_j t . d_j`` of every term ``[V]`` (-2 when ``vecs`` is empty), blocks of columns."""
        if vecs.shape[0] == 0:
            return torch.full((self.vectors.shape[0],), -2.0, device=self.vectors.device)
        return torch.cat([(vecs @ part.T).amax(0) for part in self.vectors.split(BLOCK)])

    def reaching(self, vecs: Tensor, threshold: float) -> Tensor:
        """Which terms have ``max_j t . d_j >= threshold`` over the rows of ``vecs``."""
        if self.projection is None or vecs.shape[0] == 0:
            return self.plain_max(vecs) >= threshold
        return self._checked(vecs, self.bound_max(vecs), threshold)

    def reaching_batch(self, vectors: Tensor, mask: Tensor, threshold: float) -> list[Tensor]:
        """:meth:`reaching` of the real rows (``mask``) of every document of a padded batch, in
        order, with the same answers: the bound of as many documents as fill :data:`BOUND_ROWS`
        rows in one product (padding rows only raise it), then each document's check as
        :meth:`reaching` makes it."""
        group = max(1, BOUND_ROWS // max(1, vectors.shape[1]))
        out = []
        for start in range(0, vectors.shape[0], group):
            part = vectors[start: start + group]  # [G, L, D]
            bounds = None if self.projection is None else self.bound_max(part)  # [G, V]
            for b in range(part.shape[0]):
                vecs = part[b][mask[start + b]]  # [n, D]
                if self.projection is None or vecs.shape[0] == 0:  # (the watch may drop the bound mid-batch)
                    out.append(self.reaching(vecs, threshold))
                else:
                    out.append(self._checked(vecs, bounds[b], threshold))
        return out

    def bound_max(self, vecs: Tensor) -> Tensor:
        """An upper bound of ``max_j t . d_j`` over the rows ``j`` of ``vecs`` for every term, in
        blocks of :data:`BLOCK` terms (needs the projection)."""
        dp = vecs @ self.projection  # [..., n, k]
        rd = (vecs - dp @ self.projection.T).norm(dim=-1, keepdim=True)  # [..., n, 1]
        aug = torch.cat([dp, rd], -1)  # [..., n, k + 1]
        return torch.cat([(aug @ part.T).amax(-2) for part in self.bound_vectors.split(BLOCK)], -1)  # [..., V]

    def _checked(self, vecs: Tensor, bound: Tensor, threshold: float) -> Tensor:
        """The exact answer for the terms whose ``bound`` ``[V]`` reaches ``threshold`` (less the slack)."""
        check = torch.nonzero(bound >= threshold - BOUND_SLACK).squeeze(1)
        out = torch.zeros(self.vectors.shape[0], dtype=torch.bool, device=self.vectors.device)
        if check.numel():
            out[check] = (vecs @ self.vectors[check].T).amax(0) >= threshold
        self._watch(check.numel())
        return out

    def _watch(self, checked: int) -> None:
        """Back to the plain product for good once the bound checks too much of the vocabulary."""
        self.checked += checked
        self.seen += self.vectors.shape[0]
        self.docs += 1
        if self.docs >= WATCH_DOCS and self.checked > PLAIN_ABOVE * self.seen:
            self.projection = self.bound_vectors = None
