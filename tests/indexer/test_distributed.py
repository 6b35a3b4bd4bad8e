"""The distributed build on a local Ray (2 CPUs): same index as the single-process build,
a killed worker's shard is redone, and a worker dying on every attempt fails cleanly."""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest

pytest.importorskip("ray")

from click.testing import CliRunner  # noqa: E402

from ckqti.cli import cli  # noqa: E402
from ckqti.errors import CkqtiError  # noqa: E402
from ckqti.models.loading import load_qti_model  # noqa: E402
from indexer.build import BuildConfig, build_index  # noqa: E402
from indexer.distributed import build_index_ray  # noqa: E402
from indexer.distributed_workers import FAULT_ENV  # noqa: E402
from indexer.format import MANIFEST, SHARD_FILES, VOCAB_FILE, Manifest  # noqa: E402
from retriever.index import Index  # noqa: E402

pytestmark = [
    pytest.mark.slow,  # Ray start-up and actor start-up: about a minute in all
    # Ray's deprecations, warned where ckqti calls Ray (such as map_batches' ray_remote_args_fn, gone in Ray 2.64),
    # fail the build, so that a future Ray still runs it
    pytest.mark.filterwarnings("error::DeprecationWarning:indexer.distributed"),
]

CONFIG = BuildConfig(shard_size=100)


@pytest.fixture(scope="module")
def ray_local(tmp_path_factory):
    """A local Ray with 2 CPUs whose workers see the fault hook's variable (the hook does
    nothing until a test writes the file it names); yields that file's path."""
    import ray

    ctl = tmp_path_factory.mktemp("fault") / "fault.json"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(FAULT_ENV, str(ctl))
        ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="WARNING", log_to_driver=False)
    try:
        yield ctl
    finally:
        ray.shutdown()


@pytest.fixture(scope="module")
def corpus300(tmp_path_factory, data_dir):
    """The first 300 SciFact documents: 3 shards of 100."""
    out = tmp_path_factory.mktemp("scifact300") / "corpus.jsonl"
    with open(data_dir / "scifact" / "corpus.jsonl") as f, open(out, "w") as g:
        g.writelines(itertools.islice(f, 300))
    return out


@pytest.fixture(scope="module")
def reference(tmp_path_factory, corpus300):
    """The single-process build of the same corpus, model and settings."""
    factory, info = load_qti_model("ndrm2", "cpu")
    out = tmp_path_factory.mktemp("ref") / "index"
    build_index(corpus300, out, factory, info, CONFIG, progress=False)
    return out


def ray_build(corpus, out, **kwargs):
    _, info = load_qti_model("ndrm2", "cpu")
    return build_index_ray(corpus, out, "ndrm2", info, CONFIG, device="cpu", num_workers=2, progress=False, **kwargs)


def read_columns(path) -> dict[str, list]:
    return pa.ipc.open_file(pa.memory_map(str(path), "r")).read_all().to_pydict()


def assert_same_index(a, b):
    """Same shards (every Arrow column of every file), same vocabulary, same quantization."""
    ma, mb = Manifest.read(a), Manifest.read(b)
    assert [s.name for s in ma.shards] == [s.name for s in mb.shards]
    assert [s.num_docs for s in ma.shards] == [s.num_docs for s in mb.shards] == [100, 100, 100]
    assert ma.num_postings == mb.num_postings > 0
    da, db = json.loads(ma.to_json()), json.loads(mb.to_json())
    da.pop("build"), db.pop("build")
    assert da == db  # model, quantization steps, counts, and every file's checksum
    for s in ma.shards:
        for f in SHARD_FILES:
            assert read_columns(a / s.name / f) == read_columns(b / s.name / f), (s.name, f)
    assert read_columns(a / VOCAB_FILE) == read_columns(b / VOCAB_FILE)
    ia, ib = Index(a), Index(b)  # opens and verifies every checksum
    for sa, sb in zip(ia.shards, ib.shards):
        assert np.array_equal(sa.postings, sb.postings) and np.array_equal(sa.seg_ptr, sb.seg_ptr)


@pytest.fixture
def fault(ray_local):
    """Arms the workers' fault hook: ``fault(shard, once)`` makes the worker scoring ``shard``
    exit abruptly after its first batch (once in the build, or on every attempt); disarmed
    after the test."""
    fired = ray_local.with_name(ray_local.name + ".fired")

    def arm(shard: int, once: bool):
        ray_local.write_text(json.dumps({"shard": shard, "once": once}))
        return fired

    try:
        yield arm
    finally:
        ray_local.unlink(missing_ok=True)
        fired.unlink(missing_ok=True)


def test_ray_build_equals_single_process_build(ray_local, tmp_path, corpus300, reference):
    """Through the CLI: ``ckqti index --ray`` joins the Ray session of this process."""
    out = tmp_path / "ray"
    args = ["index", str(corpus300), "--out", str(out), "--model", "ndrm2", "--shard-size", "100", "--device", "cpu"]
    res = CliRunner().invoke(cli, [*args, "--ray", "--workers", "2"])
    assert res.exit_code == 0, res.output
    m = Manifest.read(out)
    assert res.output.strip().splitlines()[-1] == f"indexed 300 documents, {m.num_postings:,} postings, 3 shard(s) -> {out}"
    assert m.build["ray"] == {"address": "local", "workers": 2, "device": "cpu"}
    assert_same_index(reference, out)
    assert not (tmp_path / "ray.partial").exists()


def test_killed_worker_shard_is_redone(ray_local, tmp_path, corpus300, reference, fault):
    fired = fault(shard=1, once=True)
    ray_build(corpus300, tmp_path / "ray", max_retries=2)
    assert fired.exists()  # a worker did die mid-shard
    assert_same_index(reference, tmp_path / "ray")


def test_worker_dying_every_attempt_fails_cleanly(ray_local, tmp_path, corpus300, reference, fault):
    out = tmp_path / "idx"
    shutil.copytree(reference, out)  # a previous index at OUT
    before = (out / MANIFEST).read_text()
    fault(shard=1, once=False)
    with pytest.raises(CkqtiError, match="distributed build failed: the worker of shard-00001 died in each of its 2 ") as err:
        ray_build(corpus300, out, force=True, max_retries=1)  # a first attempt and one retry
    assert "\n" not in str(err.value)
    assert (out / MANIFEST).read_text() == before  # the previous index is intact
    Index(out)  # and verifies
    partial = out.with_name("idx.partial")
    assert not (partial / "final" / MANIFEST).exists()  # no manifest anywhere
    assert (partial / "analyzed" / "DONE").is_file()  # resumable
    assert not (partial / "raw" / "shard-00001.npz").exists()
    fault(shard=-1, once=False)  # no worker dies now: the rerun resumes and completes
    ray_build(corpus300, out, force=True)
    assert_same_index(reference, out)
    assert not partial.exists()


def test_bad_arguments_fail_before_ray_starts(tmp_path, corpus300):
    info = load_qti_model("ndrm2", "cpu")[1]
    with pytest.raises(CkqtiError, match="workers"):
        build_index_ray(corpus300, tmp_path / "x", "ndrm2", info, CONFIG, num_workers=0)
    with pytest.raises(CkqtiError, match="corpus file not found"):
        build_index_ray(tmp_path / "nope.jsonl", tmp_path / "y", "ndrm2", info, CONFIG)
    (tmp_path / "z").mkdir()
    with pytest.raises(CkqtiError, match="--force"):
        build_index_ray(corpus300, tmp_path / "z", "ndrm2", info, CONFIG)
    with pytest.raises(CkqtiError, match="--ray auto"):  # Ray Data does not run through Ray Client
        build_index_ray(corpus300, tmp_path / "w", "ndrm2", info, CONFIG, address="ray://head:10001")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["z"]  # nothing was started or written


RAY_LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d [\d:,]+\s+(INFO|WARNING) ")  # Ray's Python log lines


def test_a_local_ray_build_says_only_ckqtis_lines(tmp_path, corpus300):
    """``ckqti index --ray`` starting its own Ray (in a process of its own, so not the session of
    this module): no Ray INFO or WARNING lines, no deprecation warning, no worker output on stderr;
    stdout the one line ckqti prints. Ray's errors would still show (only its C++ core worker's
    one "E" line about restartable actors cannot be quieted without emptying Ray's log files)."""
    args = ["index", str(corpus300), "--out", str(tmp_path / "idx"), "--model", "ndrm2", "--shard-size", "100",
            "--ray", "--workers", "1"]
    done = subprocess.run([sys.executable, "-m", "ckqti", *args], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"indexed 300 documents, {Manifest.read(tmp_path / 'idx').num_postings:,} "
                                        f"postings, 3 shard(s) -> {tmp_path / 'idx'}"]
    chatter = [line for line in done.stderr.splitlines() if RAY_LOG_LINE.match(line) or "RayDeprecationWarning" in line
               or line.startswith(("(pid=", "\x1b[36m(pid="))]
    assert chatter == [], done.stderr


def test_a_failed_ray_build_keeps_what_resumes_and_frees_the_rest(ray_local, tmp_path, corpus300, monkeypatch):
    """Like a single-process build on a full disk: the half-written ``final/`` (rewritten by every run) and
    the workers' ``writing/`` go, the analyzed corpus and scored shards stay."""
    from indexer import distributed

    def failing(corpus, scorer, inputs, plan, *args):
        for leftover in ("final/shard-00000", "writing/shard-00001-1-2"):
            (plan.work / leftover).mkdir(parents=True)
        (plan.work / "raw").mkdir(exist_ok=True)
        (plan.work / "raw" / "shard-00000.npz").write_bytes(b"scored")
        raise CkqtiError("no space left on device writing final/shard-00000/docs.arrow")

    monkeypatch.setattr(distributed, "_build", failing)
    with pytest.raises(CkqtiError, match="no space left"):
        ray_build(corpus300, tmp_path / "idx")
    partial = tmp_path / "idx.partial"
    assert sorted(p.name for p in partial.iterdir()) == ["FINGERPRINT", "analyzed", "offsets.npz", "raw"]
