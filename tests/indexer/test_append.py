"""Appending documents as new shards, compaction, and collection statistics after both.

The reference is a fresh build of the whole collection with the same quantization steps and
model constants (the first build's); search results (docids and integer scores) must be
identical before and after compaction, and idf must be the fresh build's.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from ckqti import api
from ckqti.cli import cli
from ckqti.errors import CkqtiError, IndexFormatError, InputError
from ckqti.models.loading import untrained_ndrm2
from ckqti.models.ndrm import NDRMConfig, build_ndrm
from ckqti.models.specs import DEFAULT_CHECKPOINT
from ckqti.vocab import Vocabulary
from indexer import append as append_mod
from indexer.append import append_index
from indexer.build import BuildConfig, build_index
from indexer.compact import compact_index, shard_groups
from indexer.format import MANIFEST, Manifest
from indexer.impacts import ImpactConfig
from indexer.index_model import index_model_spec
from indexer.readers import read_corpus, read_queries
from indexer.stamps import STAMPS_FILE
from retriever.index import Index
from retriever.info import index_info
from retriever.kernel_saat import brute_force_scores
from retriever.search import Searcher


def write_lines(path, lines):
    path.write_text("".join(lines))
    return path


@pytest.fixture(scope="module")
def parts(tmp_path_factory, scifact_small):
    """SciFact's first 240 documents (A), the next 120 (B), and all 360 (A+B)."""
    d = tmp_path_factory.mktemp("parts")
    lines = scifact_small.read_text().splitlines(keepends=True)[:360]
    return (write_lines(d / "a.jsonl", lines[:240]), write_lines(d / "b.jsonl", lines[240:]),
            write_lines(d / "ab.jsonl", lines))


@pytest.fixture(scope="module")
def index_a(tmp_path_factory, parts):
    """An NDRM2 index of A in shards of 100 documents (tests copy it)."""
    out = tmp_path_factory.mktemp("a") / "idx"
    api.index(parts[0], out, model="ndrm2", shard_size=100, progress=False)
    return out


def index_files(idx):
    """What the index directory holds, its verification stamp aside (a cache that opens write)."""
    return [p.name for p in idx.iterdir() if p.name != STAMPS_FILE]


def copy_of(index, tmp_path):
    return Path(shutil.copytree(index, tmp_path / "idx"))


@pytest.fixture(scope="module")
def queries(data_dir):
    qs = read_queries(data_dir / "scifact" / "queries.jsonl")
    return [q for q in itertools.islice(qs.values(), 0, 600, 3)]  # 200 claims


def prior_factory(constants):
    """The untrained NDRM2 with the given index constants (the first build's length prior)."""
    factory, info = untrained_ndrm2(torch.device("cpu"))

    def build(vocab):
        model = factory(vocab)
        model.set_index_constants(constants)
        return model

    return build, info


def fresh_build(corpus, out, like: Manifest, shard_size: int):
    """A build of ``corpus`` with ``like``'s quantization steps and model constants."""
    factory, info = prior_factory(like.model_constants)
    config = BuildConfig(shard_size=shard_size, channel_steps=tuple(c["step"] for c in like.channels))
    return build_index(corpus, out, factory, info, config, progress=False)


def integer_run(index_path, queries, k=20):
    """Per query: the plan's unit and ``[(docid, integer score), ...]``."""
    s = Searcher(index_path)
    out, plans = [], []
    for text in queries:
        plan = s.plan(s.parse(text))
        plans.append(plan)
        vals, shards, docs, _ = s.topk_arrays(plan.lists, plan.weights, k)
        hits = [(s.index.shards[si].docid(d), int(v)) for v, si, d in zip(vals, shards, docs)]
        out.append((plan.unit, hits))
    # the batch path (older shards lack the lists of terms appended later) gives the same hits
    bv, bs, bd, bn, _ = s.topk_batch([p.lists for p in plans], [p.weights for p in plans], k)
    for i, (_, hits) in enumerate(out):
        assert [(s.index.shards[si].docid(d), int(v)) for v, si, d in zip(bv[i, :bn[i]], bs[i, :bn[i]], bd[i, :bn[i]])] == hits
    return out


def assert_same_results(a, b, queries):
    ra, rb = integer_run(a, queries), integer_run(b, queries)
    assert sum(len(h) for _, h in ra) > 10 * len(queries)
    for (ua, ha), (ub, hb) in zip(ra, rb):
        assert ua == ub and ha == hb


def test_append_then_compact_equals_a_fresh_build(tmp_path, parts, index_a, queries):
    a, b, ab = parts
    idx = copy_of(index_a, tmp_path)
    built = Manifest.read(idx)
    old_files = {s.name: s.files for s in built.shards}
    m = api.append(b, idx, shard_size=100, progress=False)
    assert [s.num_docs for s in m.shards] == [100, 100, 40, 100, 20] and m.num_docs == 360
    assert {s.name: s.files for s in m.shards[:3]} == old_files  # old shards untouched
    assert m.channels == built.channels and m.model_constants == built.model_constants
    assert m.appends[0]["num_docs"] == 120 and m.appends[0]["new_terms"] > 0
    fresh = tmp_path / "fresh"
    fm = fresh_build(ab, fresh, built, shard_size=100)
    assert m.clipped_impacts == fm.clipped_impacts  # the same scores clip in both

    got, want = Index(idx), Index(fresh)
    assert got.terms == want.terms and np.array_equal(got.df, want.df)
    assert m.collection == fm.collection
    assert np.array_equal(got.idf, want.idf)
    assert np.array_equal(got.idf, Vocabulary(want.terms, np.asarray(want.df), np.zeros(len(want.terms), np.int64),
                                              360).idf())
    assert_same_results(idx, fresh, queries)

    assert m.appends[0]["shards"] == ["shard-00003", "shard-00004"]
    compact_index(idx, shard_size=150)  # [100] [100, 40] [100, 20]: two merged shards, one kept
    cm = Manifest.read(idx)
    assert [s.num_docs for s in cm.shards] == [100, 140, 120]
    # the append's record names the shards holding its documents now (it named two merged away)
    assert cm.appends[0]["shards"] == [cm.shards[2].name] and cm.shards[2].name not in old_files
    assert index_info(idx).compactions == 1 and index_info(idx).appends == 1
    assert_same_results(idx, fresh, queries)
    compact_index(idx, shard_size=1000)
    one = tmp_path / "one"
    fresh_build(ab, one, built, shard_size=1000)
    assert_same_results(idx, one, queries)
    x, y = Index(idx).shards, Index(one).shards
    assert len(x) == len(y) == 1
    for name in ("postings", "seg_start", "seg_impact", "seg_ptr"):
        assert np.array_equal(getattr(x[0], name), getattr(y[0], name)), name
    assert x[0].docs.equals(y[0].docs)
    assert sorted(index_files(idx)) == sorted(["manifest.json", Manifest.read(idx).vocab_file,
                                                            Manifest.read(idx).shards[0].name])


def exhaustive_scores(vocab: Vocabulary, corpus_docs: list[np.ndarray], text_ids, prior: float,
                      bm25_init: tuple[float, float] | None = None) -> np.ndarray:
    """NDRM2's float score of every document for a query (term ids with counts)."""
    model = build_ndrm(NDRMConfig(vocab_size=len(vocab), variant="ndrm2", bm25_init=bm25_init), vocab).eval()
    model.set_index_constants({"length_prior": prior})
    from indexer.fidelity import exhaustive_term_scores

    terms, counts = text_ids
    return exhaustive_term_scores(model, corpus_docs, terms) @ counts.astype(np.float32)


def test_scores_after_append_are_the_models_scores_with_current_idf(tmp_path, parts, index_a, queries):
    from indexer.analyze import analyze_corpus

    a, b, ab = parts
    idx = copy_of(index_a, tmp_path)
    built = Manifest.read(idx)
    api.append(b, idx, progress=False)
    s = Searcher(idx)
    full = analyze_corpus(ab, s.index.analyzer)
    assert full.vocab.terms == s.index.terms
    docs = full.token_lists(0, len(full))
    position = {d: i for i, d in enumerate(full.docs["docid"])}
    step = s.index.quantizer.step
    for text in queries[:25]:
        q = s.parse(text)
        plan = s.plan(q)
        exact = exhaustive_scores(full.vocab, docs, (q.terms, q.weights), built.model_constants["length_prior"])
        f = q.weights * step * s.index.idf[q.terms]
        bound = float(np.sum(0.5 * f + 0.5 * 255 * plan.unit)) + 1e-6  # impact rounding + weight rounding
        for h in s.search(text, 10).hits:
            assert abs(h.score - exact[position[h.docid]]) <= bound


def test_an_anserini_start_index_appends_with_its_own_model(tmp_path, parts, queries):
    """``ndrm2-anserini`` (untrained NDRM2 at BM25's k1 0.9, b 0.4) is recorded in the manifest,
    and an append without ``--model`` scores the new documents with it, not with the paper's start."""
    from indexer.analyze import analyze_corpus

    a, b, ab = parts
    idx = tmp_path / "idx"
    api.index(a, idx, model="ndrm2-anserini", shard_size=100, progress=False)
    built = Manifest.read(idx)
    assert built.model["id"] == "ndrm2-anserini-untrained"
    assert index_model_spec(idx, built) == "ndrm2-anserini"
    api.append(b, idx, progress=False)
    s = Searcher(idx)
    full = analyze_corpus(ab, s.index.analyzer)
    docs = full.token_lists(0, len(full))
    position = {d: i for i, d in enumerate(full.docs["docid"])}
    appended = set(json.loads(line)["_id"] for line in b.read_text().splitlines())
    checked = apart = 0
    for text in queries[:25]:
        q = s.parse(text)
        plan = s.plan(q)
        prior = built.model_constants["length_prior"]
        anserini = exhaustive_scores(full.vocab, docs, (q.terms, q.weights), prior, (0.9, 0.4))
        paper = exhaustive_scores(full.vocab, docs, (q.terms, q.weights), prior)
        bound = float(np.sum(0.5 * q.weights * s.index.quantizer.step * s.index.idf[q.terms] + 0.5 * 255 * plan.unit)) + 1e-6
        for h in s.search(text, 10).hits:
            i = position[h.docid]
            assert abs(h.score - anserini[i]) <= bound
            if h.docid in appended:
                checked += 1
                apart += abs(h.score - paper[i]) > bound
    assert checked > 0 and apart > 0


def test_docid_collision_names_the_file_and_line(tmp_path, parts, index_a):
    a, b, _ = parts
    idx = copy_of(index_a, tmp_path)
    before = Manifest.read(idx).to_json()
    lines = b.read_text().splitlines(keepends=True)
    clash = json.loads(a.read_text().splitlines()[7])["_id"]
    bad = write_lines(tmp_path / "bad.jsonl", lines[:3] + [json.dumps({"_id": clash, "title": "", "text": "x y"}) + "\n"])
    with pytest.raises(InputError) as err:
        api.append(bad, idx, progress=False)
    assert str(err.value) == f"{bad}:4: docid {clash!r} is already in the index {idx}"
    assert Manifest.read(idx).to_json() == before
    assert sorted(index_files(idx)) == ["manifest.json", "shard-00000", "shard-00001", "shard-00002",
                                                     "vocab.arrow"]


def test_docid_collision_names_the_corpus_first_clashing_line(tmp_path, parts, index_a):
    """Of several docids the index holds, the error names the one on the corpus's first line (it named
    the one the index's shards held first, so fixing that line met another error further up)."""
    a, b, _ = parts
    idx = copy_of(index_a, tmp_path)
    held = [json.loads(line)["_id"] for line in a.read_text().splitlines()]
    lines = b.read_text().splitlines(keepends=True)
    late, early = held[2], held[-1]  # early in the new file, late in the index
    bad = write_lines(tmp_path / "bad.jsonl", lines[:2] + [json.dumps({"_id": early, "title": "", "text": "x y"}) + "\n"]
                      + lines[2:5] + [json.dumps({"_id": late, "title": "", "text": "z"}) + "\n"])
    with pytest.raises(InputError) as err:
        api.append(bad, idx, progress=False)
    assert str(err.value) == f"{bad}:3: docid {early!r} is already in the index {idx}"


def test_documents_in_memory_append_the_shards_their_file_appends(tmp_path, parts, index_a):
    """``api.append(list_of_dicts, INDEX)``, as ``api.index`` takes them, was refused ("corpus must be a
    path"): the same shards and vocabulary as appending the JSONL file of those documents."""
    b = parts[1]
    on_file, in_memory = copy_of(index_a, tmp_path / "file"), copy_of(index_a, tmp_path / "memory")
    want = api.append(b, on_file, shard_size=100, progress=False)
    got = api.append([json.loads(line) for line in b.read_text().splitlines()], in_memory, shard_size=100,
                     progress=False)
    assert [s.files for s in got.shards] == [s.files for s in want.shards] and len(got.shards) == 5
    assert got.vocab_checksum == want.vocab_checksum and got.num_docs == 360
    assert got.appends[0]["corpus"]["path"] is None and want.appends[0]["corpus"]["path"] == str(b.absolute())
    with pytest.raises(CkqtiError, match="^fmt is for a corpus file"):
        api.append(["a text"], in_memory, fmt="jsonl", progress=False)
    with pytest.raises(InputError, match=r"^documents\[1\]: duplicate docid 'x' \(first at documents\[0\]\)$"):
        api.append([{"id": "x", "text": "a"}, {"id": "x", "text": "b"}], in_memory, progress=False)
    assert Manifest.read(in_memory).num_docs == 360


def test_appended_texts_are_numbered_after_the_indexs_documents(tmp_path, parts):
    """A text's docid is its position (as ``api.index`` numbers a list of texts): appended texts follow
    the index's documents, so that an index of texts grown by texts numbers them as one list would,
    and never reuses a docid; a docid the index holds already is refused, saying where it came from."""
    texts = [json.loads(line)["text"] for line in parts[0].read_text().splitlines()[:30]]
    idx = tmp_path / "texts"
    api.index(texts[:20], idx, model="ndrm2", progress=False)
    m = api.append(texts[20:], idx, progress=False)
    assert m.num_docs == 30
    whole = tmp_path / "whole"
    api.index(texts, whole, model="ndrm2", progress=False)
    docids = [d for sh in Index(idx).shards for d in sh.docs.column("docid").to_pylist()]
    assert docids == [str(i) for i in range(30)] == [d for sh in Index(whole).shards
                                                      for d in sh.docs.column("docid").to_pylist()]
    other = tmp_path / "ids"
    api.index([{"id": "a", "text": texts[0]}, {"id": "3", "text": texts[1]}], other, model="ndrm2", progress=False)
    with pytest.raises(InputError) as err:
        api.append([{"id": "b", "text": texts[2]}, texts[3]], other, progress=False)
    assert str(err.value) == (f"documents[1]: docid '3' is already in the index {other} (a text's docid is its "
                              "position after the index's 2 documents; give docids with dicts or Documents)")
    assert Manifest.read(other).num_docs == 2


class Interrupt(Exception):
    pass


def test_interrupted_append_leaves_the_old_index_searchable_and_unchanged(tmp_path, parts, index_a, queries,
                                                                         monkeypatch):
    a, b, _ = parts
    idx = copy_of(index_a, tmp_path)
    before = Manifest.read(idx).to_json()
    reference = integer_run(idx, queries[:50])

    def fail(work, index):
        raise Interrupt()

    monkeypatch.setattr(append_mod, "commit_manifest", fail)
    with pytest.raises(Interrupt):
        api.append(b, idx, progress=False)
    assert Manifest.read(idx).to_json() == before
    assert (idx / "shard-00003").is_dir() and (idx / "vocab-00001.arrow").is_file()  # moved in, not named
    assert integer_run(idx, queries[:50]) == reference  # Index() verifies every named file
    assert not (idx / append_mod.LOCK).exists()
    monkeypatch.undo()
    m = api.append(b, idx, progress=False)
    assert m.num_docs == 360 and [s.name for s in m.shards] == [f"shard-0000{i}" for i in range(4)]
    assert not (idx / "vocab.arrow").exists() and (idx / "vocab-00001.arrow").is_file()


def test_a_second_writer_is_refused(tmp_path, parts, index_a):
    a, b, _ = parts
    idx = copy_of(index_a, tmp_path)
    with append_mod.writer_lock(idx):
        with pytest.raises(CkqtiError, match=rf"another append, compaction or build is writing this index \(process {os.getpid()}\)"):
            api.append(b, idx, progress=False)
    # a lock file left behind is only a file: the lock itself ends with its process (flock), so
    # neither a dead process's id nor a live unrelated one (a restarted container's 1) blocks
    (idx / append_mod.LOCK).write_text("1")
    assert api.append(b, idx, progress=False).num_docs == 360
    assert not (idx / append_mod.LOCK).exists()


def test_version_1_index_is_refused_with_the_rebuild_message(tmp_path, parts, index_a):
    a, b, _ = parts
    idx = copy_of(index_a, tmp_path)
    d = json.loads((idx / MANIFEST).read_text())
    d["format_version"] = 1
    del d["channels"]
    (idx / MANIFEST).write_text(json.dumps(d))
    for call in (lambda: Index(idx), lambda: api.append(b, idx, progress=False), lambda: api.compact(idx)):
        with pytest.raises(IndexFormatError, match="version 1 is not supported .*rebuild the index"):
            call()
    d["format_version"] = 99  # a newer ckqti's index: upgrading, not rebuilding, is the fix
    (idx / MANIFEST).write_text(json.dumps(d))
    with pytest.raises(IndexFormatError, match="version 99 is not supported .*written by a newer ckqti: upgrade ckqti"):
        Index(idx)


def test_a_corpus_or_orcas_file_that_is_a_directory_is_named_as_one(tmp_path, parts, index_a):
    """An append said 'corpus file not found' of a directory that is there, as a build does not."""
    idx = copy_of(index_a, tmp_path)
    before = Manifest.read(idx).num_docs
    with pytest.raises(CkqtiError) as err:
        api.append(tmp_path, idx, progress=False)
    assert str(err.value) == f"{tmp_path}: corpus file is a directory, not a file"
    with pytest.raises(CkqtiError) as err:
        api.append(parts[1], idx, orcas=tmp_path, progress=False)
    assert str(err.value) == f"{tmp_path}: ORCAS file is a directory, not a file"
    assert Manifest.read(idx).num_docs == before


def read_only_run(args: list[str], cwd: Path):
    """``ckqti ARGS`` in a process that file permissions bind; prints whether torch was imported."""
    from tests.indexer.test_build import as_user

    return as_user(f"import sys\nfrom ckqti.cli import cli\ntry:\n    cli({args!r}, prog_name='ckqti')\n"
                   "finally:\n    print('torch' in sys.modules)", cwd)


def test_a_read_only_index_is_named_as_one_before_the_model_loads(tmp_path, parts, index_a):
    """Appending to or compacting an index after `chmod -R a-w` said 'INDEX/.writer.lock: Permission
    denied', of a file the user never named (an append only after loading its model)."""
    idx = copy_of(index_a, tmp_path)
    before = Manifest.read(idx).to_json()
    modes = {p: p.stat().st_mode for p in [idx, *idx.rglob("*")]}
    for p, mode in modes.items():
        p.chmod(mode & ~0o222)
    try:
        append = read_only_run(["index", str(parts[1]), "--append", "--index", "idx"], tmp_path)
        compact = read_only_run(["compact", "--index", "idx", "--shard-size", "1000"], tmp_path)
    finally:
        for p, mode in modes.items():
            p.chmod(mode)
    said = ("Error: idx: cannot be written: the index is read-only (its folder or file system); an append or a "
            "compaction writes its new shards inside it\n")
    assert (append.returncode, append.stderr, append.stdout) == (1, said, "False\n")
    assert (compact.returncode, compact.stderr) == (1, said)
    assert Manifest.read(idx).to_json() == before


def test_a_refused_writer_lock_names_the_index(tmp_path, parts, index_a, monkeypatch):
    """The lock file refused as root never sees it (a read-only file system; a folder root may not write):
    append_index and compact_index name the index, not the lock file."""
    import errno

    idx = copy_of(index_a, tmp_path)

    def refused(index, wait=False):
        raise PermissionError(errno.EACCES, "Permission denied", str(index / append_mod.LOCK))

    monkeypatch.setattr(append_mod, "writer_lock", refused)
    factory, info = untrained_ndrm2(torch.device("cpu"))
    for call in (lambda: append_index(idx, parts[1], factory, info, progress=False), lambda: compact_index(idx, 1000)):
        with pytest.raises(CkqtiError) as err:
            call()
        assert str(err.value).startswith(f"{idx}: cannot be written: the index is read-only")


def test_append_refuses_another_model_and_precomputed_indexes(tmp_path, parts, index_a):
    a, b, _ = parts
    idx = copy_of(index_a, tmp_path)
    factory, info = untrained_ndrm2(torch.device("cpu"))
    with pytest.raises(IndexFormatError, match="built with model 'ndrm2-untrained', not 'other'"):
        append_index(idx, b, factory, {**info, "id": "other"}, progress=False)
    m = Manifest.read(idx)
    m.model_constants = {}  # as if the build had not recorded them
    m.write(idx)
    with pytest.raises(IndexFormatError, match="does not record the model constants"):
        append_index(idx, b, factory, info, progress=False)
    from indexer.build import write_prebuilt_index
    from indexer.shards import ImpactPostings

    pre = tmp_path / "pre"
    write_prebuilt_index(pre, [ImpactPostings(np.array([2, 3], np.int32), np.array([0, 1], np.uint32),
                                              np.array([5, 9], np.uint8))], 4, 2)
    with pytest.raises(CkqtiError, match="cannot score new documents"):
        api.append(b, pre, progress=False)


def test_append_refuses_a_model_whose_channels_are_not_the_indexs(tmp_path, parts, index_a):
    """A model given as the index's (its id) whose impact channels differ (a latent NDRM3: one, idf) from those the
    index stores (NDRM2: idf) is refused naming both and the manifest, before any document is scored; the index is
    left as it was."""
    from indexer.impacts import ImpactScorer

    a, b, _ = parts
    idx = copy_of(index_a, tmp_path)
    before = (idx / MANIFEST).read_bytes()
    with pytest.MonkeyPatch.context() as m:
        m.setattr(ImpactScorer, "__init__", lambda *args, **kw: pytest.fail("the append scored"))
        with pytest.raises(IndexFormatError) as e:
            append_index(idx, b, tiny_ndrm3, Manifest.read(idx).model, progress=False)
    assert str(e.value) == f"{idx / MANIFEST}: index stores channels ('idf',), the model ('one', 'idf')"
    assert (idx / MANIFEST).read_bytes() == before and Index(idx).num_docs == 240


def test_new_documents_without_clicks_append_with_the_collections_orcas_file(tmp_path):
    """ORCAS clicks reach some of a collection's documents (about 4 in 10 of MS MARCO's), so a few new
    documents, or one, often have none; ``--append --orcas`` refused them as if the file's docids were
    another scheme (``no document of the corpus ... has a click``), though the file clicks the index's
    documents. Such an append now stores them as an append without the file does; a file that clicks
    neither the new documents nor the index's is still refused, naming it."""
    corpus, more, clicks, other = (tmp_path / n for n in ("c.tsv", "more.tsv", "orcas.tsv", "other.tsv"))
    corpus.write_text("D1\tcells divide\nD2\tmembranes hold\n")
    more.write_text("D3\tgenes express\n")
    clicks.write_text("D1\tcell division\nX9\tnot here\n")
    other.write_text("d4\tlower-case ids\nX9\tnot here\n")
    idx, plain = tmp_path / "idx", tmp_path / "plain"
    api.index(corpus, idx, model="ndrm2", orcas=clicks, progress=False)
    shutil.copytree(idx, plain)
    m = api.append(more, idx, orcas=clicks, progress=False)
    assert m.appends[-1]["corpus"]["orcas_documents"] == 0 and m.num_docs == 3
    api.append(more, plain, progress=False)
    got, want = Index(idx).shards[-1], Index(plain).shards[-1]
    for name in ("postings", "seg_start", "seg_impact", "seg_ptr"):
        assert np.array_equal(getattr(got, name), getattr(want, name)), name
    assert got.docs.equals(want.docs)
    more.write_text("D4\tenzymes bind\n")
    with pytest.raises(InputError, match="no document of the corpus .* nor of the index .* has a click") as err:
        api.append(more, idx, orcas=other, progress=False)
    assert str(err.value).startswith(f"{other}: ") and Manifest.read(idx).num_docs == 3


def test_clipped_impacts_are_counted(tmp_path, parts, index_a):
    """With steps half the fitted ones, every impact above 127.5 steps clips; appends count theirs."""
    a, b, _ = parts
    half = tuple(c["step"] / 2 for c in Manifest.read(index_a).channels)
    idx = tmp_path / "idx"
    factory, info = untrained_ndrm2(torch.device("cpu"))
    built = build_index(a, idx, factory, info, BuildConfig(channel_steps=half), progress=False)
    assert built.clipped_impacts > 0
    m = append_index(idx, b, factory, info, progress=False)
    assert m.appends[0]["clipped_impacts"] > 0
    assert m.clipped_impacts == built.clipped_impacts + m.appends[0]["clipped_impacts"]
    top = Index(idx).shards[-1].seg_impact
    assert top[:-1].max() == 255


def test_the_cli_append_says_how_many_impacts_it_clipped(tmp_path, parts, index_a, monkeypatch):
    """Clipping is said where it happens, not only by `ckqti info` later (in the number it takes: it
    said "1 impacts ... were")."""
    a, b, _ = parts
    half = tuple(c["step"] / 2 for c in Manifest.read(index_a).channels)
    idx = tmp_path / "idx"
    factory, info = untrained_ndrm2(torch.device("cpu"))
    built = build_index(a, idx, factory, info, BuildConfig(channel_steps=half), progress=False).clipped_impacts
    res = CliRunner().invoke(cli, ["index", str(b), "--append", "--index", str(idx)])
    assert res.exit_code == 0, res.output
    clipped = Manifest.read(idx).appends[-1]["clipped_impacts"]
    assert clipped > 1 and f"note: {clipped:,} impacts of the new documents exceeded the build's largest" in res.stderr
    one = Manifest.read(idx)
    one.appends[-1]["clipped_impacts"] = 1
    monkeypatch.setattr(api, "append", lambda *args, **kwargs: one)
    res = CliRunner().invoke(cli, ["index", str(b), "--append", "--index", str(idx)])
    assert "note: 1 impact of the new documents exceeded the build's largest: stored as 255" in res.stderr
    # info tells the build's clipping (forced steps) from the appends' (it called all of them appended)
    res = CliRunner().invoke(cli, ["info", "--index", str(idx)])
    assert [line for line in res.stdout.splitlines() if line.startswith("clipped")] == [
        f"clipped     {built + clipped:,} impacts stored as 255: {built:,} at build (forced quantization steps); "
        f"{clipped:,} appended, above the build's largest"]


def test_shard_groups_are_consecutive_and_bounded():
    assert shard_groups([150, 150, 100, 150, 50], 300) == [[0, 1], [2, 3, 4]]
    assert shard_groups([100, 100, 40, 100, 20], 150) == [[0], [1, 2], [3, 4]]
    assert shard_groups([500, 10, 10], 100) == [[0], [1, 2]]
    assert shard_groups([10, 10, 10], 1000) == [[0, 1, 2]]
    assert shard_groups([], 10) == []


def test_compaction_renames_an_appends_shards_and_keeps_a_record_without_them():
    """An append's record names the shards now holding its documents, each once in order, names not merged kept; a
    record that names no shard list (hand-written, another program's) is kept as it is, not replaced by None (a
    manifest that the next open refuses: appends is not a list of records)."""
    from indexer.compact import renamed_shards

    holder = {"shard-00001": "shard-00005", "shard-00002": "shard-00005"}
    record = {"num_docs": 7, "shards": ["shard-00001", "shard-00002", "shard-00003"]}
    assert renamed_shards(record, holder) == {"num_docs": 7, "shards": ["shard-00005", "shard-00003"]}
    assert record["shards"] == ["shard-00001", "shard-00002", "shard-00003"]  # the old record is not changed
    for kept in ({"num_docs": 7}, {"num_docs": 7, "shards": "shard-00001"}):
        assert renamed_shards(kept, holder) == kept


def test_compact_with_nothing_to_merge_changes_nothing(tmp_path, index_a, monkeypatch):
    """...and opens no shard: at 1M documents opening (and verifying) them cost 3 s and 830 MiB for nothing."""
    import retriever.index

    idx = copy_of(index_a, tmp_path)
    m = Manifest.read(idx)
    monkeypatch.setattr(retriever.index, "Index", None)  # an open would be a TypeError
    assert api.compact(idx, shard_size=120).to_json() == m.to_json()


def test_cli_append_and_compact_equal_the_api(tmp_path, parts, index_a, queries):
    a, b, _ = parts
    cli_idx, api_idx = (Path(shutil.copytree(index_a, tmp_path / n)) for n in ("cli", "api"))
    run = CliRunner().invoke
    res = run(cli, ["index", str(b), "--append", "--index", str(cli_idx), "--shard-size", "100"])
    assert res.exit_code == 0, res.output
    assert res.stdout.strip() == f"appended 120 documents: 360 documents, {Manifest.read(cli_idx).num_postings:,} postings, " \
                                 f"5 shard(s) in {cli_idx}"
    assert "clipped" not in res.stderr and "stored as 255" not in res.stderr  # nothing clipped: no note
    api.append(b, api_idx, shard_size=100, progress=False)
    res = run(cli, ["compact", "--index", str(cli_idx), "--shard-size", "250"])
    assert res.exit_code == 0 and res.stdout.strip() == f"2 shard(s), 360 documents in {cli_idx}"
    res = run(cli, ["info", "--index", str(cli_idx)])
    assert res.exit_code == 0 and "; 1 append(s), 1 compaction(s) since" in res.stdout, res.output
    api.compact(api_idx, shard_size=250)
    assert_same_results(cli_idx, api_idx, queries[:40])
    # (without --index or --out, both read the default index: tests/ckqti/test_cli.py)
    res = run(cli, ["index", str(b), "--append", "--index", str(cli_idx), "--out", str(tmp_path / "x")])
    assert res.exit_code == 2 and "Traceback" not in res.output and "(not --out)" in res.output, res.output
    assert not (tmp_path / "x").exists()


# --- a latent, two-channel model (tiny random NDRM3) --------------------------------------


def tiny_ndrm3(vocab: Vocabulary):
    torch.manual_seed(0)
    config = NDRMConfig(vocab_size=len(vocab), variant="ndrm3", dim=16, num_heads=4, conv_window=5, ff_dim=16,
                        mlp_hidden=16, pool_window=20, pool_stride=10)
    m = build_ndrm(config, vocab)
    with torch.no_grad():
        m.combine.norm.running_mean.copy_(torch.tensor([0.2, 1.0]))
        m.combine.norm.running_var.copy_(torch.tensor([0.5, 0.8]))
        m.combine.linear.weight.copy_(torch.tensor([[1.0, 0.7]]))
    m.set_index_constants({"length_prior": 30.0})
    return m.eval()


@pytest.fixture(scope="module")
def short_parts(tmp_path_factory, parts):
    """60 + 30 SciFact documents cut to 30 words (a latent model scores every term)."""
    d = tmp_path_factory.mktemp("short")
    rows = [json.loads(x) for x in parts[2].read_text().splitlines()[:90]]
    lines = [json.dumps({**r, "text": " ".join(r["text"].split()[:30])}) + "\n" for r in rows]
    return write_lines(d / "a.jsonl", lines[:60]), write_lines(d / "b.jsonl", lines[60:])


def brute_force_topk(idx: Index, lists, weights, k):
    rows = []
    for si, sh in enumerate(idx.shards):
        known = lists < sh.num_lists  # lists created after the shard was written are empty in it
        s = brute_force_scores(sh.postings, sh.seg_start, sh.seg_impact, sh.seg_ptr, lists[known], weights[known],
                               sh.num_docs)
        rows += [(int(v), si, d) for d, v in enumerate(s) if v > 0]
    rows.sort(key=lambda x: (-x[0], x[1], x[2]))
    return rows[:k]


def test_latent_two_channel_index_appends_and_searches_exactly(tmp_path, short_parts):
    a, b = short_parts
    info = {"id": "tiny-ndrm3", "name": "tiny-ndrm3"}
    config = BuildConfig(shard_size=25)
    idx = tmp_path / "idx"
    built = build_index(a, idx, tiny_ndrm3, info, config, progress=False)
    assert [c["weight"] for c in built.channels] == ["one", "idf"]
    old = Index(idx)
    old_offsets, old_terms = np.array(old.offsets), list(old.terms)
    assert np.any(old_offsets[2:] != 0)
    m = append_index(idx, b, tiny_ndrm3, info, shard_size=25, progress=False)
    new = Index(idx)
    assert new.terms[: len(old_terms)] == old_terms and len(new.terms) > len(old_terms)
    assert np.array_equal(new.offsets[: len(old_terms)], old_offsets)  # old terms keep their offsets
    assert np.any(new.offsets[len(old_terms):] != 0)  # new terms got fitted ones
    assert [sh.num_lists for sh in new.shards] == [2 * built.vocab_size] * 3 + [2 * m.vocab_size] * 2
    s = Searcher(new)
    rng = np.random.default_rng(0)
    for i in range(40):
        pool = np.arange(len(old_terms), len(new.terms)) if i % 2 else np.arange(2, len(new.terms))
        terms = np.unique(rng.choice(pool, size=rng.integers(1, 5)))
        from retriever.query import ParsedQuery

        plan = s.plan(ParsedQuery(terms, rng.integers(1, 3, terms.size), [], []))
        got, _ = s.search_ids(plan.lists, plan.weights, 10)
        assert got == brute_force_topk(new, plan.lists, plan.weights, 10)
        if i % 2:  # new terms only: just the appended shards can hold them
            assert all(sh >= 3 for _, sh, _ in got)
    shutil.rmtree(idx)


def test_a_shard_without_postings_stays_searchable(tmp_path, index_a):
    """Documents whose text has no index terms (only stopwords) make a shard of no postings: an
    append of one, a build of one, and a build where one shard of several is empty all still
    search, run and compact (pyarrow reads an empty column as no chunk at all)."""
    idx = copy_of(index_a, tmp_path)
    before = Searcher(Index(idx)).search("cell membrane protein", 10).hits
    stop = write_lines(tmp_path / "stop.tsv", ["s1\tthe and of\n"])
    api.append(stop, idx, progress=False)
    after = Searcher(Index(idx)).search("cell membrane protein", 10).hits
    assert [h.docid for h in after] == [h.docid for h in before]
    compact_index(idx, shard_size=1000)
    assert Manifest.read(idx).num_docs == 241
    assert [h.docid for h in Searcher(Index(idx)).search("cell membrane protein", 10).hits] == [h.docid for h in before]

    api.index(stop, tmp_path / "only", model="ndrm2", progress=False)
    assert Searcher(Index(tmp_path / "only")).search("membrane", 10).hits == []
    mixed = write_lines(tmp_path / "mixed.tsv", ["d1\tthe cat sat\n", "d2\tthe and of\n", "d3\tdogs run\n"])
    api.index(mixed, tmp_path / "mixed", model="ndrm2", shard_size=1, progress=False)
    hits = Searcher(Index(tmp_path / "mixed")).search("cat dogs", 10).hits
    assert sorted(h.docid for h in hits) == ["d1", "d3"]


@pytest.mark.parametrize("name", ["postings.arrow", "terms.arrow", "docs.arrow"])
def test_append_refuses_a_damaged_index(tmp_path, parts, index_a, name):
    """Append verifies every file as compact does: growing a damaged index used to succeed (a
    missing postings file) or fail with a message naming no file (a damaged footer)."""
    a, b, _ = parts
    idx = copy_of(index_a, tmp_path)
    target = idx / "shard-00000" / name
    data = bytearray(target.read_bytes())
    data[len(data) - 12] ^= 1
    target.write_bytes(bytes(data))
    before = (idx / MANIFEST).read_text()
    with pytest.raises(IndexFormatError, match=rf"shard-00000/{name}: index file corrupted"):
        api.append(b, idx, progress=False)
    target.unlink()
    with pytest.raises(IndexFormatError, match=rf"shard-00000/{name}: index file missing"):
        api.append(b, idx, progress=False)
    assert (idx / MANIFEST).read_text() == before


@pytest.mark.skipif(not DEFAULT_CHECKPOINT.is_file(), reason="no bundled NDRM3 checkpoint")
def test_an_index_of_the_bundled_model_outlives_the_install_that_built_it(tmp_path):
    """The manifest records the checkpoint's absolute path: once that install was gone (a venv
    moved, the package reinstalled, the index copied elsewhere) append and explain failed with
    'model not found' though this install bundles the very same model."""
    old_install = tmp_path / "old-site" / "ndrm3-scifact.pt"
    old_install.parent.mkdir()
    shutil.copy(DEFAULT_CHECKPOINT, old_install)
    corpus, more = tmp_path / "c.tsv", tmp_path / "more.tsv"
    corpus.write_text("D1\tcells divide quickly\nD2\tmembranes hold proteins\nD3\tproteins fold slowly\n")
    more.write_text("D4\tgenes express proteins\n")
    idx = tmp_path / "idx"
    api.index(corpus, idx, model=str(old_install), progress=False)
    shutil.rmtree(old_install.parent)
    assert index_model_spec(idx, Manifest.read(idx)) == str(DEFAULT_CHECKPOINT)
    assert api.append(more, idx, progress=False).num_docs == 4
    assert api.explain("proteins", "D4", None, index_path=idx).docid == "D4"
    other = tmp_path / "other"
    api.index(corpus, other, model="ndrm2", progress=False)
    manifest = Manifest.read(other)
    manifest.model.update(path=str(tmp_path / "gone.pt"), id="ndrm3-000000000000", content_hash="0" * 64)
    with pytest.raises(CkqtiError, match=r"gone.pt is not there: give that checkpoint \(model id ndrm3-000000000000\)"):
        index_model_spec(other, manifest)


def test_an_index_nested_in_another_is_refused_and_never_taken_for_a_stray_shard(tmp_path, parts, index_a):
    """`ckqti index c --out INDEX/shard-00005` built an index there, which the next append to INDEX
    deleted as a leftover shard. A build inside an index is refused; a folder holding a manifest
    (an index copied in) is not a stray of an append."""
    idx = copy_of(index_a, tmp_path)
    with pytest.raises(CkqtiError, match=r"shard-00005: is inside the index .*idx.*choose an output outside it"):
        api.index(parts[1], idx / "shard-00005", model="ndrm2", progress=False)
    assert not (idx / "shard-00005").exists() and not (idx / "shard-00005.partial").exists()
    shutil.copytree(index_a, idx / "shard-00009")
    api.append(parts[1], idx, shard_size=100, progress=False)
    assert Manifest.read(idx / "shard-00009").num_docs == 240
    assert "shard-00009" not in {s.name for s in Manifest.read(idx).shards}


def test_appended_shards_take_the_builds_candidate_settings(tmp_path, short_parts):
    """A latent index built with --neighbours 0 stores each document's own terms only: so must its appended shards."""
    a, b = short_parts
    info = {"id": "tiny-ndrm3", "name": "tiny-ndrm3"}
    idx = tmp_path / "idx"
    build_index(a, idx, tiny_ndrm3, info, BuildConfig(shard_size=25, impacts=ImpactConfig(neighbours=0)), progress=False)
    before = len(Index(idx).shards)
    append_index(idx, b, tiny_ndrm3, info, shard_size=25, progress=False)
    new = Index(idx)
    analyzer = new.analyzer
    own = sum(len(set(analyzer(doc.full_text()))) for doc in read_corpus(b))
    appended = sum(int(sh.postings.size) for sh in new.shards[before:])
    assert 0 < appended <= 2 * own  # two channels, own terms only (64 neighbours each would add up to 1,920)
    shutil.rmtree(idx)


def test_an_append_holds_neither_text_nor_term_ids_of_its_corpus_while_it_scores(tmp_path, monkeypatch):
    """An append analyzes into its work folder as a build does and reads the analysis back
    memory-mapped: while the new shards are scored, memory holds no copy of the new documents' text
    or term ids (it held both, so an append's memory grew with what it appended: SciFact repeated
    to 100k abstracts)."""
    from indexer import analyze
    from tests.memory import held_when_called, long_random_lines

    lines = long_random_lines()
    corpus = write_lines(tmp_path / "corpus.jsonl", lines)
    text_bytes = corpus.stat().st_size
    base = tmp_path / "base"
    api.index(write_lines(tmp_path / "base.jsonl", ['{"_id": "b0", "text": "w1x w2x v9"}\n']), base, model="ndrm2",
              progress=False)
    monkeypatch.setattr(analyze, "BATCH_DOCS", 100, raising=False)  # several batches
    warm = copy_of(base, tmp_path / "warm")  # imports and first-call caches, before counting
    api.append(write_lines(tmp_path / "warm.jsonl", lines[:1]), warm, progress=False)
    idx = copy_of(base, tmp_path / "measured")
    held, m = held_when_called(monkeypatch, append_mod, "score_new_shards",
                               lambda: api.append(corpus, idx, progress=False))
    assert held["python"] < text_bytes / 4 and held["arrow"] < text_bytes / 4, held
    assert m.num_docs == 601 and Index(idx).shards[1].docid(599) == "d599"
    assert index_files(idx) and not [p for p in idx.iterdir() if p.name.startswith(".append-")]  # work folder gone


def test_renumbered_term_ids_are_the_grown_vocabularys_across_blocks(tmp_path, monkeypatch):
    """The analyzed term ids are rewritten in place, a block at a time, to the merged vocabulary's ids:
    the same array as renumbering them in memory, the last block a short one."""
    rng = np.random.default_rng(1)
    tokens = rng.integers(0, 50, 1003).astype(np.int32)
    np.save(tmp_path / "tokens.npy", tokens)
    remap = rng.permutation(np.arange(1000, 1050)).astype(np.int64)
    monkeypatch.setattr(append_mod, "RENUMBER_BLOCK", 100)
    got = append_mod.renumber_tokens(tmp_path / "tokens.npy", remap)
    assert got.dtype == np.int32 and np.array_equal(got, remap[tokens])
    assert np.array_equal(np.load(tmp_path / "tokens.npy"), remap[tokens])
