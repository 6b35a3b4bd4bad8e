import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ckqti.embeddings import (
    TARGET_NORM,
    SkipGramConfig,
    WordPieceComposer,
    adapt_embeddings,
    minilm_embeddings,
    scaled_min_count,
    skipgram_matrix,
    train_skipgram,
)
from ckqti.errors import InputError
from ckqti.models.minilm import minilm_model_dir
from ckqti.text import Analyzer
from ckqti.vocab import Vocabulary

REPO = Path(__file__).resolve().parents[2]
SCIFACT = REPO / ".." / "shared" / "data" / "scifact"


@pytest.fixture(scope="module")
def docs() -> list[list[str]]:
    """The first 250 SciFact abstracts, analyzed."""
    analyzer = Analyzer()
    with open(SCIFACT / "corpus.jsonl") as f:
        rows = [json.loads(line) for line in itertools.islice(f, 250)]
    return [analyzer(r["title"] + " " + r["text"]) for r in rows]


@pytest.fixture(scope="module")
def composer() -> WordPieceComposer:
    return WordPieceComposer()


@pytest.fixture(scope="module")
def skipgram(docs):
    return train_skipgram(docs, SkipGramConfig(min_count=3))


def test_min_count_scales_with_corpus_size():
    assert scaled_min_count(800_000) == 2  # SciFact-sized
    assert scaled_min_count(300_000_000) == 10
    assert scaled_min_count(3_000_000_000) == 100  # MS MARCO documents: the reference value
    assert scaled_min_count(10**11) == 100
    with pytest.raises(ValueError):
        SkipGramConfig(dim=0)


def test_skipgram_matrix_is_in_and_out_concatenated(docs, skipgram, composer):
    vocab = Vocabulary.build(docs)
    matrix = skipgram_matrix(skipgram, vocab, "minilm", composer)
    assert matrix.shape == (len(vocab), 256) and matrix.dtype == np.float32
    assert np.all(matrix[0] == 0)
    word = skipgram.wv.index_to_key[0]  # the most frequent word
    row = matrix[vocab.id(word)]
    assert np.allclose(row[:128], skipgram.wv[word])
    assert np.allclose(row[128:], skipgram.syn1neg[skipgram.wv.key_to_index[word]])
    rare = [t for t in vocab.terms[2:] if t not in skipgram.wv.key_to_index]
    assert rare, "min_count 3 should leave some words without a skip-gram vector"
    rows = matrix[[vocab.id(t) for t in rare]]
    assert np.all(np.isfinite(rows)) and np.all(np.linalg.norm(rows, axis=1) > 0)
    full = np.concatenate([skipgram.wv.vectors, skipgram.syn1neg], axis=1)
    assert np.allclose(matrix[1], full.mean(axis=0), atol=1e-6)  # unknown: the mean skip-gram row


def test_skipgram_settings_are_the_papers(skipgram):
    """NDRM's skip-gram: 128-d IN and OUT, window 10, 5 epochs, negative sampling (SPEC)."""
    assert (skipgram.sg, skipgram.hs, skipgram.vector_size, skipgram.window, skipgram.epochs) == (1, 0, 128, 10, 5)
    assert skipgram.negative == 5


def test_skipgram_training_is_reproducible(docs):
    config = SkipGramConfig(dim=16, epochs=1, min_count=2, seed=3)
    a, b = train_skipgram(docs[:40], config), train_skipgram(docs[:40], config)
    assert np.array_equal(a.wv.vectors, b.wv.vectors) and np.array_equal(a.syn1neg, b.syn1neg)
    with pytest.raises(InputError):
        train_skipgram([[], []], config)


def test_skipgram_vectors_do_not_depend_on_the_string_hash_seed(docs, tmp_path):
    """Two processes with different ``PYTHONHASHSEED`` train bit-identical vectors (workers=1, one seed)."""
    (tmp_path / "docs.json").write_text(json.dumps(docs[:40]))
    code = ("import hashlib, json, sys; from ckqti.embeddings import SkipGramConfig, train_skipgram; "
            "m = train_skipgram(json.load(open(sys.argv[1])), SkipGramConfig(dim=8, epochs=1, min_count=2)); "
            "print(hashlib.sha256(m.wv.vectors.tobytes() + m.syn1neg.tobytes() + "
            "' '.join(m.wv.index_to_key).encode()).hexdigest())")
    digests = set()
    for seed in ("1", "2"):
        done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "docs.json")], cwd=REPO, capture_output=True,
                              text=True, timeout=120, env={**os.environ, "PYTHONHASHSEED": seed})
        assert done.returncode == 0, done.stderr
        digests.add(done.stdout.strip())
    assert len(digests) == 1


def test_skipgram_needs_a_term_seen_min_count_times():
    with pytest.raises(InputError, match="no term occurs 2 times"):  # gensim's own error was a RuntimeError
        train_skipgram([["alpha", "beta"], ["gamma", "delta"]], SkipGramConfig(dim=4, min_count=2))


def test_skipgram_trains_past_gensims_sentence_limit():
    """gensim's Cython loop reads 10,000 terms of a sentence and drops the rest unsaid: the words of a
    long document's tail kept their random start vectors, as if known."""
    from gensim.models import Word2Vec

    doc = [f"w{i % 2000}" for i in range(10_000)] + [f"t{i % 500}" for i in range(2_000)]  # none subsampled
    config = SkipGramConfig(dim=8, epochs=1, min_count=2)
    model = train_skipgram([doc], config)
    start = Word2Vec(vector_size=8, sg=1, negative=config.negative, window=config.window, min_count=2,
                     seed=config.seed, workers=1)
    start.build_vocab([doc])  # the same vocabulary and random start, untrained
    assert start.wv.index_to_key == model.wv.index_to_key
    moved = np.any(model.wv.vectors != start.wv.vectors, axis=1)
    assert moved[model.wv.key_to_index["w7"]]
    assert all(moved[model.wv.key_to_index[f"t{i}"]] for i in range(500))


def test_wordpiece_pieces_match_the_bert_tokenizer(docs, composer):
    from tokenizers import BertWordPieceTokenizer

    reference = BertWordPieceTokenizer(str(minilm_model_dir() / "vocab.txt"), lowercase=True)
    words = sorted({t for d in docs[:60] for t in d})
    assert len(words) > 500
    for w in words:
        assert composer.pieces(w) == reference.encode(w, add_special_tokens=False).ids, w
    for long in ("a" * 100, "a" * 101):  # BERT reads a word of up to 100 characters
        assert composer.pieces(long) == reference.encode(long, add_special_tokens=False).ids
    assert composer.pieces("") == [composer.unk_id]


def test_composition_is_the_mean_of_pieces_and_projection_is_orthonormal(composer):
    pieces = composer.pieces("immunohistochemistry")
    assert len(pieces) > 1
    raw = composer.raw(["immunohistochemistry"])[0]
    assert np.allclose(raw, composer.weight[pieces].mean(axis=0))
    mean, axes = composer.principal_axes()
    assert np.allclose(axes.T @ axes, np.eye(384), atol=1e-4)
    variance = ((composer.weight - mean) @ axes).var(axis=0)  # per axis
    assert np.all(np.diff(variance) <= 1e-6)  # principal axes by decreasing variance
    assert variance[:256].sum() > 0.8 * variance.sum()
    v256 = composer.vectors(["immunohistochemistry"], 256)[0]
    assert np.allclose(v256, (raw - mean) @ axes[:, :256], atol=1e-5)
    v400 = composer.vectors(["immunohistochemistry"], 400)[0]
    assert np.all(v400[384:] == 0) and np.allclose(np.linalg.norm(v400), np.linalg.norm(raw - mean), rtol=1e-4)


def test_compositions_of_many_words_are_each_words_own_mean_to_the_bit(docs, composer):
    """``raw`` composes all the words of as many pieces in one ``mean``: the same float32 bits as each
    word's own ``weight[pieces].mean(axis=0)`` (a running sum, ``np.add.reduceat``, differs in the last
    bit for two words in five), in the words' order, whatever their piece counts."""
    words = sorted({t for d in docs for t in d})[:3000] + ["", "x" * 200, "immunohistochemistry"]
    counts = {len(composer.pieces(w)) for w in words}
    assert len(counts) >= 5  # one to many pieces
    raw = composer.raw(words)
    own = np.stack([composer.weight[composer.pieces(w)].mean(axis=0) for w in words])
    assert raw.dtype == np.float32 and np.array_equal(raw.view(np.uint32), own.view(np.uint32))
    assert composer.raw([]).shape == (0, composer.width)


def test_minilm_embeddings_aligned_to_vocabulary(docs, composer):
    vocab = Vocabulary.build(docs[:50])
    matrix = minilm_embeddings(vocab, 256, composer)
    assert matrix.shape == (len(vocab), 256)
    assert np.all(matrix[0] == 0)
    assert np.allclose(matrix[1], matrix[2:].mean(axis=0), atol=1e-6)
    assert np.linalg.norm(matrix[2:], axis=1).mean() == pytest.approx(TARGET_NORM, rel=1e-4)
    # rows are the projected compositions, up to one global scale
    direct = composer.vectors(vocab.terms[2:], 256)
    ratio = np.linalg.norm(matrix[2:], axis=1) / np.linalg.norm(direct, axis=1)
    assert np.allclose(ratio, ratio[0], rtol=1e-4)


def test_adapt_keeps_known_rows_and_fills_new_words(docs, composer):
    old, new = Vocabulary.build(docs[:100]), Vocabulary.build(docs[80:200])
    rng = np.random.default_rng(0)
    matrix = rng.normal(size=(len(old), 32)).astype(np.float32)
    matrix[0] = 0
    out = adapt_embeddings(matrix, old, new, "mean", composer)
    assert out.shape == (len(new), 32)
    assert np.all(out[0] == 0) and np.array_equal(out[1], matrix[1])
    shared = [t for t in new.terms[2:] if t in old]
    fresh = [t for t in new.terms[2:] if t not in old]
    assert shared and fresh
    assert np.array_equal(out[[new.id(t) for t in shared]], matrix[[old.id(t) for t in shared]])
    assert np.allclose(out[[new.id(t) for t in fresh]], matrix[2:].mean(axis=0))
    with pytest.raises(ValueError):
        adapt_embeddings(matrix[:-1], old, new, "mean", composer)
    with pytest.raises(ValueError):
        adapt_embeddings(matrix, old, new, "random", composer)


def test_minilm_fallback_recovers_a_minilm_initialised_matrix(docs, composer):
    """A matrix that is itself a linear function of the compositions is predicted almost exactly."""
    old, new = Vocabulary.build(docs[:100]), Vocabulary.build(docs[100:200])
    out = adapt_embeddings(minilm_embeddings(old, 256, composer), old, new, "minilm", composer)
    truth = minilm_embeddings(new, 256, composer)
    fresh = [new.id(t) for t in new.terms[2:] if t not in old]
    # both scale to TARGET_NORM over their own vocabularies: compare directions
    cos = np.sum(out[fresh] * truth[fresh], axis=1) / (
        np.linalg.norm(out[fresh], axis=1) * np.linalg.norm(truth[fresh], axis=1)
    )
    assert cos.min() > 0.97


def test_minilm_fallback_rows_have_the_known_rows_length(docs, composer):
    """Rows the compositions cannot explain (random, as a TK/TKL trained from random rows has)
    are predicted near their mean, which shrank them ~10x before; a new row must be as long as a
    known one, or the new word's exact match drowns in a Transformer's context vector."""
    old, new = Vocabulary.build(docs[:100]), Vocabulary.build(docs[100:200])
    matrix = np.random.default_rng(0).normal(size=(len(old), 64)).astype(np.float32) * 2.0
    out = adapt_embeddings(matrix, old, new, "minilm", composer)
    fresh = [new.id(t) for t in new.terms[2:] if t not in old]
    known_norm = np.median(np.linalg.norm(matrix[2:], axis=1))
    np.testing.assert_allclose(np.linalg.norm(out[fresh], axis=1), known_norm, rtol=1e-4)
    # the directions are the ridge map's: distinct new words stay distinct
    unit = out[fresh] / np.linalg.norm(out[fresh], axis=1, keepdims=True)
    off = (unit @ unit.T)[~np.eye(len(fresh), dtype=bool)]
    assert np.abs(off).mean() < 0.5


def test_minilm_fallback_beats_the_mean_on_held_out_skipgram_words(docs, skipgram, composer):
    """Hold out a fifth of the skip-gram words and predict their rows from the rest.

    The WordPiece prediction is closer (cosine) to the true rows than the mean row is; after
    removing the mean row it still points towards the word's own row (centred cosine > 0,
    which the mean fallback cannot have), and the true row ranks better than chance among
    the held-out words.
    """
    words = list(skipgram.wv.index_to_key)
    held = set(np.random.default_rng(0).choice(words, size=len(words) // 5, replace=False).tolist())
    full = np.concatenate([skipgram.wv.vectors, skipgram.syn1neg], axis=1)
    keep = [w for w in words if w not in held]
    old = Vocabulary(terms=["[PAD]", "[UNK]", *keep])
    new = Vocabulary(terms=["[PAD]", "[UNK]", *words])
    matrix = np.zeros((len(old), full.shape[1]), dtype=np.float32)
    matrix[2:] = full[[skipgram.wv.key_to_index[w] for w in keep]]
    rows = [new.id(w) for w in held]
    truth = full[[skipgram.wv.key_to_index[w] for w in held]]
    predicted = adapt_embeddings(matrix, old, new, "minilm", composer)[rows]
    mean_rows = adapt_embeddings(matrix, old, new, "mean", composer)[rows]

    def unit(x):
        return x / np.linalg.norm(x, axis=1, keepdims=True)

    assert np.mean(np.sum(unit(predicted) * unit(truth), 1)) > np.mean(np.sum(unit(mean_rows) * unit(truth), 1))
    mu = matrix[2:].mean(axis=0)
    sims = unit(predicted - mu) @ unit(truth - mu).T  # [held, held]
    assert np.mean(np.diag(sims)) > 0.15
    ranks = (sims > np.diag(sims)[:, None]).sum(axis=1)
    assert np.median(ranks) < 0.4 * len(rows)  # chance: 0.5


def test_missing_minilm_files_raise_input_error(tmp_path):
    with pytest.raises(InputError) as err:
        WordPieceComposer(tmp_path)
    assert str(tmp_path) in str(err.value)


def test_minilm_fallback_needs_16_known_words(docs, composer):
    """Below 16 known rows a ridge map over 385 features fits nothing: new words get the mean row."""
    old = Vocabulary(terms=["[PAD]", "[UNK]", "cell", "gene", "protein", "tumor", "blood"])
    matrix = np.random.default_rng(0).normal(size=(len(old), 8)).astype(np.float32)
    new = Vocabulary(terms=["[PAD]", "[UNK]", "cell", "membrane"])
    out = adapt_embeddings(matrix, old, new, "minilm", composer)
    assert np.array_equal(out[2], matrix[2]) and np.allclose(out[3], matrix[2:].mean(axis=0))


@pytest.mark.parametrize("known, ridge", [(15, False), (16, True)])
def test_minilm_fallback_starts_at_exactly_16_known_words(docs, composer, known, ridge):
    """15 known rows: the mean row; 16: the ridge map (a row not the mean, at the known rows' median norm)."""
    words = sorted({t for d in docs for t in d if t.isalpha()})[:known + 1]
    old = Vocabulary(terms=["[PAD]", "[UNK]", *words[:known]])
    matrix = np.random.default_rng(0).normal(size=(len(old), 8)).astype(np.float32)
    out = adapt_embeddings(matrix, old, Vocabulary(terms=["[PAD]", "[UNK]", words[known]]), "minilm", composer)
    mean = matrix[2:].mean(axis=0)
    assert np.allclose(out[2], mean) != ridge
    if ridge:
        assert np.linalg.norm(out[2]) == pytest.approx(np.median(np.linalg.norm(matrix[2:], axis=1)), rel=1e-5)
