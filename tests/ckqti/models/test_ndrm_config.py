"""NDRMConfig: defaults, validation, the dict/JSON round trip of its options."""

from __future__ import annotations

import json

import pytest

from ckqti.models.ndrm_config import NDRMConfig


def test_config_validation_and_round_trip():
    config = NDRMConfig(vocab_size=100)
    assert config.variant == "ndrm3" and config.dim == 256 and config.num_kernels == 10
    assert (config.pool_window, config.pool_stride, config.num_layers, config.num_heads) == (300, 100, 2, 32)
    assert NDRMConfig.from_dict(config.to_dict()) == config
    for bad in (dict(variant="ndrm4"), dict(vocab_size=1), dict(dim=30), dict(pool_stride=400), dict(attention="x")):
        with pytest.raises(ValueError):
            NDRMConfig(**{"vocab_size": 100, **bad})
    with pytest.raises(ValueError):
        NDRMConfig.from_dict({**config.to_dict(), "colour": "red"})


def test_bm25_init_is_validated_and_survives_json():
    config = NDRMConfig(vocab_size=10, variant="ndrm2", bm25_init=(0.9, 0.4))
    back = NDRMConfig.from_dict(json.loads(json.dumps(config.to_dict())))
    assert back == config and back.bm25_init == (0.9, 0.4) and hash(back) == hash(config)
    for bad in [(0.0, 0.4), (0.9, 1.5), (0.9,), (1.0, -0.1)]:
        with pytest.raises(ValueError, match="bm25_init"):
            NDRMConfig(vocab_size=10, variant="ndrm2", bm25_init=bad)


def test_latent_gate_config_is_validated():
    assert NDRMConfig(vocab_size=100, latent_gate=0.6).latent_gate == 0.6
    assert NDRMConfig.from_dict(NDRMConfig(vocab_size=100, latent_gate=1.0).to_dict()).latent_gate == 1.0
    for bad in (0.0, -0.5, 1.5):
        with pytest.raises(ValueError):
            NDRMConfig(vocab_size=100, latent_gate=bad)
