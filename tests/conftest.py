"""Shared fixtures: real data from ../shared/data and small indexes built from it."""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
SAMPLE = ROOT / "ckqti" / "data" / "sample"


@pytest.fixture(scope="session")
def data_dir() -> Path:
    if not DATA.is_dir():
        pytest.skip("../shared/data is not present")
    return DATA


@pytest.fixture(scope="session")
def scifact_source(data_dir):
    """SciFact test as ``scripts/long_documents.py`` reads it, with ckqti's analyzer and the
    collection's vocabulary: ``(source, analyzer, vocab)``."""
    from ckqti.models.inputs import collection_vocabulary
    from ckqti.text import Analyzer
    from scripts.long_documents import load_source

    source = load_source("scifact", data_dir)
    analyzer = Analyzer()
    return source, analyzer, collection_vocabulary(source.docs.values(), analyzer)


@pytest.fixture(scope="session")
def scifact_small(tmp_path_factory, data_dir) -> Path:
    """The first 600 SciFact documents as BEIR JSONL."""
    out = tmp_path_factory.mktemp("scifact") / "corpus.jsonl"
    with open(data_dir / "scifact" / "corpus.jsonl") as f, open(out, "w") as g:
        for line in itertools.islice(f, 600):
            g.write(line)
    return out


@pytest.fixture(scope="session")
def scifact_index(tmp_path_factory, scifact_small) -> Path:
    """An NDRM2 index of ``scifact_small`` in 3 shards."""
    from ckqti import api

    out = tmp_path_factory.mktemp("idx") / "scifact"
    api.index(scifact_small, out, model="ndrm2", shard_size=250, progress=False)
    return out


@pytest.fixture(scope="session")
def scifact_rebuilt(tmp_path_factory, data_dir) -> Path:
    """What a rebuild in place of ``scifact_index`` could install: an NDRM2 index of the next 600
    SciFact documents, in 3 shards of the same names and sizes (250, 250, 100) and a vocabulary file
    of the same name, so that only the contents of its files differ."""
    from ckqti import api

    corpus = tmp_path_factory.mktemp("scifact-next") / "corpus.jsonl"
    with open(data_dir / "scifact" / "corpus.jsonl") as f, open(corpus, "w") as g:
        for line in itertools.islice(f, 600, 1200):
            g.write(line)
    out = tmp_path_factory.mktemp("idx") / "scifact-next"
    api.index(corpus, out, model="ndrm2", shard_size=250, progress=False)
    return out


def first_docs(path: Path, n: int) -> list[dict]:
    with open(path) as f:
        return [json.loads(line) for line in itertools.islice(f, n)]


@pytest.fixture(autouse=True)
def one_torch_thread():
    """Tests run on 2 shared cores: one intra-op thread avoids oversubscription (restored after)."""
    try:
        import torch
    except ImportError:  # pragma: no cover
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def pytest_sessionfinish(session, exitstatus):
    """Where ``CKQTI_NO_SKIPS=1`` (``.ci/run`` sets it), a skipped test fails the run: there a skip
    hides a test behind a green run (../shared/data not found, a checkpoint or a library missing)."""
    if os.environ.get("CKQTI_NO_SKIPS") != "1" or exitstatus != pytest.ExitCode.OK:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = reporter.stats.get("skipped", []) if reporter is not None else []
    if skipped:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        reasons = sorted({str(r.longrepr[-1]) if isinstance(r.longrepr, tuple) else str(r.longrepr) for r in skipped})
        reporter.write_line(f"CKQTI_NO_SKIPS=1: {len(skipped)} skipped test(s) fail this run: {'; '.join(reasons)}", red=True)


def pytest_collection_modifyitems(config, items):
    """Run the tests that start a JVM in the pytest process (Lucene peers) last: once a JVM is
    in the process, its signal handlers can crash native code that runs after it."""
    items.sort(key=lambda item: item.fspath.basename == "test_peers.py")  # LucenePeer: a JVM in this process


CLICKED_DOCS = (  # docid, url, title, body: MS MARCO's four columns, so the URL's place in the text is checked too
    ("d1", "http://a.example/cells", "Cell growth", "Cells grow and divide in tissue."),
    ("d2", "http://b.example/vitamin", "Vitamin D", "Vitamin D deficiency and bone disease."),
    ("d3", "http://c.example/tb", "Tuberculosis", "Tuberculosis is an infection of the lung."),
    ("d4", "http://d.example/misc", "Other matters", "Nothing about cells or bones here."),
    ("d5", "http://e.example/heart", "Heart", "The heart pumps blood through the body."),
    ("d6", "http://f.example/skin", "Skin", "Skin protects the body from infection."),
)
CLICKS = "d1\tcell division\nd3\tlung infection\nd1\tgrowth of cells\nd6\tskin infection rash\nd9\tno such doc\n"


@pytest.fixture(scope="session")
def clicked_collection(tmp_path_factory) -> dict[str, Path]:
    """A six-document TSV corpus, its ORCAS clicks (three documents clicked, one click for no document)
    and the untrained NDRM2's index of the corpus built with them: ``corpus``, ``orcas``, ``index``."""
    from ckqti import api

    folder = tmp_path_factory.mktemp("clicked")
    corpus, orcas = folder / "corpus.tsv", folder / "orcas.tsv"
    corpus.write_text("".join("\t".join(doc) + "\n" for doc in CLICKED_DOCS))
    orcas.write_text(CLICKS)
    api.index(corpus, folder / "idx", model="ndrm2", orcas=orcas, progress=False)
    return {"corpus": corpus, "orcas": orcas, "index": folder / "idx"}
