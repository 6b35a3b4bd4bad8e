"""A model's name resolved before torch (ckqti.models.specs): the bundled name, a folder, a path not there."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ckqti.errors import CkqtiError
from ckqti.models.specs import BUNDLED, resolve_model


def test_a_bundled_model_this_install_lacks_and_a_folder_are_one_line(tmp_path, monkeypatch):
    monkeypatch.setitem(BUNDLED, "ndrm3-scifact", tmp_path / "gone.pt")
    with pytest.raises(CkqtiError, match=r"gone\.pt: the bundled model 'ndrm3-scifact' is not in this install$"):
        resolve_model("ndrm3-scifact")
    with pytest.raises(CkqtiError, match=f"^{tmp_path}: is a directory; a model is 'ndrm2'"):
        resolve_model(tmp_path)
    with pytest.raises(CkqtiError, match="model not found"):
        resolve_model(tmp_path / "nosuch.pt")


def test_resolving_a_model_imports_no_torch():
    """Commands resolve the model first (rerank, explain) so that a mistake costs no torch import."""
    code = ("import sys\nfrom ckqti.models.specs import resolve_model\nresolve_model('ndrm2')\n"
            "print('torch' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "False\n"
