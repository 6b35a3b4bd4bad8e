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
one shard (counted in ``OUT.partial/pass``, see
:func:`~indexer.distributed_workers.start_attempt`); a shard's
files appear only complete (atomic renames), so a redone shard never meets half files.
When retries run out the build raises :class:`~ckqti.errors.CkqtiError`: no manifest is
written, ``OUT`` is untouched, and ``OUT.partial`` keeps every finished shard, so
rerunning the same command (with or without Ray) resumes.

The driver's steps are here. Joining Ray and the actors' environment are in
:mod:`indexer.distributed_cluster`; a pass (actors mapped over the shards, a Ray failure as a
one-line error, the shards the workers report checked) in :mod:`indexer.distributed_passes`;
what runs in the actors in :mod:`indexer.distributed_workers`. Ray is imported only in these
modules, lazily: the rest of ckqti never needs it.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ckqti.errors import CkqtiError
from ckqti.models.specs import UNTRAINED
from ckqti.progress import progress_bar
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
    save_npz_atomic,
    shard_ranges,
)
from indexer.distributed_cluster import check_address, cluster_slots, connect, import_ray
from indexer.distributed_passes import RayPlan, run_pass, verify_shards
from indexer.distributed_workers import OFFSETS_FILE, ShardScorer, ShardWriter
from indexer.format import Manifest, ShardInfo
from indexer.impacts import ImpactScorer
from indexer.install import install, recover
from indexer.paths import check_build_paths, output_path


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
                import_ray().shutdown()
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
