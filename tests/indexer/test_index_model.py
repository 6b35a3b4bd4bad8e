"""indexer/index_model.py: which model an index was built with, and telling a model is it without loading it."""

from __future__ import annotations

import pytest

from ckqti import api
from ckqti.errors import CkqtiError, IndexFormatError
from ckqti.models import checkpoint as checkpoint_mod
from ckqti.models.checkpoint import save_checkpoint
from ckqti.models.ndrm import NDRMConfig, build_ndrm
from ckqti.text import Analyzer
from ckqti.vocab import Vocabulary
from indexer.format import Manifest
from indexer.index_model import known_model_id


def small_checkpoint(path, meta=None, words=("cells", "divide", "proteins", "fold")):
    vocab = Vocabulary.build([list(words)])
    config = NDRMConfig(vocab_size=len(vocab), variant="ndrm2")
    return save_checkpoint(path, build_ndrm(config, vocab), "ndrm2", config.to_dict(), vocab, Analyzer(), meta=meta)


@pytest.fixture
def built(tmp_path):
    """An index built with a small NDRM2 checkpoint: (index path, checkpoint path, its id)."""
    model = small_checkpoint(tmp_path / "m.pt", meta={"note": "first"})
    idx = tmp_path / "idx"
    api.index({"d1": "cells divide", "d2": "proteins fold", "d3": "cells fold"}, idx, model=str(tmp_path / "m.pt"),
              progress=False)
    return idx, tmp_path / "m.pt", model.id


def test_the_manifest_records_the_checkpoint_file_bytes_hash(built):
    idx, path, model_id = built
    import hashlib

    recorded = Manifest.read(idx).model
    assert recorded["id"] == model_id
    assert recorded["file_sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()


def test_known_model_id_is_the_manifests_only_for_the_same_bytes(built, tmp_path):
    idx, path, model_id = built
    manifest = Manifest.read(idx)
    assert known_model_id(str(path), manifest) == model_id
    same_model_other_bytes = tmp_path / "resaved.pt"
    assert small_checkpoint(same_model_other_bytes, meta={"note": "second"}).id == model_id  # meta is not identity
    assert known_model_id(str(same_model_other_bytes), manifest) is None  # only loading it can tell
    assert known_model_id("ndrm2", manifest) == "ndrm2-untrained"
    assert known_model_id("ndrm2-anserini", manifest) == "ndrm2-anserini-untrained"
    older = Manifest.read(idx)
    del older.model["file_sha256"]  # an index built before session 46
    assert known_model_id(str(path), older) is None


def test_searching_with_the_indexs_own_checkpoint_does_not_load_it(built, tmp_path, monkeypatch):
    idx, path, model_id = built

    def no_loading(*args, **kwargs):
        raise AssertionError("loaded the checkpoint")

    monkeypatch.setattr(checkpoint_mod, "load_for_indexing", no_loading)
    with api.open_searcher(idx, model=str(path)) as searcher:
        assert searcher.search("proteins", k=2).docids == ["d2"]
    with pytest.raises(IndexFormatError, match="not 'ndrm2-untrained'"):
        api.open_searcher(idx, model="ndrm2")
    resaved = tmp_path / "resaved.pt"
    small_checkpoint(resaved, meta={"note": "second"})
    with pytest.raises(AssertionError, match="loaded the checkpoint"):  # other bytes: loaded to compare
        api.open_searcher(idx, model=str(resaved))


def test_another_file_is_loaded_and_compared_by_its_content(built, tmp_path):
    idx, path, model_id = built
    resaved = tmp_path / "resaved.pt"
    small_checkpoint(resaved, meta={"note": "second"})  # same weights, other bytes
    with api.open_searcher(idx, model=str(resaved)) as searcher:
        assert searcher.search("proteins", k=2).docids == ["d2"]
    other = small_checkpoint(tmp_path / "other.pt", words=("cells", "grow"))  # another vocabulary: another model
    assert other.id != model_id
    with pytest.raises(IndexFormatError, match=f"not '{other.id}'"):
        api.open_searcher(idx, model=str(tmp_path / "other.pt"))
    path.write_bytes(path.read_bytes()[:100])  # the index's checkpoint damaged: its bytes no longer match
    with pytest.raises(CkqtiError, match="m.pt"):
        api.open_searcher(idx, model=str(path))
