"""What runs in a distributed build's Ray actors (:mod:`indexer.distributed`): :class:`ShardScorer`
scores whole shards into ``raw/``, :class:`ShardWriter` quantizes them and writes their Arrow files
into ``final/``; each start of a shard is counted (:func:`start_attempt`) and a worker's
:class:`~ckqti.errors.CkqtiError` noted for the driver (:func:`reported`).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path

import numpy as np

from ckqti.errors import CkqtiError
from ckqti.files import replacing
from indexer.analyze import AnalyzedCorpus
from indexer.build import quantized_shard, score_shard
from indexer.format import ShardInfo, shard_name
from indexer.impacts import ImpactConfig, ImpactScorer
from indexer.quantize import Quantizer
from indexer.shards import write_shard

FAULT_ENV = "CKQTI_RAY_FAULT"  # tests only, see _ShardProgress

OFFSETS_FILE = "offsets.npz"

PASS_DIR = "pass"  # the current Ray pass's bookkeeping: starts of each shard, a worker's error

WORKER_ERROR = "worker-error"



def start_attempt(work: Path, shard: int, max_retries: int) -> None:
    """Count one more start of ``shard`` in the current pass (a file ``pass/shard-NNNNN.K``, made
    with ``O_EXCL``; :func:`~indexer.distributed_passes.run_pass` clears them); a start past
    ``max_retries`` retries fails the build instead. A shard starts again only when its worker
    died in it: an exception in a worker is not retried.

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
    ``pass/worker-error``, where :func:`~indexer.distributed_passes._failure` reads it. Ray Data
    hands the driver a worker's exception as a ``UserCodeException`` whose cause (the CkqtiError)
    is lost on the way, its message left only inside a traceback's text."""
    try:
        yield
    except CkqtiError as e:
        # a full disk may refuse the note too (DiskFullError): the error itself still reaches the driver, in
        # Ray's text of it (:func:`~indexer.distributed_passes.worker_message`)
        with contextlib.suppress(OSError, CkqtiError), replacing(work / PASS_DIR / WORKER_ERROR) as tmp:
            tmp.write_text(str(e))
        raise



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
