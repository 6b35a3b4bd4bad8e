"""Initial word vectors of a training run (NDRM, TK, TKL): skip-gram, MiniLM, random, or a checkpoint's."""

from __future__ import annotations

import numpy as np

from ckqti.train.data import Collection, show_step

EMBEDDING_INITS = ("skipgram", "minilm", "random")  # or a checkpoint file (``.pt``): its word vectors


def check_embedding_start(method: str) -> None:
    """Raise ValueError unless ``method`` is one of :data:`EMBEDDING_INITS` or a ``.pt`` checkpoint file name."""
    if method not in EMBEDDING_INITS and not str(method).endswith(".pt"):
        raise ValueError(f"embeddings must be one of {EMBEDDING_INITS} or a checkpoint file (.pt), got {method!r}")


def initial_embeddings(collection: Collection, method: str, dim: int, seed: int, show: bool = False) -> np.ndarray | None:
    """``[len(vocab), dim]`` initial embeddings, or None for the model's random initialisation.

    ``method`` is one of :data:`EMBEDDING_INITS` or a checkpoint file whose word vectors start the
    model (:func:`ckqti.models.checkpoint.checkpoint_embeddings`)."""
    from ckqti import embeddings

    vocab = collection.vocab
    if method == "random":
        return None
    if method.endswith(".pt"):
        from ckqti.models.checkpoint import checkpoint_embeddings

        return checkpoint_embeddings(method, vocab, dim)
    if method == "minilm":
        return embeddings.minilm_embeddings(vocab, dim)
    if dim % 2:
        raise ValueError(f"skip-gram IN+OUT embeddings need an even dim, got {dim}")
    docs = [[vocab.terms[i] for i in collection.doc(d) if i > 1] for d in range(len(collection))]
    config = embeddings.SkipGramConfig(dim=dim // 2, seed=seed)
    show_step(f"skip-gram word vectors (gensim, {config.epochs} epochs) on {len(docs):,} documents ...", show)
    return embeddings.skipgram_embeddings(docs, vocab, config)
