"""A build's paths are refused before any work: before its model, and torch, are loaded."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ckqti.errors import CkqtiError, InputError
from indexer import paths
from indexer.format import Manifest
from indexer.paths import check_build_paths, output_path
from indexer.readers.formats import check_start

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


def test_a_corpus_in_another_encoding_is_refused_before_torch_is_imported(tmp_path):
    """A CP-1252 corpus (a Windows editor's "ANSI") was named, file and line, only once the model had
    loaded (4 s); its first bytes are read first now, plain or gzip, for a build and an append."""
    import gzip

    text = "".join(f"d{i}\tcells {'café' if i == 40 else 'divide'}\n" for i in range(60)).encode("cp1252")
    plain, packed = tmp_path / "ansi.tsv", tmp_path / "ansi.tsv.gz"
    plain.write_bytes(text)
    packed.write_bytes(gzip.compress(text))
    append = REFUSED.replace("api.index(sys.argv[1], sys.argv[2])", "api.append(sys.argv[1], sys.argv[2])")
    index = tmp_path / "idx"
    index.mkdir()
    (index / "manifest.json").write_text('{"format_version": 2}')
    for script, corpus, out in ((REFUSED, plain, tmp_path / "new"), (REFUSED, packed, tmp_path / "new"),
                                (append, plain, index)):
        res = subprocess.run([sys.executable, "-c", script, str(corpus), str(out)], cwd=ROOT, capture_output=True,
                             text=True, timeout=120)
        assert res.returncode == 0, res.stderr
        assert res.stdout.splitlines() == [f"{corpus}:41: invalid UTF-8 (byte 13 of the line)", "[]"], res.stdout


def test_only_the_start_of_an_input_is_read_before_the_model(tmp_path):
    """The check reads a few MiB, not a collection: a bad byte past them is the reader's to name."""
    corpus = tmp_path / "c.tsv"
    corpus.write_bytes(b"".join(b"d%d\tcells divide\n" % i for i in range(100)) + b"d100\tcaf\xe9\n")
    check_start(corpus, size=1000)
    with pytest.raises(InputError, match=r"c.tsv:101: invalid UTF-8 \(byte 8 of the line\)"):
        check_start(corpus)


def an_index(path: Path) -> Path:
    """A folder the checks take for a ckqti index (they read only whether its manifest is there)."""
    path.mkdir(parents=True)
    (path / "manifest.json").write_text("{}")
    return path


def a_corpus(path: Path) -> Path:
    path.write_text("d1\tcells\n")
    return path


def test_a_link_as_output_is_the_folder_it_points_to(tmp_path):
    target = an_index(tmp_path / "real")
    (tmp_path / "link").symlink_to(target)
    assert output_path(tmp_path / "link") == target.resolve()
    assert output_path(tmp_path / "new") == tmp_path / "new"


def test_force_refuses_the_working_directory_and_the_folders_above_it(tmp_path, monkeypatch):
    corpus, idx = a_corpus(tmp_path / "c.tsv"), an_index(tmp_path / "idx")
    (idx / "sub").mkdir()
    for cwd in (idx, idx / "sub"):
        monkeypatch.chdir(cwd)
        with pytest.raises(CkqtiError, match="is the working directory or holds it"):
            check_build_paths(corpus, None, idx, True, None)
    monkeypatch.chdir(tmp_path)
    check_build_paths(corpus, None, idx, True, None)
    empty = tmp_path / "empty"
    empty.mkdir()
    check_build_paths(corpus, None, empty, True, None)  # an empty folder may be replaced as an index may


def test_an_output_is_judged_where_it_resolves_to(tmp_path):
    """``idx/x/../../new`` is beside the index, not inside it; an input reached through a link into
    the output is inside it."""
    idx = an_index(tmp_path / "idx")
    (idx / "x").mkdir()
    corpus = a_corpus(tmp_path / "c.tsv")
    check_build_paths(corpus, None, idx / "x" / ".." / ".." / "new", False, None)
    with pytest.raises(CkqtiError, match="is inside the index"):
        check_build_paths(corpus, None, idx / "new", False, None)
    a_corpus(idx / "c.tsv")
    (tmp_path / "link").symlink_to(idx)
    with pytest.raises(CkqtiError, match="holds an input file"):
        check_build_paths(tmp_path / "link" / "c.tsv", None, idx, True, None)


def test_an_append_to_an_index_it_cannot_write_is_refused(tmp_path, monkeypatch):
    """Root may write anywhere, so the folder's permissions are played by ``os.access``."""
    corpus = a_corpus(tmp_path / "c.tsv")
    monkeypatch.setattr(Manifest, "read", classmethod(lambda cls, index: None))
    paths.check_append_paths(corpus, None, tmp_path, None)
    monkeypatch.setattr(paths.os, "access", lambda path, mode: not mode & os.W_OK)
    with pytest.raises(CkqtiError, match="the index is read-only"):
        paths.check_append_paths(corpus, None, tmp_path, None)
