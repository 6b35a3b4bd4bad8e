"""Which model fills an index (ckqti.models.loading): the default, the untrained names, the bundled name."""

from __future__ import annotations

import pytest

from ckqti.models.loading import load_qti_model
from ckqti.models.specs import DEFAULT_CHECKPOINT, resolve_model
from ckqti.vocab import Vocabulary

VOCAB = Vocabulary.build([["gene", "cell"], ["cell", "tumor"]])
bundled = pytest.mark.skipif(not DEFAULT_CHECKPOINT.is_file(), reason="no bundled NDRM3 checkpoint")


@pytest.mark.parametrize("spec, length_weight, length_bias", [
    ("ndrm2", 1.0, 0.0),  # the paper's start: BM25 with k1 = 1, b = 1
    ("ndrm2-anserini", 0.9 * 0.4, 0.9 * (1 - 0.4)),  # Anserini's k1 = 0.9, b = 0.4: w = k1 b, b = k1 (1 - b)
])
def test_the_untrained_models_start_at_their_bm25_and_say_so(spec, length_weight, length_bias):
    factory, info = load_qti_model(spec, "cpu")
    assert info == {"id": f"{spec}-untrained", "name": spec, "variant": "ndrm2"}
    model = factory(VOCAB)
    assert model.length_weight.item() == pytest.approx(length_weight)
    assert model.length_bias.item() == pytest.approx(length_bias)


@bundled
def test_no_model_named_is_the_bundled_checkpoint_and_so_is_its_short_name():
    _, default = load_qti_model(None, "cpu")
    _, named = load_qti_model("ndrm3-scifact", "cpu")
    assert default["path"] == named["path"] == str(DEFAULT_CHECKPOINT) and default["id"] == named["id"]
    assert default["variant"] == "ndrm3" and default["id"].startswith("ndrm3-")
    assert default["latent_gate"] == 0.6  # the manifest records the bundled model's gate (docs/EFFECTIVENESS.md)
    assert resolve_model("ndrm3-scifact") == str(DEFAULT_CHECKPOINT)


def test_without_a_bundled_checkpoint_the_default_is_the_papers_untrained_ndrm2(tmp_path, monkeypatch):
    from ckqti.models import loading

    monkeypatch.setattr(loading, "DEFAULT_CHECKPOINT", tmp_path / "gone.pt")
    assert load_qti_model(None, "cpu")[1] == {"id": "ndrm2-untrained", "name": "ndrm2", "variant": "ndrm2"}


def test_a_device_this_torch_cannot_use_is_one_line_before_any_work():
    """--device mps (on Linux), meta, xpu...: torch.device took them and the model's first tensor failed
    with a traceback, in `ckqti train` after BM25's minutes."""
    import torch

    from ckqti.errors import CkqtiError
    from ckqti.models.loading import pick_device

    assert pick_device("cpu") == torch.device("cpu")
    for device in ["meta", *([] if torch.backends.mps.is_available() else ["mps"])]:
        with pytest.raises(CkqtiError, match=f"device '{device}' cannot run a model here \\(.+\\); use cpu"):
            pick_device(device)
