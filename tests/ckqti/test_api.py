"""ckqti.api's own checks of its arguments: what the CLI's flag types refuse, Python callers get
as one CkqtiError, before any work (no OUT.partial left behind)."""

import numpy as np
import pytest

from ckqti import api
from ckqti.errors import OptionError


@pytest.mark.parametrize("options, message", [
    ({"shard_size": 0}, "shard_size must be an integer >= 1, got 0"),
    ({"shard_size": 20.5}, "shard_size must be an integer >= 1, got 20.5"),
    ({"batch_size": 0}, "batch_size must be an integer >= 1, got 0"),
    ({"neighbours": -1}, "neighbours must be an integer >= 0, got -1"),
    ({"workers": 2}, "workers needs ray_address"),
])
def test_index_refuses_bad_counts_before_any_work(tmp_path, scifact_small, options, message):
    out = tmp_path / "idx"
    with pytest.raises(OptionError, match=message.replace("(", r"\(").replace(")", r"\)")):
        api.index(scifact_small, out, model="ndrm2", progress=False, **options)
    assert not out.exists() and not (tmp_path / "idx.partial").exists()


def test_numpy_counts_build_an_index_with_a_json_manifest(tmp_path, scifact_small):
    m = api.index(scifact_small, tmp_path / "idx", model="ndrm2", shard_size=np.int64(150), batch_size=np.int32(8),
                  progress=False)
    assert len(m.shards) > 1 and api.info(tmp_path / "idx").num_docs == m.num_docs


def test_append_and_compact_refuse_bad_counts(tmp_path, scifact_small):
    idx = tmp_path / "idx"
    api.index(scifact_small, idx, model="ndrm2", progress=False)
    with pytest.raises(OptionError, match="shard_size must be an integer >= 1, got 0"):
        api.compact(idx, 0)
    with pytest.raises(OptionError, match="batch_size must be an integer >= 1, got -2"):
        api.append(scifact_small, idx, batch_size=-2, progress=False)


@pytest.mark.parametrize("options, message", [
    ({"port": 70000}, "port must be in 0..65535, got 70000"),
    ({"port": None}, "port must be an integer >= 0, got None"),
    ({"max_k": 0}, "max_k must be an integer >= 1, got 0"),
    ({"workers": 0}, "workers must be an integer >= 1, got 0"),
    ({"api_key": ""}, "api_key must be a non-empty string"),
    ({"api_key": " key"}, "api_key must be a non-empty string without surrounding whitespace"),
])
def test_serve_refuses_bad_settings_before_binding(scifact_index, options, message):
    def never(url):
        raise AssertionError(f"served at {url}")

    with pytest.raises(OptionError, match=message):
        api.serve(scifact_index, on_ready=never, **options)


def test_neighbours_are_refused_for_ndrm2(tmp_path, scifact_small):
    """NDRM2 stores each document's own terms: a neighbours setting would be recorded and do nothing."""
    with pytest.raises(OptionError, match="NDRM2 has no latent channel"):
        api.index(scifact_small, tmp_path / "idx", model="ndrm2", neighbours=8, progress=False)
    assert not (tmp_path / "idx.partial").exists()
