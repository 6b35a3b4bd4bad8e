"""Building an index on a Ray cluster: the build of :mod:`indexer.build`, scored by model replicas.

The driver does what is global: it analyzes the corpus (saved under ``OUT.partial/analyzed``
as in a single-process build, and resumed the same way), fits the per-term offsets, fits
the quantizer from the largest impact of all shards, verifies every shard and writes the
vocabulary and, last, the manifest. The per-shard work runs as two Ray Data passes over a
dataset of one row per shard (``shard``, ``start``, ``stop``):

1. :class:`ShardScorer` actors (one model replica each: one per GPU when the cluster has
   GPUs, else one per CPU) load the model once and score shards into
   ``raw/shard-NNNNN.npz`` with :func:`indexer.build.score_shard`; a shard already there
   (a resumed build) is only read.
2. :class:`ShardWriter` actors quantize each shard with the global quantizer and write its
   Arrow files into ``final/`` (into a temporary directory renamed into place), returning
   the shard's :class:`~indexer.format.ShardInfo` with checksums.

The shard is the unit of work: with fewer shards than workers some workers idle, so
choose ``--shard-size`` to give several shards per worker. Each actor reads the analyzed
corpus (tokens and document store) once.

Workers read and write the work directory by path, so on a cluster of several machines
``OUT`` must be on a filesystem every node mounts at the same path (NFS, a mounted
bucket). The driver's ckqti code ships with the job; its dependencies (torch, numba,
pyarrow...) must be installed on every node. Run the driver on a cluster node
(``--ray auto``), e.g. through ``ray job submit``: Ray Client (``ray://``) cannot run Ray
Data and is refused. A worker that dies (killed, OOM,
lost node) is restarted by Ray Data and its shard redone, up to ``max_retries`` times for
one shard (counted in ``OUT.partial/pass``, see :func:`start_attempt`); a shard's
files appear only complete (atomic renames), so a redone shard never meets half files.
When retries run out the build raises :class:`~ckqti.errors.CkqtiError`: no manifest is
written, ``OUT`` is untouched, and ``OUT.partial`` keeps every finished shard, so
rerunning the same command (with or without Ray) resumes.

Ray is imported only here, lazily: the rest of ckqti never needs it.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import os
import re
import shutil
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from ckqti.errors import CkqtiError
from ckqti.files import replacing
from ckqti.models.specs import UNTRAINED
from ckqti.progress import on_terminal, progress_bar
from indexer.analyze import AnalyzedCorpus, analyze_corpus
from indexer.build import (
    BuildConfig,
    build_lock,
    build_record,
    corpus_record,
    fingerprint,
    finish_index,
    fit_quantizer,
    prepare_workdir,
    quantized_shard,
    save_npz_atomic,
    score_shard,
    shard_ranges,
)
from indexer.format import SHARD_FILES, Manifest, ShardInfo, file_checksum, shard_name
from indexer.impacts import ImpactConfig, ImpactScorer
from indexer.install import install, recover
from indexer.paths import check_build_paths, output_path
from indexer.quantize import Quantizer
from indexer.shards import write_shard

FAULT_ENV = "CKQTI_RAY_FAULT"  # tests only, see _ShardProgress
OFFSETS_FILE = "offsets.npz"
PASS_DIR = "pass"  # the current Ray pass's bookkeeping: starts of each shard, a worker's error
WORKER_ERROR = "worker-error"
ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("ckqti", "indexer", "retriever")
INSTALLED = {"site-packages", "dist-packages"}  # where pip installs packages (dist-: Debian's Python)


@dataclass(frozen=True)
class RayPlan:
    """Where and how the per-shard work runs.

    Args:
        work: absolute path of the build's work directory (``OUT.partial``).
        workers: actors per pass.
        device: torch device of the scoring actors (``"cuda"`` or ``"cpu"``).
        max_retries: how often a shard whose worker died is started again before the build fails.
    """

    work: Path
    workers: int
    device: str
    max_retries: int = 3

    def __post_init__(self) -> None:
        if self.workers < 1:
            raise ValueError("workers must be >= 1")
        if self.max_retries < 0:
            raise ValueError("max_retries must be >= 0")

    def actor_args(self, gpu: bool) -> dict:
        """Resources and environment of one actor (``map_batches`` keyword arguments, named ones
        only: the free ``**ray_remote_args`` and ``ray_remote_args_fn``, where ``max_restarts`` and
        ``max_task_retries`` went, are deprecated since Ray 2.60 and go in 2.64). Ray Data restarts
        a dead actor and resubmits its task without limit; :func:`start_attempt` sets the limit."""
        resources = {"num_gpus": 1} if gpu else {"num_cpus": 1}
        env = worker_env()
        return {**resources, **({"runtime_env": {"env_vars": env}} if env else {})}


def start_attempt(work: Path, shard: int, max_retries: int) -> None:
    """Count one more start of ``shard`` in the current pass (a file ``pass/shard-NNNNN.K``, made
    with ``O_EXCL``; :func:`run_pass` clears them); a start past ``max_retries`` retries fails the
    build instead. A shard starts again only when its worker died in it: an exception in a worker
    is not retried.

    Raises:
        CkqtiError: the shard was already started ``max_retries + 1`` times.
    """
    folder = work / PASS_DIR
    folder.mkdir(exist_ok=True)
    for k in itertools.count():
        if k > max_retries:
            raise CkqtiError(
                f"distributed build failed: the worker of {shard_name(shard)} died in each of its {k} attempts; "
                "no index was written, finished shards are kept: rerun to resume",
                work,
            )
        try:
            os.close(os.open(folder / f"{shard_name(shard)}.{k}", os.O_CREAT | os.O_EXCL))
            return
        except FileExistsError:
            continue


@contextlib.contextmanager
def reported(work: Path) -> Iterator[None]:
    """In a worker: a :class:`CkqtiError` raised in the block is also written to
    ``pass/worker-error``, where :func:`_failure` reads it. Ray Data hands the driver a worker's
    exception as a ``UserCodeException`` whose cause (the CkqtiError) is lost on the way, its
    message left only inside a traceback's text."""
    try:
        yield
    except CkqtiError as e:
        # a full disk may refuse the note too (DiskFullError): the error itself still reaches the driver, in
        # Ray's text of it (:func:`worker_message`)
        with contextlib.suppress(OSError, CkqtiError), replacing(work / PASS_DIR / WORKER_ERROR) as tmp:
            tmp.write_text(str(e))
        raise


def worker_env() -> dict[str, str]:
    """Environment variables the actors need beyond Ray's defaults: this checkout on
    ``PYTHONPATH`` when the driver runs it from elsewhere without installing it (Ray puts
    the driver's working directory on the workers' path; code for a remote cluster ships
    with the job, see :func:`connect`). Empty in the usual case (an installed ckqti, or run from
    its checkout), so that actors start in Ray's already running worker processes."""
    if Path.cwd().resolve() == ROOT or not INSTALLED.isdisjoint(ROOT.parts):
        return {}
    return {"PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}


def load_analyzed(work: Path) -> AnalyzedCorpus:
    """The analyzed corpus of a build, read by path (how it reaches the workers)."""
    corpus = AnalyzedCorpus.load(work / "analyzed")
    if corpus is None:
        raise CkqtiError("analyzed corpus not found; on a cluster OUT must be on a filesystem shared by all nodes", work)
    return corpus


class _ShardProgress:
    """``score_shard``'s progress sink in a worker; also where a test injects a worker death.

    When the worker's environment variable ``CKQTI_RAY_FAULT`` names an existing JSON file
    ``{"shard": i, "once": true|false}`` (the tests set it before starting Ray; ckqti never
    does), the worker scoring shard ``i`` exits abruptly after its first batch: once in the
    whole build, or on every attempt.
    """

    def __init__(self, shard: int):
        self.shard = shard

    def update(self, n: int) -> None:
        spec = os.environ.get(FAULT_ENV)
        if not spec or not Path(spec).is_file():
            return
        fault = json.loads(Path(spec).read_text())
        if fault["shard"] != self.shard:
            return
        if fault.get("once", True):
            try:
                os.close(os.open(spec + ".fired", os.O_CREAT | os.O_EXCL))
            except FileExistsError:
                return
        os._exit(1)


class ShardScorer:
    """Ray Data actor: one model replica that scores whole shards into ``raw/``.

    Args:
        work: the build's work directory.
        model_spec: as for :func:`ckqti.models.loading.load_qti_model` (loaded here, once).
        impacts: the build's impact settings.
        device: torch device.
        max_retries: see :func:`start_attempt`.
    """

    def __init__(self, work: str, model_spec: str | None, impacts: ImpactConfig, device: str, max_retries: int):
        from ckqti.models.loading import load_qti_model

        self.work, self.max_retries = Path(work), max_retries
        with reported(self.work):
            self.corpus = load_analyzed(self.work)
            factory, _ = load_qti_model(model_spec, device)
        self.scorer = ImpactScorer(factory(self.corpus.vocab), self.corpus.vocab.df, impacts)
        with np.load(self.work / OFFSETS_FILE) as z:
            self.scorer.offsets = z["offsets"]

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        tops = []
        for i, start, stop in zip(batch["shard"], batch["start"], batch["stop"]):
            path = self.work / "raw" / f"{shard_name(int(i))}.npz"
            with reported(self.work):
                start_attempt(self.work, int(i), self.max_retries)
                tops.append(score_shard(self.corpus, self.scorer, int(start), int(stop), path, _ShardProgress(int(i))))
        return {"shard": batch["shard"], "maxima": np.stack([np.atleast_1d(t).astype(np.float64) for t in tops])}


class ShardWriter:
    """Ray Data actor: quantizes shards' float impacts and writes their Arrow files into ``final/``.

    Args:
        work: the build's work directory.
        quantizer: the index's global quantizer.
        max_retries: see :func:`start_attempt`.
    """

    def __init__(self, work: str, quantizer: Quantizer, max_retries: int):
        self.work, self.max_retries = Path(work), max_retries
        with reported(self.work):
            self.corpus = load_analyzed(self.work)
        self.quantizer = quantizer

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        infos = []
        for i, start, stop in zip(batch["shard"], batch["start"], batch["stop"]):
            with reported(self.work):
                start_attempt(self.work, int(i), self.max_retries)
                info = self.write(int(i), int(start), int(stop))
            infos.append(json.dumps(asdict(info)))
        return {"shard": batch["shard"], "info": np.asarray(infos, dtype=object)}

    def write(self, i: int, start: int, stop: int) -> ShardInfo:
        """Write shard ``i`` into a fresh directory under ``work/writing`` (where a killed
        attempt's leftovers stay out of the index), then rename it into ``final/``."""
        name, final = shard_name(i), self.work / "final"
        tmp = self.work / "writing" / f"{name}-{os.getpid()}-{time.time_ns()}"
        postings = quantized_shard(self.work / "raw" / f"{name}.npz", self.quantizer)
        try:
            info = write_shard(tmp, name, postings, len(self.corpus.vocab), self.corpus.doc_table(start, stop))
        except BaseException:  # a full disk: its half shard would keep the disk full for the rerun
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        if (final / name).exists():
            shutil.rmtree(final / name)
        os.replace(tmp / name, final / name)
        shutil.rmtree(tmp)
        return info


def verify_shards(final: Path, infos: dict[int, ShardInfo], ranges: list[tuple[int, int]]) -> list[ShardInfo]:
    """Check every shard a worker reported: present, named, sized and checksummed as written."""
    out = []
    for i, (start, stop) in enumerate(ranges):
        info = infos.get(i)
        where = final / shard_name(i)
        if info is None or info.name != shard_name(i) or info.num_docs != stop - start:
            raise CkqtiError("a worker did not report this shard as written", where)
        if sorted(info.files) != sorted(SHARD_FILES):
            raise CkqtiError("shard written with unexpected files", where)
        for f, digest in info.files.items():
            if not (where / f).is_file() or file_checksum(where / f) != digest:
                raise CkqtiError("shard file missing or not as its worker wrote it", where / f)
        out.append(info)
    return out


def _import_ray():
    try:
        import ray
        import ray.data
    except ImportError:
        raise CkqtiError("--ray needs Ray: pip install 'ckqti[ray]'") from None
    return ray


def check_address(address: str | None) -> None:
    if address is not None and address.startswith("ray://"):
        raise CkqtiError(
            f"Ray Client addresses ({address}) cannot run Ray Data; run on a cluster node with --ray auto, "
            "e.g. ray job submit --address http://HEAD:8265 -- ckqti index CORPUS --out /shared/INDEX --ray auto"
        )


def connect(address: str | None) -> bool:
    """Join Ray: an already initialized session as is, else a new local one (``None`` or
    ``"local"``) or the cluster at ``address`` (``"auto"``: the cluster of this machine,
    or its GCS ``"HOST:PORT"``), to which the driver's ckqti code is shipped
    (``py_modules``; its dependencies must be installed on the nodes). Ray Client
    (``ray://``) is refused: Ray Data does not run through it; submit the command to the
    cluster as a Ray Job instead. Returns whether this call started the session (and so
    must shut it down). A local Ray says only its errors (``logging_level``), and its workers'
    output stays in its session's logs (``log_to_driver``): what a build says on stderr is ckqti's."""
    check_address(address)
    ray = _import_ray()
    if ray.is_initialized():
        return False
    try:
        if address in (None, "local"):  # never a stale cluster
            ray.init(address="local", include_dashboard=False, logging_level="ERROR", log_to_driver=False)
        else:
            code = {"py_modules": [str(ROOT / p) for p in PACKAGES]}
            ray.init(address=address, logging_level="WARNING", runtime_env=code)
    except (ConnectionError, RuntimeError, ValueError) as e:
        why = f"{e}: {str(e.__cause__).split('. ')[0]}" if e.__cause__ else str(e)
        raise CkqtiError(f"cannot start or reach Ray at {address or 'local'} ({why})") from None
    return True


def cluster_slots(device: str | None) -> tuple[int, bool]:
    """How many scoring actors the cluster can hold, and whether they use GPUs."""
    ray = _import_ray()
    res = ray.cluster_resources()
    gpus, cpus = int(res.get("GPU", 0)), max(1, int(res.get("CPU", 1)))
    if device is not None and device.startswith("cuda") and gpus == 0:
        raise CkqtiError(f"device {device} asked for, but the Ray cluster has no GPU")
    gpu = gpus > 0 and (device is None or device.startswith("cuda"))
    return (gpus if gpu else cpus), gpu


ANSI = re.compile(r"\x1b\[[0-9;]*m")
CKQTI_ERROR = re.compile(r"^ckqti\.errors\.\w+: (.+)$")


def worker_message(e: Exception) -> str:
    """The last line of the worker's own traceback in Ray's text of its failure (``"ValueError: ..."``),
    else the text's first line; without Ray's colour codes."""
    text = ANSI.sub("", str(e)).split("\n\nThe above exception was the direct cause")[0].strip()
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1].strip() if lines else type(e).__name__


def _failure(e: Exception, work: Path) -> CkqtiError:
    """A Ray failure as a one-line error; a CkqtiError raised inside a worker keeps its message
    (from ``pass/worker-error``, see :func:`reported`, or, where a full disk kept it from being
    written, from Ray's text of the worker's traceback)."""
    with contextlib.suppress(OSError):
        return CkqtiError((work / PASS_DIR / WORKER_ERROR).read_text())
    seen = e
    while seen is not None:
        if isinstance(seen, CkqtiError):
            return seen
        seen = getattr(seen, "cause", None) or seen.__cause__
    last = worker_message(e)
    if found := CKQTI_ERROR.match(last):
        return CkqtiError(found.group(1))
    return CkqtiError(
        f"distributed build failed in a worker ({last}); no index was written, finished shards are kept: rerun to resume",
        work,
    )


def run_pass(udf, kwargs: dict, ranges: list[tuple[int, int]], plan: RayPlan, gpu: bool, progress: bool) -> list[dict]:
    """Map ``udf`` actors over the shards (one row each); returns the output rows."""
    ray = _import_ray()
    from ray.data import ActorPoolStrategy, DataContext

    ctx, bars = DataContext.get_current(), DataContext.get_current().enable_progress_bars
    ctx.enable_progress_bars = progress and on_terminal()  # Ray Data's bars: on a terminal only, as ours
    log = logging.getLogger("ray.data")
    consoles = [h for h in log.handlers if isinstance(h, logging.StreamHandler) and not isinstance(h, logging.FileHandler)]
    levels = [h.level for h in consoles]
    for h in consoles:  # Ray Data's notes stay in its log file (ray-data.log); its errors still show
        h.setLevel(logging.ERROR)
    shutil.rmtree(plan.work / PASS_DIR, ignore_errors=True)  # a pass counts its own attempts
    try:
        rows = [{"shard": i, "start": a, "stop": b} for i, (a, b) in enumerate(ranges)]
        ds = ray.data.from_items(rows, override_num_blocks=len(rows))
        ds = ds.map_batches(
            udf,
            batch_size=1,
            compute=ActorPoolStrategy(size=min(plan.workers, len(rows))),
            fn_constructor_kwargs=kwargs,
            **plan.actor_args(gpu),
        )
        return ds.take_all()
    except CkqtiError:
        raise
    except Exception as e:  # Ray's errors: a worker died past its retries, an actor failed to start
        raise _failure(e, plan.work) from None
    finally:
        ctx.enable_progress_bars = bars
        for h, level in zip(consoles, levels):
            h.setLevel(level)


def analyzed_corpus(work: Path, inputs: BuildInputs, progress: bool) -> AnalyzedCorpus:
    """Pass one, on the driver, saved under ``work/analyzed`` (or read back from an earlier run)."""
    corpus = AnalyzedCorpus.load(work / "analyzed")
    if corpus is None:
        bar = progress_bar(desc="analyze", unit="doc", show=progress)
        corpus = analyze_corpus(
            inputs.corpus_path, inputs.config.analyzer, fmt=inputs.fmt, orcas=inputs.orcas, progress=bar,
            directory=work / "analyzed",
        )
        bar.close()
    return corpus


def driver_device(device: str | None) -> str | None:
    """Where the driver's model replica runs: ``device``, but the CPU for a CUDA device when the
    driver has no GPU (a head node without one steering GPU workers, which take ``device``)."""
    import torch

    if device is not None and device.startswith("cuda") and not torch.cuda.is_available():
        return "cpu"
    return device


def driver_scorer(work: Path, corpus: AnalyzedCorpus, inputs: BuildInputs, device: str | None) -> ImpactScorer:
    """The driver's model replica: it fits the per-term offsets (saved for the workers) and
    tells the channels and constants the manifest records; it scores no shard."""
    from ckqti.models.loading import load_qti_model

    factory, _ = load_qti_model(inputs.model_spec, driver_device(device))
    scorer = ImpactScorer(factory(corpus.vocab), corpus.vocab.df, inputs.config.impacts)
    offsets = scorer.fit_offsets(corpus.token_lists(0, len(corpus)), len(corpus.vocab))
    save_npz_atomic(work / OFFSETS_FILE, offsets=np.asarray(offsets, dtype=np.float32))
    return scorer


@dataclass(frozen=True)
class BuildInputs:
    """What is indexed and how (everything but where the work runs)."""

    corpus_path: Path
    fmt: str | None
    orcas: Path | None
    model_spec: str | None
    model_info: dict
    config: BuildConfig

    def corpus_entry(self, corpus: AnalyzedCorpus) -> dict:
        return corpus_record(self.corpus_path, self.fmt, self.orcas, corpus.clicked, corpus.repeated)


def build_index_ray(
    corpus_path: str | Path,
    out: str | Path,
    model_spec: str | None,
    model_info: dict,
    config: BuildConfig = BuildConfig(),
    fmt: str | None = None,
    orcas: str | Path | None = None,
    force: bool = False,
    resume: bool = True,
    address: str | None = None,
    num_workers: int | None = None,
    device: str | None = None,
    max_retries: int = 3,
    progress: bool = True,
) -> Manifest:
    """Build the index :func:`indexer.build.build_index` builds, with the shards scored and
    written by Ray actors.

    Args:
        model_spec: ``"ndrm2"``, ``"ndrm2-anserini"``, a checkpoint path (visible from every node) or None for
            the default model; each actor loads it.
        model_info: the model's manifest entry (from ``load_qti_model``).
        address: None or ``"local"`` (start a local Ray, or use the session already
            initialized in this process), ``"auto"`` (the cluster this machine belongs
            to) or a cluster's GCS ``"HOST:PORT"``; see :func:`connect`.
        num_workers: actors per pass (default: one per GPU, else one per CPU, of the
            cluster; never more than the cluster holds or than there are shards: the
            shard is the unit of work).
        device: None (GPUs when the cluster has them), ``"cpu"`` or ``"cuda"``.
        max_retries: how often a dead worker is restarted and its shard redone.
    """
    t0 = time.time()
    out = output_path(out).resolve()
    if model_spec is not None and model_spec not in UNTRAINED and Path(model_spec).is_file():
        model_spec = str(Path(model_spec).resolve())  # workers may run elsewhere than this directory
    inputs = BuildInputs(Path(corpus_path), fmt, Path(orcas) if orcas else None, model_spec, model_info, config)
    recover(out)
    check_build_paths(inputs.corpus_path, inputs.orcas, out, force, fmt)
    if num_workers is not None and num_workers < 1:
        raise CkqtiError("--workers must be >= 1")
    check_address(address)
    work = out.with_name(out.name + ".partial")
    with build_lock(out):
        prepare_workdir(work, fingerprint(inputs.corpus_path, fmt, inputs.orcas, model_info, config), resume, progress)
        try:
            corpus = analyzed_corpus(work, inputs, progress)
        except CkqtiError:
            shutil.rmtree(work, ignore_errors=True)  # bad input: nothing worth resuming
            raise
        scorer = driver_scorer(work, corpus, inputs, device)
        started = connect(address)
        try:
            slots, gpu = cluster_slots(device)
            ranges = shard_ranges(len(corpus), config.shard_size)
            plan = RayPlan(work, min(num_workers or slots, slots, len(ranges)), "cuda" if gpu else "cpu", max_retries)
            manifest = _build(corpus, scorer, inputs, plan, gpu, progress, t0, address)
        except CkqtiError:
            for leftover in ("final", "writing"):  # rewritten by every run: freed (a full disk), as build_index does
                shutil.rmtree(work / leftover, ignore_errors=True)
            raise
        finally:
            if started:
                _import_ray().shutdown()
        install(work / "final", out, force)
        shutil.rmtree(work, ignore_errors=True)
        return manifest


def _build(corpus, scorer, inputs: BuildInputs, plan: RayPlan, gpu: bool, progress: bool, t0: float, address) -> Manifest:
    """The two Ray passes, verification, then the vocabulary and manifest in ``work/final``."""
    work, config = plan.work, inputs.config
    ranges = shard_ranges(len(corpus), config.shard_size)
    (work / "raw").mkdir(exist_ok=True)
    scorer_args = {"work": str(work), "model_spec": inputs.model_spec, "impacts": config.impacts, "device": plan.device,
                   "max_retries": plan.max_retries}
    scored = run_pass(ShardScorer, scorer_args, ranges, plan, gpu, progress)
    maxima = np.max(np.stack([np.asarray(r["maxima"], np.float64) for r in scored]), axis=0)
    quantizer = fit_quantizer(maxima, scorer.channels, config.channel_steps)
    shutil.rmtree(work / "final", ignore_errors=True)
    (work / "final").mkdir()
    writer_args = {"work": str(work), "quantizer": quantizer, "max_retries": plan.max_retries}
    written = run_pass(ShardWriter, writer_args, ranges, plan, False, progress)
    infos = verify_shards(work / "final", {int(r["shard"]): ShardInfo(**json.loads(r["info"])) for r in written}, ranges)
    return finish_index(
        work / "final",
        infos,
        corpus.vocab,
        scorer.offsets,
        quantizer,
        inputs.model_info,
        config.analyzer.to_dict(),
        corpus=inputs.corpus_entry(corpus),
        build=build_record(
            config, t0, corpus.vocab, ray={"address": address or "local", "workers": plan.workers, "device": plan.device},
            truncated_documents=corpus.longer_than(config.impacts.max_doc_terms),
        ),
        constants=scorer.model.index_constants(),
    )
