"""What ``pip install .`` (or a wheel) installs: every file the packages hold beside their
modules is named by ``pyproject.toml``'s package data, so an install outside the checkout has the
bundled model, the sample and whatever data file is added later (a wheel carries a package's
non-Python files only where package data names them; ``py.typed`` setuptools adds itself)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ckqti.models.specs import BUNDLED

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("ckqti", "indexer", "retriever")
NOT_DATA = {".py", ".pyc", ".nbi", ".nbc"}  # modules, and what Python and Numba cache beside them


def package_data() -> dict[str, list[str]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert config["packages"]["find"]["include"] == [f"{p}*" for p in PACKAGES]
    return config.get("package-data", {})


def shipped(root: Path, globs: dict[str, list[str]]) -> set[Path]:
    """The files under ``root`` a wheel carries beside the modules: each package's package-data
    globs (or ``*``'s), matched as setuptools matches them (``**`` crosses folders, ``*`` does
    not), and ``py.typed``."""
    found = set()
    for package in PACKAGES:
        for pattern in globs.get(package, []) + globs.get("*", []) + ["py.typed"]:
            found |= {f for f in (root / package).glob(pattern) if f.is_file()}
    return found


def data_files(root: Path) -> list[Path]:
    return [f for p in PACKAGES for f in (root / p).rglob("*")
            if f.is_file() and f.suffix not in NOT_DATA and "__pycache__" not in f.parts]


def test_every_data_file_in_the_packages_is_package_data():
    files = data_files(ROOT)
    assert files  # the bundled model at least
    assert sorted(f.relative_to(ROOT).as_posix() for f in set(files) - shipped(ROOT, package_data())) == []


def test_the_bundled_models_are_inside_the_package():
    """Their paths are the package's own (not the checkout's), and named by its package data."""
    assert set(BUNDLED.values()) <= shipped(ROOT, package_data())


def test_the_check_sees_a_file_outside_the_globs(tmp_path):
    for name in ("ckqti/data/m.pt", "ckqti/data/sample/c.jsonl", "ckqti/words.txt", "indexer/py.typed"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x")
    unshipped = {f.relative_to(tmp_path).as_posix() for f in set(data_files(tmp_path)) - shipped(tmp_path, {"ckqti": ["data/*"]})}
    assert unshipped == {"ckqti/data/sample/c.jsonl", "ckqti/words.txt"}
    assert {f.relative_to(tmp_path).as_posix() for f in shipped(tmp_path, {"ckqti": ["data/**/*"]})} == {
        "ckqti/data/m.pt", "ckqti/data/sample/c.jsonl", "indexer/py.typed"}


def install_paragraph() -> str:
    """docs/INSTALL.md's section on using an install outside a clone (the README's quick start held it
    until session 45 and points there)."""
    install = (ROOT / "docs" / "INSTALL.md").read_text()
    start = install.index("## Installing outside a clone\n")
    end = install.find("\n## ", start)
    return install[start:end if end >= 0 else len(install)]


def test_the_install_page_says_how_to_find_the_installed_sample():
    """It said the sample is "in the installed package's ckqti/data/sample/", which a user outside a clone
    had to find in site-packages; its command prints that folder (run here from the checkout)."""
    import re
    import subprocess
    import sys

    command = re.search(r'`python -c "([^"]+)"` prints', install_paragraph())
    assert command, "no command in docs/INSTALL.md's install section prints the sample's folder"
    out = subprocess.run([sys.executable, "-c", command.group(1)], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    folder = Path(out.stdout.strip())
    assert folder == ROOT / "ckqti" / "data" / "sample" and (folder / "corpus.jsonl").is_file()


def test_the_install_page_names_the_folders_pip_uninstall_leaves():
    """``pip uninstall ckqti`` leaves the Numba cache files (``__pycache__/*.nbi``, ``*.nbc``; not in the
    wheel's RECORD) beside every module with cached kernels: 71 files in ``retriever/``, 6 in ``indexer/``
    after a warm-up (found from an installed wheel). docs/INSTALL.md names exactly those packages' folders."""
    import re

    cached = {p for p in PACKAGES for f in (ROOT / p).rglob("*.py")
              if re.search(r"^\s*@[\w.]*njit\([^)]*cache=True", f.read_text(), re.MULTILINE)}
    assert "retriever" in cached  # the search kernels: the check sees a cached kernel
    paragraph = install_paragraph()
    assert "`pip uninstall ckqti`" in paragraph, "docs/INSTALL.md does not say what pip uninstall leaves"
    uninstall = paragraph[paragraph.index("`pip uninstall ckqti`"):]
    assert set(re.findall(r"`(\w+)/`", uninstall)) == cached
