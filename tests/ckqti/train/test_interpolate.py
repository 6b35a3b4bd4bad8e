import numpy as np
import pytest
import torch

from ckqti.embeddings import minilm_embeddings
from ckqti.errors import CkqtiError
from ckqti.models.checkpoint import load_checkpoint, save_checkpoint
from ckqti.train.interpolate import interpolate_embeddings
from ckqti.vocab import Vocabulary
from tests.ckqti.models.test_checkpoint import batch, collection, trained  # noqa: F401  (collection: a fixture)

KEY = "latent.embedding.weight"


@pytest.fixture(scope="module")
def source(tmp_path_factory, collection):  # noqa: F811
    """A tiny NDRM3 whose word vectors moved away from their MiniLM start, saved with a 'minilm' start."""
    model = trained(collection, "ndrm3")
    start = torch.from_numpy(minilm_embeddings(collection.vocab, model.config.dim))
    with torch.no_grad():
        model.state_dict()[KEY].copy_(start + 0.3 * torch.randn(start.shape, generator=torch.Generator().manual_seed(1)))
    path = tmp_path_factory.mktemp("interpolate") / "source.pt"
    save_checkpoint(path, model, "ndrm3", model.config.to_dict(), collection.vocab, collection.analyzer,
                    {"config": {"embeddings": "minilm"}, "dev_qids": ["1"]})
    return path


def rows(path) -> np.ndarray:
    return load_checkpoint(path).state_dict[KEY].float().numpy()


def test_rows_move_along_the_line_from_start_to_trained(tmp_path, source):
    trained_rows = rows(source)
    start = minilm_embeddings(load_checkpoint(source).vocab, trained_rows.shape[1])
    for alpha in (0.0, 0.25, 1.0):
        out = interpolate_embeddings(source, alpha, tmp_path / f"{alpha}.pt")
        np.testing.assert_allclose(rows(out.path), start + alpha * (trained_rows - start), atol=1e-6)
        assert out.meta["interpolated"] == {"from": load_checkpoint(source).id, "alpha": alpha, "start": "minilm"}
        assert out.meta["dev_qids"] == ["1"]  # the source's training record travels with it
    assert not np.allclose(rows(tmp_path / "0.25.pt"), trained_rows, atol=1e-3)


def test_alpha_one_scores_as_the_source_and_other_weights_are_kept(tmp_path, source, collection):  # noqa: F811
    src = load_checkpoint(source)
    one = interpolate_embeddings(source, 1.0, tmp_path / "one.pt")
    half = load_checkpoint(interpolate_embeddings(source, 0.5, tmp_path / "half.pt").path)
    q, d = batch(collection)
    with torch.no_grad():
        torch.testing.assert_close(one.build()(q, d), src.build()(q, d))
        assert not torch.allclose(half.build()(q, d), src.build()(q, d))
    for key, value in src.state_dict.items():
        if key != KEY:
            assert torch.equal(half.state_dict[key], value), key


def test_float16_sources_stay_float16(tmp_path, source):
    src = load_checkpoint(source)
    model = src.build()
    save_checkpoint(tmp_path / "half.pt", model, "ndrm3", src.config, src.vocab, src.analyzer, src.meta, "float16")
    out = interpolate_embeddings(tmp_path / "half.pt", 0.5, tmp_path / "out.pt")
    assert out.state_dict[KEY].dtype == torch.float16


def test_starts_that_cannot_be_recomputed_and_bad_alphas_are_refused(tmp_path, source):
    src = load_checkpoint(source)
    save_checkpoint(tmp_path / "sg.pt", src.build(), "ndrm3", src.config, src.vocab, src.analyzer,
                    {"config": {"embeddings": "skipgram"}})
    with pytest.raises(CkqtiError, match="skipgram"):
        interpolate_embeddings(tmp_path / "sg.pt", 0.5, tmp_path / "out.pt")
    with pytest.raises(ValueError, match="alpha"):
        interpolate_embeddings(source, 1.5, tmp_path / "out.pt")
    assert not (tmp_path / "out.pt").exists()


def test_averages_are_weighted_means_of_models_sharing_an_architecture(tmp_path, source, collection):  # noqa: F811
    from dataclasses import replace

    from ckqti.models.ndrm import build_ndrm
    from ckqti.train.interpolate import average_checkpoints

    src = load_checkpoint(source)
    other_model = trained(collection, "ndrm3")  # same start, then other weights: one frozen-vector twin
    other_model.config = replace(other_model.config, train_embeddings=False)  # a training-only difference
    with torch.no_grad():
        for p in other_model.parameters():
            p.add_(0.01)
    save_checkpoint(tmp_path / "b.pt", other_model, "ndrm3", other_model.config.to_dict(), src.vocab, src.analyzer)
    other = load_checkpoint(tmp_path / "b.pt")
    soup = average_checkpoints([source, tmp_path / "b.pt"], [0.25, 0.75], tmp_path / "soup.pt")
    for key, value in soup.state_dict.items():
        if value.is_floating_point():
            expected = 0.25 * src.state_dict[key].double() + 0.75 * other.state_dict[key].double()
            torch.testing.assert_close(value.double(), expected, atol=1e-5, rtol=1e-5)
    assert soup.meta["averaged"] == {"from": [src.id, other.id], "weights": [0.25, 0.75]}
    first = average_checkpoints([source, tmp_path / "b.pt"], [1.0, 0.0], tmp_path / "first.pt")
    q, d = batch(collection)
    with torch.no_grad():
        torch.testing.assert_close(first.build()(q, d), src.build()(q, d))
    wider = build_ndrm(replace(src.build().config, num_kernels=11), src.vocab)
    save_checkpoint(tmp_path / "w.pt", wider, "ndrm3", wider.config.to_dict(), src.vocab, src.analyzer)
    with pytest.raises(CkqtiError, match="same model"):
        average_checkpoints([source, tmp_path / "w.pt"], [0.5, 0.5], tmp_path / "bad.pt")
    with pytest.raises(ValueError, match="sum to 1"):
        average_checkpoints([source, tmp_path / "b.pt"], [0.5, 0.6], tmp_path / "bad.pt")
    with pytest.raises(ValueError, match="non-negative"):  # an extrapolation, not an average
        average_checkpoints([source, tmp_path / "b.pt"], [-0.5, 1.5], tmp_path / "bad.pt")
    v = src.vocab  # the same shapes over other words: row i is another term's vector
    renamed = Vocabulary([*v.terms[:2], *reversed(v.terms[2:])], v.df.copy(), v.cf.copy(), v.num_docs, v.total_terms)
    save_checkpoint(tmp_path / "r.pt", other_model, "ndrm3", other_model.config.to_dict(), renamed, src.analyzer)
    with pytest.raises(CkqtiError, match="same model"):
        average_checkpoints([source, tmp_path / "r.pt"], [0.5, 0.5], tmp_path / "bad.pt")
    assert not (tmp_path / "bad.pt").exists()
