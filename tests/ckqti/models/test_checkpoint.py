import numpy as np
import pytest
import torch

from ckqti.errors import CkqtiError
from ckqti.models.checkpoint import (
    adapt_to_vocabulary,
    checkpoint_embeddings,
    load_checkpoint,
    load_for_indexing,
    round_embeddings,
    save_checkpoint,
)
from ckqti.models.inputs import pad_rows
from ckqti.models.ndrm import NDRMConfig, build_ndrm
from ckqti.train.data import load_collection
from ckqti.train.losses import ranknet_loss
from ckqti.vocab import Vocabulary

from ..conftest import TINY_MODEL


@pytest.fixture(scope="module")
def collection(tiny_scifact):
    return load_collection(tiny_scifact["corpus"])


def trained(collection, variant: str) -> torch.nn.Module:
    """A tiny model after 3 optimiser steps (BatchScale means and BatchNorm statistics are no longer at init)."""
    torch.manual_seed(0)
    model = build_ndrm(NDRMConfig(vocab_size=len(collection.vocab), variant=variant, **TINY_MODEL), collection.vocab)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    query = pad_rows([collection.doc(i)[:6] for i in range(8)]).repeat_interleave(2, 0)  # [16, 6]
    docs = pad_rows([collection.doc(j) for i in range(8) for j in (i, i + 8)], 120)  # [16, L]
    labels = torch.tensor([[1, 0]] * 8)
    for _ in range(3):
        loss = ranknet_loss(model(query, docs).view(8, 2), labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model.eval()


def batch(collection, rows=range(20, 26)):
    query = pad_rows([collection.doc(i)[3:9] for i in rows])
    docs = pad_rows([collection.doc(i) for i in rows], 120)
    return query, docs


@pytest.mark.parametrize("variant", ["ndrm1", "ndrm2", "ndrm3"])
def test_round_trip_scores_identically(tmp_path, collection, variant):
    model = trained(collection, variant)
    ckpt = save_checkpoint(tmp_path / "m.pt", model, variant, model.config.to_dict(), collection.vocab,
                           collection.analyzer, {"note": "test"})
    loaded = load_checkpoint(tmp_path / "m.pt")
    assert loaded.id == ckpt.id and loaded.id.startswith(variant + "-") and len(loaded.id) == len(variant) + 13
    assert loaded.vocab.terms == collection.vocab.terms and loaded.meta == {"note": "test"}
    q, d = batch(collection)
    with torch.no_grad():
        assert torch.equal(loaded.build()(q, d), model(q, d))


def test_id_depends_on_weights_not_metadata(tmp_path, collection):
    model = trained(collection, "ndrm3")
    args = (model, "ndrm3", model.config.to_dict(), collection.vocab, collection.analyzer)
    a = save_checkpoint(tmp_path / "a.pt", *args, {"epoch": 1})
    b = save_checkpoint(tmp_path / "b.pt", *args, {"epoch": 2})
    with torch.no_grad():
        model.combine.linear.bias.add_(1.0)
    c = save_checkpoint(tmp_path / "c.pt", *args)
    assert a.id == b.id != c.id


def test_float16_embeddings_halve_the_file_and_score_as_saved(tmp_path, collection):
    model = trained(collection, "ndrm3")
    args = (model, "ndrm3", model.config.to_dict(), collection.vocab, collection.analyzer)
    full = save_checkpoint(tmp_path / "full.pt", *args)
    round_embeddings(model, "float16")
    half = save_checkpoint(tmp_path / "half.pt", *args, embedding_dtype="float16")
    assert half.id != full.id
    assert half.state_dict["latent.embedding.weight"].dtype == torch.float16
    emb_bytes = model.latent.embedding.weight.numel() * 2
    assert (tmp_path / "full.pt").stat().st_size - (tmp_path / "half.pt").stat().st_size >= 0.9 * emb_bytes
    q, d = batch(collection)
    with torch.no_grad():
        assert torch.equal(load_checkpoint(tmp_path / "half.pt").build()(q, d), model(q, d))


def test_damaged_or_foreign_files_are_refused(tmp_path, collection):
    model = trained(collection, "ndrm2")
    save_checkpoint(tmp_path / "m.pt", model, "ndrm2", model.config.to_dict(), collection.vocab, collection.analyzer)
    raw = (tmp_path / "m.pt").read_bytes()
    (tmp_path / "cut.pt").write_bytes(raw[: len(raw) // 2])
    torch.save({"weights": torch.zeros(3)}, tmp_path / "foreign.pt")
    (tmp_path / "text.pt").write_text("hello")
    for name, why in (("cut.pt", r"torch cannot read it \(PytorchStreamReader failed reading zip archive[^.]*\): cut short"),
                      ("foreign.pt", "not a ckqti checkpoint$"), ("text.pt", "not a file torch.save wrote$"),
                      ("missing.pt", "checkpoint not found$")):
        with pytest.raises(CkqtiError, match=f"^{tmp_path / name}: .*{why}"):
            load_checkpoint(tmp_path / name)


def test_altered_weights_fail_the_hash(tmp_path, collection):
    model = trained(collection, "ndrm2")
    save_checkpoint(tmp_path / "m.pt", model, "ndrm2", model.config.to_dict(), collection.vocab, collection.analyzer)
    payload = torch.load(tmp_path / "m.pt", weights_only=True)
    payload["state_dict"]["length_weight"] += 1.0
    torch.save(payload, tmp_path / "m.pt")
    with pytest.raises(CkqtiError, match="hash"):
        load_checkpoint(tmp_path / "m.pt")


def permuted(vocab: Vocabulary, seed: int) -> tuple[Vocabulary, np.ndarray]:
    """The same terms and statistics under other ids; returns it and ``old id -> new id``."""
    order = np.concatenate([[0, 1], 2 + np.random.default_rng(seed).permutation(len(vocab) - 2)])
    new = Vocabulary([vocab.terms[i] for i in order], vocab.df[order], vocab.cf[order], vocab.num_docs,
                     vocab.total_terms)
    old_to_new = np.empty(len(vocab), dtype=np.int64)
    old_to_new[order] = np.arange(len(vocab))
    return new, old_to_new


def test_corpus_vocabulary_remap_keeps_known_vectors_and_scores(tmp_path, collection):
    model = trained(collection, "ndrm3")
    save_checkpoint(tmp_path / "m.pt", model, "ndrm3", model.config.to_dict(), collection.vocab, collection.analyzer)
    factory, info = load_for_indexing(tmp_path / "m.pt", "cpu")
    assert info["id"].startswith("ndrm3-") and info["variant"] == "ndrm3" and info["name"] == "m"
    assert info["analyzer"] == collection.analyzer.to_dict()
    corpus_vocab, old_to_new = permuted(collection.vocab, 0)
    adapted = factory(corpus_vocab)
    assert not adapted.training and adapted.config.vocab_size == len(corpus_vocab)
    old = model.latent.embedding.weight
    new = adapted.latent.embedding.weight
    assert torch.equal(new[torch.from_numpy(old_to_new[2:])], old[2:])
    q, d = batch(collection)
    remap = torch.from_numpy(old_to_new)
    with torch.no_grad():
        torch.testing.assert_close(adapted(remap[q], remap[d]), model(q, d))
    assert adapted.explicit.tf_scale.count == model.explicit.tf_scale.count > 0  # BatchScale frozen from training


def test_unseen_words_get_embeddings_and_corpus_idf(tmp_path, collection):
    model = trained(collection, "ndrm3")
    save_checkpoint(tmp_path / "m.pt", model, "ndrm3", model.config.to_dict(), collection.vocab, collection.analyzer)
    a, b = collection.vocab.terms[10], collection.vocab.terms[11]  # words the training vocabulary knows
    assert "zzyzxword" not in collection.vocab and "quantumfoamology" not in collection.vocab
    docs = [[a, "zzyzxword", b], ["quantumfoamology", b], [a]]
    corpus_vocab = Vocabulary.build(docs)
    adapted = adapt_to_vocabulary(load_checkpoint(tmp_path / "m.pt"), corpus_vocab)
    emb = adapted.latent.embedding.weight
    assert torch.isfinite(emb).all() and emb[corpus_vocab.id("zzyzxword")].norm() > 0
    assert torch.equal(emb[corpus_vocab.id(b)], model.latent.embedding.weight[collection.vocab.id(b)])
    assert torch.allclose(adapted.explicit.idf, torch.as_tensor(corpus_vocab.idf(), dtype=torch.float32))
    query = torch.tensor([[corpus_vocab.id("zzyzxword"), corpus_vocab.id(b)]] * 3)
    doc = pad_rows([np.asarray(corpus_vocab.ids(t)) for t in docs])
    with torch.no_grad():
        assert torch.isfinite(adapted(query, doc)).all()


def test_a_checkpoints_word_vectors_start_another_model(tmp_path, collection):
    from ckqti.train.embedding_init import initial_embeddings
    from ckqti.train.ndrm_config import TrainConfig
    from ckqti.train.reranker_config import RerankerTrainConfig

    model = trained(collection, "ndrm3")
    save_checkpoint(tmp_path / "m.pt", model, "ndrm3", model.config.to_dict(), collection.vocab, collection.analyzer)
    dim = model.config.dim
    rows = initial_embeddings(collection, str(tmp_path / "m.pt"), dim, seed=0)
    np.testing.assert_array_equal(rows[2:], model.latent.embedding.weight.detach().numpy()[2:])
    corpus_vocab, old_to_new = permuted(collection.vocab, 0)
    remapped = checkpoint_embeddings(tmp_path / "m.pt", corpus_vocab, dim)
    np.testing.assert_array_equal(remapped[old_to_new[2:]], rows[2:])
    with pytest.raises(CkqtiError, match="dimensions"):
        checkpoint_embeddings(tmp_path / "m.pt", collection.vocab, dim + 1)
    assert RerankerTrainConfig(embeddings=str(tmp_path / "m.pt")).embeddings.endswith("m.pt")
    for config in (TrainConfig, RerankerTrainConfig):
        with pytest.raises(ValueError, match="checkpoint file"):
            config(embeddings="glove")


def test_the_project_loader_uses_checkpoints(tmp_path, collection):
    from ckqti.models.loading import load_qti_model

    model = trained(collection, "ndrm2")
    ckpt = save_checkpoint(tmp_path / "m.pt", model, "ndrm2", model.config.to_dict(), collection.vocab,
                           collection.analyzer)
    factory, info = load_qti_model(str(tmp_path / "m.pt"), "cpu")
    assert info["id"] == ckpt.id
    assert factory(collection.vocab).length_weight.item() == model.length_weight.item()


def test_other_kinds_round_trip_but_cannot_fill_an_index(tmp_path):
    from dataclasses import asdict

    from ckqti.models.tk import TK, TKConfig
    from ckqti.text import Analyzer

    torch.manual_seed(0)
    config = TKConfig(vocab_size=40, embedding_dim=16, num_heads=2, ff_dim=8)
    model = TK(config).eval()
    vocab = Vocabulary.build([[f"w{i}" for i in range(38)]])
    save_checkpoint(tmp_path / "tk.pt", model, "tk", asdict(config), vocab, Analyzer())
    loaded = load_checkpoint(tmp_path / "tk.pt")
    q, d = torch.randint(2, 40, (3, 4)), torch.randint(2, 40, (3, 12))
    with torch.no_grad():
        assert torch.equal(loaded.build()(q, d), model(q, d))
    for kind in ("tk", "tkl", "idcm"):  # every kind but NDRM's is refused by its kind (its weights are not built)
        save_checkpoint(tmp_path / f"{kind}.pt", model, kind, asdict(config), vocab, Analyzer())
        with pytest.raises(CkqtiError, match=f"a '{kind}' model is not query-term independent"):
            load_for_indexing(tmp_path / f"{kind}.pt")


@pytest.mark.parametrize("terms, df, why", [
    (["cell", "wall", "w2"], [1, 1, 1], r"first terms must be '\[PAD\]' and '\[UNK\]' \(ids 0 and 1\), found \['cell', 'wall'\]"),
    (["[PAD]", "[UNK]", "cell"], [0, 0], r"df must hold one count per term: 3 terms, df of shape \(2,\)"),
])
def test_a_checkpoint_whose_vocabulary_is_not_one_is_one_line(tmp_path, terms, df, why):
    """The vocabulary file check holds for a checkpoint's vocabulary too (it loaded, its first two
    real terms then read as padding and unknown, or its counts misaligned with its terms)."""
    from dataclasses import asdict

    from ckqti.models.tk import TK, TKConfig
    from ckqti.text import Analyzer

    config = TKConfig(vocab_size=3, embedding_dim=16, num_heads=2, ff_dim=8)
    vocab = Vocabulary(terms, np.array(df, np.int64), np.ones(3, np.int64), 1, 3)
    save_checkpoint(tmp_path / "tk.pt", TK(config), "tk", asdict(config), vocab, Analyzer())
    with pytest.raises(CkqtiError, match=f"^{tmp_path / 'tk.pt'}: a vocabulary's {why}$"):
        load_checkpoint(tmp_path / "tk.pt")


def test_a_wordpiece_checkpoint_keeps_its_own_token_ids(tmp_path):
    """IDCM's vocabulary is its WordPiece token list ([UNK] is id 100): not held to [PAD], [UNK] first."""
    from dataclasses import asdict

    from ckqti.models.inputs import WORDPIECE_ANALYZER
    from ckqti.models.tk import TK, TKConfig

    config = TKConfig(vocab_size=3, embedding_dim=16, num_heads=2, ff_dim=8)
    vocab = Vocabulary(["[PAD]", "[unused0]", "[UNK]"], np.zeros(3, np.int64), np.zeros(3, np.int64), 0, 0)
    save_checkpoint(tmp_path / "wp.pt", TK(config), "tk", asdict(config), vocab, WORDPIECE_ANALYZER)
    assert load_checkpoint(tmp_path / "wp.pt").vocab.terms == vocab.terms


def test_repr_is_a_line_not_the_weights():
    from ckqti.models.specs import DEFAULT_CHECKPOINT

    ckpt = load_checkpoint(DEFAULT_CHECKPOINT)
    text = repr(ckpt)
    assert text.startswith(f"Checkpoint(id={ckpt.id!r}, parameters=") and len(text) < 200 and "\n" not in text


def test_an_ndrm3_that_cannot_fill_an_index_is_refused_at_load(tmp_path, collection):
    """A negative weight on exact-match evidence is found when the checkpoint is opened for
    indexing, not after the corpus was analyzed (a traceback, and OUT.partial left behind)."""
    from ckqti.models.checkpoint import load_for_indexing
    from ckqti.models.loading import load_qti_model

    model = trained(collection, "ndrm3")
    with torch.no_grad():
        model.combine.linear.weight[0, 1] = -abs(model.combine.linear.weight[0, 1]) - 0.1
    assert model.combination()[1] < 0
    save_checkpoint(tmp_path / "m.pt", model, "ndrm3", model.config.to_dict(), collection.vocab, collection.analyzer)
    with pytest.raises(CkqtiError, match=r"m\.pt: this NDRM3 weighs exact-match evidence negatively"):
        load_qti_model(str(tmp_path / "m.pt"), "cpu")  # what ckqti index and append open a model with
    load_for_indexing(tmp_path / "m.pt")  # other uses (reranking, tests of the weights) still read it


def tiny_ndrm2(tmp_path, name="n2.pt", vocab=None, **kw):
    """A tiny untrained NDRM2 saved as a checkpoint; returns its path."""
    from ckqti.text import Analyzer

    if vocab is None:
        vocab = Vocabulary.build([["gene", "cell"], ["cell", "tumor"]])
    model = build_ndrm(NDRMConfig(vocab_size=len(vocab), variant="ndrm2"), vocab)
    save_checkpoint(tmp_path / name, model, "ndrm2", model.config.to_dict(), vocab, Analyzer(), **kw)
    return tmp_path / name


def test_a_checkpoint_of_another_format_version_or_lacking_a_field_is_one_line(tmp_path):
    """A later format (or an edited file missing a field) is refused by name, not read as this one
    (a KeyError traceback, or weights put where they do not belong)."""
    path = tiny_ndrm2(tmp_path)
    payload = torch.load(path, weights_only=True)
    for version in (2, 0):  # a later format, and one before the first
        torch.save({**payload, "format_version": version}, tmp_path / f"v{version}.pt")
        with pytest.raises(CkqtiError, match=f"^{tmp_path / f'v{version}.pt'}: checkpoint format version {version} "
                                             "is not supported$"):
            load_checkpoint(tmp_path / f"v{version}.pt")
    torch.save({k: v for k, v in payload.items() if k not in ("fallback", "meta")}, tmp_path / "old.pt")
    with pytest.raises(CkqtiError, match=f"^{tmp_path / 'old.pt'}: checkpoint lacks fallback, meta$"):
        load_checkpoint(tmp_path / "old.pt")


def test_the_fallback_is_checked_saved_and_loaded(tmp_path):
    """``fallback`` decides the rows of unseen words: an unknown one is refused when saving, and
    "mean" comes back from the file (and makes another id than "minilm")."""
    with pytest.raises(ValueError, match="fallback must be one of"):
        tiny_ndrm2(tmp_path, "bad.pt", fallback="glove")
    assert not (tmp_path / "bad.pt").exists()
    mean = load_checkpoint(tiny_ndrm2(tmp_path, "mean.pt", fallback="mean"))
    minilm = load_checkpoint(tiny_ndrm2(tmp_path, "minilm.pt"))
    assert (mean.fallback, minilm.fallback) == ("mean", "minilm") and mean.id != minilm.id


def test_a_vocabulary_grown_document_by_document_saves_and_loads(tmp_path):
    """``Vocabulary.add_document`` keeps spare room in df and cf; the checkpoint stores one count per term."""
    vocab = Vocabulary()
    for doc in (["gene", "cell"], ["cell", "tumor"], ["rain"]):
        vocab.add_document(doc)
    assert len(vocab.df) > len(vocab)  # the spare room the save must drop
    loaded = load_checkpoint(tiny_ndrm2(tmp_path, vocab=vocab))
    assert loaded.vocab.terms == vocab.terms and loaded.vocab.df.tolist() == vocab.df[: len(vocab)].tolist()


@pytest.mark.parametrize("fallback", ["minilm", "mean"])
def test_unseen_words_get_the_checkpoints_fallback_rows(tmp_path, collection, fallback):
    """Indexing another corpus fills unseen words' rows the way the checkpoint says: "minilm" predicts
    each word's own row (two unseen words differ), "mean" gives them all the known rows' mean."""
    torch.manual_seed(0)
    model = build_ndrm(NDRMConfig(vocab_size=len(collection.vocab), variant="ndrm3", **TINY_MODEL), collection.vocab)
    save_checkpoint(tmp_path / "m.pt", model, "ndrm3", model.config.to_dict(), collection.vocab, collection.analyzer,
                    fallback=fallback)
    corpus_vocab = Vocabulary.build([[collection.vocab.terms[10], "zzyzxword", "quantumfoamology"]])
    factory, _ = load_for_indexing(tmp_path / "m.pt", "cpu")
    emb = factory(corpus_vocab).latent.embedding.weight.detach()
    a, b = emb[corpus_vocab.id("zzyzxword")], emb[corpus_vocab.id("quantumfoamology")]
    known = model.latent.embedding.weight.detach()[2:]
    if fallback == "mean":
        torch.testing.assert_close(a, known.mean(0))
        torch.testing.assert_close(b, known.mean(0))
    else:
        assert not torch.allclose(a, b)


def test_a_config_or_weights_this_version_cannot_read_is_one_line(tmp_path):
    """A newer ckqti's config field, or weights that do not fit the config, with a consistent hash:
    a one-line error naming the file, not a ValueError or RuntimeError traceback."""
    from ckqti.models.checkpoint import content_hash

    path = tiny_ndrm2(tmp_path)
    payload = torch.load(path, weights_only=True)
    ckpt = load_checkpoint(path)

    def saved(name, config, state):
        digest = content_hash(ckpt.kind, config, ckpt.analyzer, ckpt.vocab, state, ckpt.fallback)
        torch.save({**payload, "config": config, "state_dict": state, "content_hash": digest}, tmp_path / name)
        return load_checkpoint(tmp_path / name)

    newer = saved("newer.pt", {**payload["config"], "future_field": 1}, payload["state_dict"])
    other = saved("other.pt", payload["config"], {k: v for k, v in list(payload["state_dict"].items())[1:]})
    for bad, why in ((newer, r"its ndrm2 config is not one this version of ckqti reads \(unknown NDRMConfig fields"),
                     (other, r"its weights do not fit its ndrm2 config \(Missing key")):
        with pytest.raises(CkqtiError, match=f"^{bad.path}: {why}"):
            bad.build()
        with pytest.raises(CkqtiError, match=f"^{bad.path}: {why}"):
            adapt_to_vocabulary(bad, ckpt.vocab)
