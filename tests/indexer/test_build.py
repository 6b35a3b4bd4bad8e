"""Index builds: manifest, shards, atomic install, resume after interruption."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from ckqti import api
from ckqti.errors import CkqtiError
from indexer import build as build_mod
from indexer.format import FORMAT_VERSION, Manifest
from retriever.index import Index
from retriever.search import Searcher


def test_manifest_records_what_the_index_is(scifact_index):
    m = Manifest.read(scifact_index)
    assert m.format_version == FORMAT_VERSION
    assert m.num_docs == 600 and len(m.shards) == 3
    assert [s.num_docs for s in m.shards] == [250, 250, 100]
    assert m.model["id"] == "ndrm2-untrained"
    assert m.analyzer == {"stemmer": "krovetz", "stopwords": "english", "lowercase": True}
    assert m.quantization["bits"] == 8
    assert len(m.channels) == 1 and m.channels[0]["weight"] == "idf" and m.channels[0]["step"] > 0
    assert m.collection == {"num_docs": 600, "total_terms": m.build["total_terms"]}
    assert m.model_constants["length_prior"] == pytest.approx(m.build["total_terms"] / 600)
    assert m.num_postings == sum(s.num_postings for s in m.shards) > 600
    assert all(len(s.files) == 4 and all(len(h) == 64 for h in s.files.values()) for s in m.shards)
    assert not scifact_index.with_name(scifact_index.name + ".partial").exists()


def test_each_postings_file_records_its_largest_document(tmp_path, scifact_index):
    """The writer of a shard (a build, a compaction) records its postings' largest document in the
    postings file's schema metadata, which a verified open reads instead of scanning the postings."""
    import pyarrow as pa

    from indexer.format import MAX_DOC_KEY, POSTINGS_FILE

    compacted = tmp_path / "compacted"
    shutil.copytree(scifact_index, compacted)
    api.compact(compacted, 10_000)
    for idx, shards in ((scifact_index, 3), (compacted, 1)):
        names = [s.name for s in Manifest.read(idx).shards]
        assert len(names) == shards
        for name in names:
            table = pa.ipc.open_file(str(idx / name / POSTINGS_FILE)).read_all()
            docs = table.column("doc").to_numpy()
            assert table.schema.metadata[MAX_DOC_KEY.encode()] == str(docs.max()).encode()


def test_shards_are_memory_mapped_without_copies(scifact_index):
    idx = Index(scifact_index)
    for sh in idx.shards:
        for arr in (sh.postings, sh.seg_start, sh.seg_impact, sh.seg_ptr):
            assert not arr.flags.owndata and not arr.flags.writeable  # views over the mapped file
        # impact order: within each term, segment impacts strictly decrease
        for t in np.flatnonzero(np.diff(sh.seg_ptr) > 1)[:200]:
            imp = sh.seg_impact[sh.seg_ptr[t] : sh.seg_ptr[t + 1]].astype(int)
            assert (np.diff(imp) < 0).all()


def test_sharded_index_equals_single_shard(tmp_path, scifact_small, scifact_index):
    one = tmp_path / "one"
    api.index(scifact_small, one, model="ndrm2", shard_size=10_000, progress=False)
    a, b = Searcher(Index(one)), Searcher(Index(scifact_index))
    for q in ["white matter diffusion", "cancer cells tumour growth", "vitamin d deficiency", "protein"]:
        ra, rb = a.search(q, 20), b.search(q, 20)
        assert [h.docid for h in ra.hits] == [h.docid for h in rb.hits]
        assert [h.score for h in ra.hits] == pytest.approx([h.score for h in rb.hits])


def test_document_text_is_addressable(scifact_index, scifact_small):
    first = json.loads(scifact_small.read_text().splitlines()[0])
    sh = Index(scifact_index).shards[0]
    assert sh.document(0) == {"docid": first["_id"], "title": first["title"], "text": first["text"], "prefix": ""}


class Interrupt(Exception):
    pass


def interrupt_second_save(monkeypatch) -> dict:
    """Make a build stop (:class:`Interrupt`) at its second saved shard of float impacts; returns the
    count of saves (``calls["n"]``), which a test may reset to let later saves through."""
    real = build_mod.save_npz_atomic
    calls = {"n": 0}

    def flaky(path, **arrays):
        calls["n"] += 1
        if calls["n"] == 2:
            raise Interrupt()
        real(path, **arrays)

    monkeypatch.setattr(build_mod, "save_npz_atomic", flaky)
    return calls


def test_interrupted_build_keeps_old_index_and_resumes(tmp_path, scifact_small, monkeypatch):
    out = tmp_path / "idx"
    api.index(scifact_small, out, model="ndrm2", shard_size=10_000, progress=False)
    before = Manifest.read(out).to_json()
    calls = interrupt_second_save(monkeypatch)
    with pytest.raises(Interrupt):
        api.index(scifact_small, out, model="ndrm2", shard_size=200, force=True, progress=False)
    assert Manifest.read(out).to_json() == before  # the previous index is intact
    partial = out.with_name("idx.partial")
    assert (partial / "raw" / "shard-00000.npz").is_file()  # the completed shard survives
    assert not (partial / "raw" / "shard-00001.npz").exists()
    # resume: only the missing shards are scored
    calls["n"] = -100
    api.index(scifact_small, out, model="ndrm2", shard_size=200, force=True, progress=False)
    assert calls["n"] == -98 and not partial.exists()
    fresh = tmp_path / "fresh"
    api.index(scifact_small, fresh, model="ndrm2", shard_size=200, progress=False)
    resumed, clean = Manifest.read(out), Manifest.read(fresh)
    assert [s.files for s in resumed.shards] == [s.files for s in clean.shards]


@pytest.mark.parametrize("damaged", ["raw/shard-00000.npz", "analyzed/tokens.npy", "analyzed/vocab.json",
                                     "analyzed/docs.arrow"])
def test_a_damaged_interrupted_build_is_redone_not_a_traceback(tmp_path, scifact_small, monkeypatch, damaged):
    """A work folder damaged after the interruption (truncated files): the rerun redoes what it
    cannot read and builds the same index as a clean build."""
    out = tmp_path / "idx"
    calls = interrupt_second_save(monkeypatch)
    with pytest.raises(Interrupt):
        api.index(scifact_small, out, model="ndrm2", shard_size=200, progress=False)
    path = tmp_path / "idx.partial" / damaged
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    calls["n"] = -100
    api.index(scifact_small, out, model="ndrm2", shard_size=200, progress=False)
    clean = tmp_path / "clean"
    api.index(scifact_small, clean, model="ndrm2", shard_size=200, progress=False)
    assert [s.files for s in Manifest.read(out).shards] == [s.files for s in Manifest.read(clean).shards]



def test_the_resume_fingerprint_reads_the_corpus_content(tmp_path):
    """A corpus edited to the same size with its old modification time (an edit within the
    clock's resolution, ``cp -p``) kept the fingerprint of its size and time: the rerun resumed
    with the old text's analyzed corpus and impacts. Its content now decides; a touch alone does not."""
    import os

    corpus, orcas = tmp_path / "corpus.jsonl", tmp_path / "orcas.tsv"
    corpus.write_text('{"_id": "d1", "text": "cell growth"}\n')
    orcas.write_text("d1\tcell\n")
    config = build_mod.BuildConfig()

    def fp() -> str:
        return build_mod.fingerprint(corpus, None, orcas, {"id": "ndrm2"}, config)

    for path, edit in ((corpus, '{"_id": "d1", "text": "cell death!"}\n'), (orcas, "d1\tcall\n")):
        before, stamp = path.stat(), fp()
        path.write_text(edit)
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
        assert path.stat().st_size == before.st_size and path.stat().st_mtime_ns == before.st_mtime_ns
        assert fp() != stamp
        edited = fp()
        os.utime(path)
        assert fp() == edited

def test_a_build_of_other_settings_starts_over_instead_of_resuming(tmp_path, scifact_small, monkeypatch):
    """Saved impacts are reused only by a build of the same settings: a rerun with another shard size
    (the saved first shard holds other documents), model, impact settings, steps, format or analyzer
    starts over, and a build interrupted at shards of 200 then run at 300 equals a clean one."""
    from dataclasses import replace

    from ckqti.text import Analyzer
    from indexer.impacts import ImpactConfig

    out = tmp_path / "idx"
    calls = interrupt_second_save(monkeypatch)
    with pytest.raises(Interrupt):
        api.index(scifact_small, out, model="ndrm2", shard_size=200, progress=False)
    calls["n"] = -100
    api.index(scifact_small, out, model="ndrm2", shard_size=300, progress=False)
    clean = tmp_path / "clean"
    api.index(scifact_small, clean, model="ndrm2", shard_size=300, progress=False)
    assert [s.files for s in Manifest.read(out).shards] == [s.files for s in Manifest.read(clean).shards]
    config = build_mod.BuildConfig()

    def fp(fmt=None, model="m", **settings) -> str:
        return build_mod.fingerprint(scifact_small, fmt, None, {"id": model}, replace(config, **settings))

    others = [fp(model="other"), fp(fmt="jsonl"), fp(shard_size=7), fp(impacts=ImpactConfig(neighbours=8)),
              fp(channel_steps=(0.5,)), fp(analyzer=Analyzer(stemmer="none"))]
    assert fp() == fp() and len({fp(), *others}) == 1 + len(others)


def test_quantized_impacts_use_their_own_channels_step(tmp_path):
    """Each impact is quantized with the step of its channel (list id modulo the channel count)."""
    from indexer.quantize import Quantizer

    raw = tmp_path / "shard-00000.npz"
    build_mod.save_npz_atomic(raw, lists=np.array([0, 1, 2, 3], np.int32), docs=np.zeros(4, np.uint32),
                              scores=np.array([1.0, 10.0, 0.2, 2.0], np.float32), weights=np.array(["one", "idf"]),
                              maxima=np.array([1.0, 10.0]))
    postings, clipped = build_mod.quantize_raw(raw, Quantizer((1 / 255, 10 / 255), weights=("one", "idf")))
    assert postings.impacts.tolist() == [255, 255, 51, 51] and postings.channels == 2 and clipped == 0



def test_clipped_impacts_are_counted_over_every_shard_only_with_forced_steps(tmp_path):
    """Fitted steps map each channel's largest score to 255, so nothing clips and the raw shards are not
    read again; forced steps count every impact above 255 steps, over all the shards."""
    from indexer.quantize import Quantizer

    raw = tmp_path / "raw"
    for i, scores in enumerate(([1.0, 300.0, 256.0], [255.4, 999.0])):
        build_mod.save_npz_atomic(raw / f"shard-{i:05d}.npz", lists=np.zeros(len(scores), np.int32),
                                  docs=np.arange(len(scores), dtype=np.uint32), scores=np.array(scores, np.float32),
                                  weights=np.array(["one"]), maxima=np.array([max(scores)]))
    forced = build_mod.BuildConfig(shard_size=3, channel_steps=(1.0,))
    assert build_mod.count_clipped(range(5), Quantizer(1.0), forced, raw) == 3
    assert build_mod.count_clipped(range(5), Quantizer(1.0), replace(forced, channel_steps=None), raw) == 0

class _StubScorer:
    """A scorer of 100 random posting lists of two channels a document (no model)."""

    channels = ("one", "idf")

    def score_all(self, documents, progress=None):
        from indexer.impacts import DocImpacts

        rng = np.random.default_rng(1)
        for _ in documents:
            yield DocImpacts(np.sort(rng.choice(40_000, 100, replace=False)).astype(np.int32),
                             rng.random(100, dtype=np.float32) + np.float32(0.01))


class _StubCorpus:
    def token_lists(self, start, stop):
        return range(stop - start)


def _peak_bytes(fn):
    """``fn()`` and the most memory numpy (and Python) held above the start while it ran."""
    import tracemalloc

    tracemalloc.start()
    try:
        out = fn()
        return out, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_scoring_a_shard_holds_its_postings_about_once(tmp_path):
    """A shard's impacts are joined, and its document numbers made, with each document's arrays let
    go as they are joined: 16 bytes a posting here (12 bytes of arrays), not 40 (every document's
    arrays, their join, a document number array of each, the channels' maxima in float64)."""
    raw = tmp_path / "shard-00000.npz"
    maxima, peak = _peak_bytes(lambda: build_mod.score_shard(_StubCorpus(), _StubScorer(), 0, 2_000, raw))
    with np.load(raw) as z:
        lists, docs, scores = z["lists"], z["docs"], z["scores"]
        assert lists.size == docs.size == scores.size == 200_000 and lists.dtype == np.int32 and scores.dtype == np.float32
        assert docs.dtype == np.uint32 and (docs == np.repeat(np.arange(2_000), 100)).all()
        assert maxima.tolist() == z["maxima"].tolist() == [float(scores[lists % 2 == c].max()) for c in range(2)]
    assert peak / lists.size < 25, peak / lists.size


def test_quantizing_a_shard_holds_little_beyond_its_postings(tmp_path, monkeypatch):
    """A shard's scores are quantized a block at a time: the float64 arithmetic's temporaries are a
    block's, not the shard's (~40 bytes a posting before, on top of the 13 bytes of the postings
    read and their impacts); the impacts are those of quantizing all at once."""
    from indexer.quantize import Quantizer

    raw = tmp_path / "shard-00000.npz"
    build_mod.score_shard(_StubCorpus(), _StubScorer(), 0, 2_000, raw)
    quantizer = Quantizer((0.5 / 255, 1 / 255), weights=("one", "idf"))  # the "one" channel clips
    monkeypatch.setattr(build_mod, "QUANTIZE_BLOCK", 4096, raising=False)
    (postings, clipped), peak = _peak_bytes(lambda: build_mod.quantize_raw(raw, quantizer))
    with np.load(raw) as z:
        channel = z["lists"] % 2
        assert postings.impacts.tolist() == quantizer.quantize(z["scores"], channel).tolist()
        assert clipped == quantizer.clipped(z["scores"], channel) > 0
    assert peak / postings.impacts.size < 20, peak / postings.impacts.size


def test_workdir_notes_what_it_does_with_an_interrupted_build(tmp_path, capsys):
    work = tmp_path / "idx.partial"
    build_mod.prepare_workdir(work, "fp-a", resume=True, progress=True)
    assert capsys.readouterr().err == ""  # nothing interrupted: nothing to say
    (work / "raw").mkdir()
    build_mod.prepare_workdir(work, "fp-a", resume=True, progress=True)
    assert capsys.readouterr().err == f"note: resuming the interrupted build in {work}\n" and (work / "raw").is_dir()
    build_mod.prepare_workdir(work, "fp-b", resume=True, progress=True)
    err = capsys.readouterr().err
    assert "discarding the interrupted build" in err and "other inputs" in err and not (work / "raw").exists()
    (work / "raw").mkdir()
    build_mod.prepare_workdir(work, "fp-b", resume=False, progress=True)
    assert "(asked not to resume)" in capsys.readouterr().err and not (work / "raw").exists()
    (work / "raw").mkdir()
    build_mod.prepare_workdir(work, "fp-c", resume=True)  # the API's default: quiet
    assert capsys.readouterr().err == "" and (work / "FINGERPRINT").read_text() == "fp-c"


def test_existing_output_needs_force(tmp_path, scifact_small):
    out = tmp_path / "idx"
    out.mkdir()
    with pytest.raises(CkqtiError, match="--force"):
        api.index(scifact_small, out, model="ndrm2", progress=False)


def test_force_replaces_only_an_index(tmp_path, scifact_small, monkeypatch):
    """--force removes the whole output directory, so it refuses one that is not an index, one
    holding an input, and the working directory or one above it; an empty directory is fine."""
    other = tmp_path / "notes"
    other.mkdir()
    (other / "keep.txt").write_text("mine")
    with pytest.raises(CkqtiError, match="not a ckqti index"):
        api.index(scifact_small, other, model="ndrm2", force=True, progress=False)
    assert (other / "keep.txt").read_text() == "mine" and not (tmp_path / "notes.partial").exists()
    idx = tmp_path / "idx"
    api.index(scifact_small, idx, model="ndrm2", progress=False)
    inside = idx / "corpus.jsonl"
    inside.write_bytes(scifact_small.read_bytes())
    with pytest.raises(CkqtiError, match="holds an input file"):
        api.index(inside, idx, model="ndrm2", force=True, progress=False)
    assert inside.is_file()
    monkeypatch.chdir(idx)
    for out in (".", ".."):
        with pytest.raises(CkqtiError, match="working directory"):
            api.index(scifact_small, out, model="ndrm2", force=True, progress=False)
    monkeypatch.chdir(tmp_path)
    empty = tmp_path / "empty"
    empty.mkdir()
    assert api.index(scifact_small, empty, model="ndrm2", force=True, progress=False).num_docs > 0


def test_a_missing_orcas_file_is_named_before_any_work(tmp_path, scifact_small):
    with pytest.raises(CkqtiError, match="nosuch.tsv: ORCAS file not found"):
        api.index(scifact_small, tmp_path / "idx", model="ndrm2", orcas=tmp_path / "nosuch.tsv", progress=False)
    assert list(tmp_path.iterdir()) == []


def test_a_checkpoint_indexes_with_its_own_analyzer(tmp_path, scifact_small):
    """The index reads text as the model was trained to (the manifest records it), not with the
    default analyzer whatever the checkpoint says."""
    from ckqti.models.checkpoint import save_checkpoint
    from ckqti.models.ndrm import NDRMConfig, build_ndrm
    from ckqti.text import Analyzer
    from ckqti.vocab import Vocabulary

    plain = Analyzer(stemmer="none")
    docs = [json.loads(line) for line in scifact_small.read_text().splitlines()[:50]]
    vocab = Vocabulary.build([plain(d["title"] + "\n" + d["text"]) for d in docs])
    model = build_ndrm(NDRMConfig(vocab_size=len(vocab), variant="ndrm2"), vocab)
    path = save_checkpoint(tmp_path / "m.pt", model, "ndrm2", model.config.to_dict(), vocab, plain).path
    m = api.index(scifact_small, tmp_path / "idx", model=str(path), progress=False)
    assert m.analyzer == plain.to_dict() and m.model["analyzer"] == plain.to_dict()
    assert "cells" in Index(tmp_path / "idx").term_ids  # unstemmed (krovetz would give "cell")


def test_manifest_names_the_corpus_by_its_absolute_path(tmp_path, scifact_small, monkeypatch):
    monkeypatch.chdir(scifact_small.parent)
    m = api.index(scifact_small.name, tmp_path / "idx", model="ndrm2", progress=False)
    assert m.corpus["path"] == str(scifact_small.absolute()) and Manifest.read(tmp_path / "idx").corpus == m.corpus


def test_a_second_build_of_the_same_output_is_refused(tmp_path, scifact_small):
    """Two builds of one OUT would resume, or delete, each other's OUT.partial."""
    out = tmp_path / "idx"
    with build_mod.build_lock(out):
        with pytest.raises(CkqtiError, match=r"idx: another build is writing this index \(process \d+\)"):
            api.index(scifact_small, out, model="ndrm2", progress=False)
    api.index(scifact_small, out, model="ndrm2", progress=False)  # released: builds
    assert not (tmp_path / "idx.lock").exists()


def test_force_swaps_the_index_whole_and_waits_for_a_writer(tmp_path, scifact_small):
    """--force installs by one atomic exchange (no moment without an index, no old-PID leftover),
    after an append or compaction holding the old index's lock has finished."""
    import threading
    import time

    from indexer.append import writer_lock

    out = tmp_path / "idx"
    api.index(scifact_small, out, model="ndrm2", shard_size=10_000, progress=False)
    released = []

    def writer():
        with writer_lock(out):
            held.set()
            time.sleep(0.5)
            released.append(time.monotonic())

    held = threading.Event()
    thread = threading.Thread(target=writer)
    thread.start()
    held.wait(10)
    m = api.index(scifact_small, out, model="ndrm2", shard_size=200, force=True, progress=False)
    installed = time.monotonic()
    thread.join()
    assert released and installed >= released[0]
    assert Manifest.read(out).to_json() == m.to_json() and len(m.shards) > 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["idx"]


def test_force_through_a_symbolic_link_rebuilds_the_index_it_names(tmp_path, scifact_small):
    real, link = tmp_path / "real", tmp_path / "link"
    api.index(scifact_small, real, model="ndrm2", shard_size=10_000, progress=False)
    link.symlink_to(real)
    api.index(scifact_small, link, model="ndrm2", shard_size=200, force=True, progress=False)
    assert link.is_symlink() and link.resolve() == real.resolve() and len(Manifest.read(real).shards) > 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link", "real"]


def test_exchange_swaps_two_directories(tmp_path):
    from indexer.install import exchange

    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "mark").write_text("a")
    if not exchange(a, b):
        pytest.skip("no renameat2(RENAME_EXCHANGE) here")
    assert (b / "mark").read_text() == "a" and not (a / "mark").exists()


def test_exchange_elsewhere_than_linux_moves_nothing(tmp_path, monkeypatch):
    """Where there is no renameat2 the swap is two renames. On Windows ``ctypes.CDLL(None)`` (libc on
    Linux) is a TypeError: ``--force`` over an existing index failed with its traceback."""
    import ctypes
    import types

    import indexer.install
    from indexer.install import exchange

    def cdll(name, *args, **kwargs):
        raise TypeError("LoadLibrary() argument 1 must be str, not None")

    monkeypatch.setattr(indexer.install, "sys", types.SimpleNamespace(platform="win32"), raising=False)
    monkeypatch.setattr(ctypes, "CDLL", cdll)
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "mark").write_text("a")
    assert exchange(a, b) is False
    assert (a / "mark").read_text() == "a" and not (b / "mark").exists()


def test_an_edited_manifest_is_refused_by_its_checksum(tmp_path, scifact_index):
    """Edits no structural check sees (the collection size idf reads, a channel's step) changed
    every score silently; the manifest's checksum of its own content refuses them. A manifest
    written before the checksum (none recorded) still reads."""
    import json
    import shutil

    from ckqti.errors import IndexFormatError
    from indexer.format import CHECKSUM_KEY, MANIFEST

    idx = tmp_path / "idx"
    shutil.copytree(scifact_index, idx)
    original = json.loads((idx / MANIFEST).read_text())
    assert CHECKSUM_KEY in original
    for edit in ({"collection": {**original["collection"], "num_docs": 3000}},
                 {"channels": [{**original["channels"][0], "step": original["channels"][0]["step"] * 10}]},
                 {"vocab_file": "../other/vocab.arrow"}):
        (idx / MANIFEST).write_text(json.dumps({**original, **edit}))
        with pytest.raises(IndexFormatError, match="edited or damaged|not a file name inside the index"):
            Manifest.read(idx)
    (idx / MANIFEST).write_text(json.dumps({k: v for k, v in original.items() if k != CHECKSUM_KEY}))
    assert Manifest.read(idx).to_json() == Manifest.read(scifact_index).to_json()


def test_an_output_below_folders_that_do_not_exist_yet(tmp_path, scifact_small):
    """`make demo` on a clean clone writes out/sample-index before out/ exists."""
    out = tmp_path / "not" / "yet" / "idx"
    api.index(scifact_small, out, model="ndrm2", progress=False)
    assert Manifest.read(out).num_docs > 0 and sorted(p.name for p in out.parent.iterdir()) == ["idx"]


def test_force_replaces_an_index_whose_folder_is_read_only(tmp_path, scifact_small, monkeypatch):
    """No lock can be made in a read-only index folder, and no append can be writing it: the rebuild
    installs without waiting (root passes permission checks, so the refusal is simulated)."""
    import errno

    import indexer.append as append_mod

    out = tmp_path / "idx"
    api.index(scifact_small, out, model="ndrm2", shard_size=10_000, progress=False)

    def read_only(index, wait=False):
        raise OSError(errno.EROFS, "Read-only file system", str(index / ".writer.lock"))

    monkeypatch.setattr(append_mod, "writer_lock", read_only)
    m = api.index(scifact_small, out, model="ndrm2", shard_size=200, force=True, progress=False)
    assert Manifest.read(out).to_json() == m.to_json() and len(m.shards) > 1


def test_the_analyzed_pass_keeps_its_orcas_count_for_a_resumed_build(tmp_path):
    from ckqti.text import Analyzer
    from indexer.analyze import AnalyzedCorpus, analyze_corpus

    corpus, clicks = tmp_path / "c.tsv", tmp_path / "orcas.tsv"
    corpus.write_text("D1\tcells divide\nD2\tmembranes hold\nD3\tproteins fold\n")
    clicks.write_text("D1\tcell division\nD3\tfolding\nX9\tnot here\n")
    analyzed = analyze_corpus(corpus, Analyzer(), orcas=clicks, directory=tmp_path / "analyzed")  # as a build saves it
    assert analyzed.clicked == 2 and analyze_corpus(corpus, Analyzer()).clicked == 0
    assert AnalyzedCorpus.load(tmp_path / "analyzed").clicked == 2


@pytest.mark.parametrize("word", ["c{i}x{j}", "c{i}x{j}-p{i}y{j}-q{i}z{j}"])
def test_the_body_keeps_its_share_of_the_window_under_5000_words_of_clicks(tmp_path, word):
    """The clicks field is capped at 2,000 terms before the model reads a document's first 4,000, so a
    body after 5,000 words of clicks is still indexed, also when each clicked word is three terms
    (``covid-19-vaccine``): counted in whitespace words those were 6,000 terms and left the body out."""
    corpus, clicks, out = tmp_path / "c.tsv", tmp_path / "orcas.tsv", tmp_path / "idx"
    corpus.write_text(f"D1\t{' '.join(f'body{i}' for i in range(300))} zebrafish\nD2\tother text\nD3\tlung text\n")
    clicks.write_text("".join(f"D1\t{' '.join(word.format(i=i, j=j) for j in range(10))}\n" for i in range(500)))
    api.index(corpus, out, model="ndrm2", orcas=clicks, progress=False)
    from ckqti.text import Analyzer

    prefix = Index(out).shards[0].document(0)["prefix"]
    assert len(Analyzer()(prefix)) == 2000
    for query in ("zebrafish", "body0"):
        assert [h.docid for h in api.search(query, out).hits] == ["D1"], query


NO_ROOT_PERMISSIONS = "--bounding-set=-dac_override,-dac_read_search,-fowner"


def as_user(code: str, cwd: Path):
    """Run ``code`` in a Python subprocess that file permissions bind: root passes them, so as root
    the process drops the capabilities that let it (``setpriv``)."""
    import os
    import shutil
    import subprocess
    import sys

    prefix = []
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("running as root without setpriv: permissions cannot bind")
        prefix = ["setpriv", NO_ROOT_PERMISSIONS]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.run([*prefix, sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True)


def test_force_replaces_an_index_whose_folders_are_read_only(tmp_path, scifact_small):
    """Swapping the new index (in OUT.partial/) with the old one moved the old folder into another
    folder, which needs write permission on the folder itself: a read-only (0555) index could not
    be replaced ('idx: Permission denied'). Renames now stay within OUT's parent, and the old
    index's read-only folders are deleted with it."""
    out = tmp_path / "idx"
    api.index(scifact_small, out, model="ndrm2", shard_size=10_000, progress=False)
    for folder in (out, out / "shard-00000"):
        folder.chmod(0o555)
    code = (f"from ckqti import api; api.index({str(scifact_small)!r}, 'idx', model='ndrm2', shard_size=200, "
            "force=True, progress=False)")
    run = as_user(code, tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    assert len(Manifest.read(out).shards) > 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["idx"]


def test_an_output_whose_folder_is_read_only_is_named_before_any_work(tmp_path, scifact_small):
    out = tmp_path / "ro" / "idx"
    api.index(scifact_small, out, model="ndrm2", progress=False)
    out.parent.chmod(0o555)
    try:
        code = (f"from ckqti import api; api.index({str(scifact_small)!r}, {str(out)!r}, model='ndrm2', "
                "force=True, progress=False)")
        run = as_user(code, tmp_path)
    finally:
        out.parent.chmod(0o755)
    assert run.returncode != 0
    assert f"{out}: cannot be written: its folder {out.parent} is not writable" in run.stderr
    assert sorted(p.name for p in out.parent.iterdir()) == ["idx"]


def test_a_full_disk_is_named_and_leaves_no_half_index(tmp_path, scifact_small, monkeypatch):
    """The operating system's 'No space left on device' named no file; the build's half-written
    index (OUT.partial/final) is removed, the finished passes stay to resume."""
    import errno

    import pyarrow as pa

    out = tmp_path / "idx"
    real = pa.OSFile

    def full(path, mode="rb"):
        if "final" in str(path) and "postings" in str(path):
            raise OSError(errno.ENOSPC, "Error writing bytes to file. Detail: [errno 28] No space left on device")
        return real(path, mode)

    monkeypatch.setattr(pa, "OSFile", full)
    with pytest.raises(CkqtiError, match=r"^no space left on device writing \S+idx.partial/final/shard-00000/postings"):
        api.index(scifact_small, out, model="ndrm2", progress=False)
    assert not out.exists() and not (tmp_path / "idx.partial" / "final").exists()
    assert (tmp_path / "idx.partial" / "raw").is_dir()
    monkeypatch.undo()
    assert api.index(scifact_small, out, model="ndrm2", progress=False).num_docs > 0


def dead_pid() -> int:
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_force_without_an_atomic_exchange_leaves_nothing_beside_the_index(tmp_path, scifact_small, monkeypatch):
    import indexer.install as install_mod

    out = tmp_path / "idx"
    api.index(scifact_small, out, model="ndrm2", shard_size=10_000, progress=False)
    monkeypatch.setattr(install_mod, "exchange", lambda a, b: False)
    m = api.index(scifact_small, out, model="ndrm2", shard_size=200, force=True, progress=False)
    assert Manifest.read(out).to_json() == m.to_json()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["idx"]


def test_a_swap_killed_between_its_two_renames_is_recovered(tmp_path, scifact_small):
    """Without an atomic exchange, a kill after OUT -> OUT.old-PID and before the new index's rename
    left no OUT: the old index, still the committed one, comes back at the next open; once OUT is
    there again, a dead build's OUT.old-PID (a finished swap's leftover) goes at the next build."""
    out = tmp_path / "idx"
    built = api.index(scifact_small, out, model="ndrm2", shard_size=10_000, progress=False)
    out.rename(tmp_path / f"idx.old-{dead_pid()}")
    assert Index(out).manifest.to_json() == built.to_json()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["idx"]

    leftover = tmp_path / f"idx.old-{dead_pid()}"
    shutil.copytree(out, leftover)
    leftover.chmod(0o555)
    api.index(scifact_small, out, model="ndrm2", shard_size=200, force=True, progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["idx"]


def test_a_stranded_old_index_that_cannot_be_renamed_back_is_named(tmp_path, monkeypatch):
    """Where OUT's parent refuses renames (read-only), the next open cannot bring back the old index
    a killed swap left in OUT.old-PID, and said only 'no such index directory'."""
    import errno
    import os

    from ckqti.errors import IndexFormatError
    from indexer import install as install_mod

    def refuse(source, target):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(source))

    out, old = tmp_path / "idx", tmp_path / f"idx.old-{dead_pid()}"
    old.mkdir()
    monkeypatch.setattr(install_mod.os, "rename", refuse)
    with pytest.raises(IndexFormatError) as e:
        Index(out)
    assert str(e.value) == (
        f"{out}: no such index directory; the previous index waits in {old} "
        f"(an interrupted replace): rename it to {out}"
    )
    assert old.is_dir() and not out.exists()


def test_an_output_below_a_file_names_the_file_as_one(tmp_path, scifact_small):
    """It was 'its folder NOTES is not writable': a file called a folder, and advice about permissions."""
    (tmp_path / "notes").write_text("mine")
    out = tmp_path / "notes" / "idx"
    with pytest.raises(CkqtiError) as err:
        api.index(scifact_small, out, model="ndrm2", progress=False)
    assert str(err.value) == f"{out}: cannot write the index: {tmp_path / 'notes'} is a file, not a directory"
    assert (tmp_path / "notes").read_text() == "mine"


def test_a_corpus_that_is_a_directory_is_named_as_one(tmp_path):
    """Not the pipe's advice, which is for a path that exists but is neither file nor directory."""
    with pytest.raises(CkqtiError) as err:
        api.index(tmp_path, tmp_path.parent / "never-built", progress=False)
    assert str(err.value) == f"{tmp_path}: corpus file is a directory, not a file"
    assert not (tmp_path.parent / "never-built").exists()


def test_a_manifest_nested_too_deeply_is_one_index_error(tmp_path, scifact_index):
    import shutil

    from ckqti.errors import IndexFormatError
    from indexer.format import MANIFEST

    idx = tmp_path / "idx"
    shutil.copytree(scifact_index, idx)
    (idx / MANIFEST).write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(IndexFormatError, match="manifest is not valid JSON \\(nested too deeply\\)"):
        Manifest.read(idx)


@pytest.mark.parametrize("link", [False, True])
def test_the_root_directory_as_output_is_named_not_a_traceback(tmp_path, scifact_small, link):
    """It was a bare StopIteration: the root has no folder above it to build beside (nor a name for OUT.lock)."""
    out = Path("/")
    if link:
        out = tmp_path / "root"
        out.symlink_to("/")
    with pytest.raises(CkqtiError) as err:
        api.index(scifact_small, out, model="ndrm2", force=True, progress=False)
    assert str(err.value) == (f"{out}: is the root directory; a build writes beside the index and renames it "
                              "into place: choose a folder below it")


def test_documents_in_memory_build_the_index_their_file_builds(tmp_path, scifact_small, scifact_index):
    """``api.index(list_of_dicts, out)``, as a bm25s or Pyserini user holds a corpus: the same shards,
    byte for byte, as the JSONL file of those documents (``scifact_index``), and no corpus path recorded."""
    from tests.conftest import first_docs

    out = tmp_path / "mem"
    m = api.index(first_docs(scifact_small, 600), out, model="ndrm2", shard_size=250, progress=False)
    assert [s.files for s in m.shards] == [s.files for s in Manifest.read(scifact_index).shards]
    assert m.corpus == {"path": None, "format": None, "orcas": None} and api.info(out).corpus is None
    texts = [d["title"] + " " + d["text"] for d in first_docs(scifact_small, 50)]
    api.index(texts, tmp_path / "texts", model="ndrm2", progress=False)
    hits = api.search("vitamin d deficiency", tmp_path / "texts", k=3).hits
    assert hits and all(0 <= int(h.docid) < 50 for h in hits)  # a text's docid is its position


def test_an_interrupted_build_of_documents_in_memory_resumes_only_for_the_same_documents(scifact_small):
    from indexer.readers import read_corpus, read_documents

    docs = read_documents(read_corpus(scifact_small))
    fp = build_mod.fingerprint(docs, None, None, {"id": "m"}, build_mod.BuildConfig())
    assert build_mod.fingerprint(list(docs), None, None, {"id": "m"}, build_mod.BuildConfig()) == fp
    changed = docs[:5] + [replace(docs[5], text=docs[5].text + " more")] + docs[6:]
    assert build_mod.fingerprint(changed, None, None, {"id": "m"}, build_mod.BuildConfig()) != fp


def test_a_build_holds_neither_text_nor_term_ids_of_the_corpus_while_it_scores(tmp_path, monkeypatch):
    """Pass one writes the analyzed corpus as it reads it and the build reads it back memory-mapped:
    while the shards are scored, memory holds no copy of the documents' text or term ids (MS
    MARCO's documents, 16 GB of text, would not fit)."""
    from indexer import analyze
    from tests.memory import held_when_called, long_random_lines

    lines = long_random_lines()
    corpus, warm = tmp_path / "corpus.jsonl", tmp_path / "warm.jsonl"
    corpus.write_text("".join(lines))
    warm.write_text(lines[0])
    text_bytes = corpus.stat().st_size
    monkeypatch.setattr(analyze, "BATCH_DOCS", 100, raising=False)  # several batches
    api.index(warm, tmp_path / "warm", model="ndrm2", progress=False)  # imports and first-call caches, before counting
    held, _ = held_when_called(monkeypatch, build_mod, "score_shards",
                               lambda: api.index(corpus, tmp_path / "idx", model="ndrm2", progress=False))
    assert held["python"] < text_bytes / 4 and held["arrow"] < text_bytes / 4, held
    stored = Index(tmp_path / "idx").shards[0]
    assert stored.num_docs == 600


def test_a_build_writes_its_shards_without_holding_their_text_as_python_strings(tmp_path, monkeypatch):
    """A shard's document store is written from the analyzed corpus's table (memory-mapped), not from
    its text made into Python strings and back into Arrow (for SciFact repeated to 100k abstracts,
    190 MB of strings held while the shard's postings were sorted). Python's objects and numpy's
    arrays are counted by tracemalloc."""
    import tracemalloc

    from indexer import analyze, shards
    from indexer.format import file_checksum

    rng = np.random.default_rng(0)
    words = [f"w{i}x" for i in range(20)]  # few distinct terms: few postings, much text
    lines = [json.dumps({"_id": f"d{i}", "title": "", "text": " ".join(rng.choice(words, 800))}) for i in range(600)]
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("\n".join(lines) + "\n")
    text_bytes = corpus.stat().st_size  # 2.2 MB; the postings ~12k (~110 KB)
    monkeypatch.setattr(analyze, "BATCH_DOCS", 100, raising=False)  # shards across several batches
    monkeypatch.setattr(shards, "file_checksum", lambda path: file_checksum(path, 1 << 16))  # not 4 MB reads
    held = {}
    write_index, finish_index = build_mod.write_index, build_mod.finish_index

    def measured(*args, **kwargs):  # from the first shard's postings and documents read ...
        tracemalloc.reset_peak()
        held["start"] = tracemalloc.get_traced_memory()[0]
        return write_index(*args, **kwargs)

    def written(*args, **kwargs):  # ... to the last shard written
        held["peak"] = tracemalloc.get_traced_memory()[1] - held["start"]
        return finish_index(*args, **kwargs)

    warm = tmp_path / "warm.jsonl"  # imports and first-call caches, before counting
    warm.write_text(lines[0] + "\n")
    api.index(warm, tmp_path / "warm", model="ndrm2", progress=False)
    monkeypatch.setattr(build_mod, "write_index", measured)
    monkeypatch.setattr(build_mod, "finish_index", written)
    tracemalloc.start()
    try:
        api.index(corpus, tmp_path / "idx", model="ndrm2", shard_size=250, progress=False)
    finally:
        tracemalloc.stop()
    assert held["peak"] < text_bytes / 4, held
    index = Index(tmp_path / "idx")
    assert [s.num_docs for s in index.shards] == [250, 250, 100]
    assert index.shards[1].document(3) == {"docid": "d253", "title": "", "text": json.loads(lines[253])["text"], "prefix": ""}
