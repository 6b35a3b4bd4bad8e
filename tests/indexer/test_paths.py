"""A build's paths are refused before any work: before its model, and torch, are loaded."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

REFUSED = """
import sys
from ckqti import api
from ckqti.errors import CkqtiError
try:
    api.index(sys.argv[1], sys.argv[2])
except CkqtiError as e:
    print(e)
print(sorted(m for m in ("torch", "indexer.build") if m in sys.modules))
"""


def test_an_existing_output_or_a_missing_corpus_is_refused_before_torch_is_imported(tmp_path):
    """`ckqti index c.tsv --out EXISTING` said "output exists" after 2.8 s, most of it importing torch and loading
    the bundled model; now at once."""
    corpus, out = tmp_path / "c.tsv", tmp_path / "idx"
    corpus.write_text("d1\tcells\n")
    out.mkdir()
    (out / "manifest.json").write_text("{}")
    for args, message in (((corpus, out), "idx: output exists; pass --force"),
                          ((tmp_path / "none.tsv", tmp_path / "new"), "none.tsv: corpus file not found")):
        res = subprocess.run([sys.executable, "-c", REFUSED, *map(str, args)], cwd=ROOT, capture_output=True,
                             text=True, timeout=120)
        assert res.returncode == 0, res.stderr
        said, imported = res.stdout.splitlines()
        assert message in said and imported == "[]", res.stdout
