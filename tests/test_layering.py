"""Serving code (index, search, rerank, explain, the models) does not depend on the training package.

The checkpoint format, padding and BM25 candidates live beside the models and BM25; ``ckqti.train``
only writes checkpoints and trains. Two checks: importing the serving modules in a fresh process
imports no ``ckqti.train`` module, and no serving source file names ``ckqti.train`` in an import,
not even one deferred into a function (which importing alone would not run).
"""

from __future__ import annotations

import ast
import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import ckqti.models

ROOT = Path(__file__).resolve().parents[1]
SERVING_MODULES = [
    "ckqti.cli", "ckqti.cli.commands", "ckqti.api", "ckqti.explain", "ckqti.bm25",
    "indexer.build", "indexer.append", "indexer.compact",
    "retriever.index", "retriever.search", "retriever.rerank", "retriever.runs", "retriever.run_reader",
    "retriever.run_writer", "retriever.info",
    *(f"ckqti.models.{m.name}" for m in pkgutil.iter_modules(ckqti.models.__path__)),
]
# ckqti.api and ckqti.cli.train import the trainer inside `train` only: the one command that needs it
TRAINING_ENTRY_POINTS = {"ckqti/api.py", "ckqti/cli/train.py"}


def serving_sources() -> list[Path]:
    files = [*(ROOT / "ckqti").glob("*.py"), *(ROOT / "ckqti" / "cli").glob("*.py"),
             *(ROOT / "ckqti" / "models").rglob("*.py"), *(ROOT / "indexer").rglob("*.py"),
             *(ROOT / "retriever").rglob("*.py")]
    return [f for f in files if f.relative_to(ROOT).as_posix() not in TRAINING_ENTRY_POINTS]


def imported_modules(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def test_importing_the_serving_modules_imports_no_training_module():
    code = ("import json, sys\n"
            f"for name in {SERVING_MODULES!r}:\n"
            "    __import__(name)\n"
            "print(json.dumps(sorted(m for m in sys.modules if m == 'ckqti.train' or m.startswith('ckqti.train.'))))\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == []


def test_no_serving_source_imports_the_training_package():
    offenders = {f.relative_to(ROOT).as_posix(): sorted(n for n in imported_modules(f) if n.split(".")[:2] == ["ckqti", "train"])
                 for f in serving_sources()}
    assert {f: names for f, names in offenders.items() if names} == {}
    assert len(offenders) > 40  # the scan saw the packages (not an empty glob)
