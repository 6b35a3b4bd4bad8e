"""A distributed build's passes, run from the driver (:mod:`indexer.distributed`): Ray Data maps
actors over a dataset of one row per shard (:func:`run_pass`), a Ray failure becomes a one-line
error (:func:`_failure`), and the shards the workers report are checked (:func:`verify_shards`).
"""

from __future__ import annotations

import contextlib
import logging
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from ckqti.errors import CkqtiError
from ckqti.progress import on_terminal
from indexer.distributed_cluster import import_ray, worker_env
from indexer.distributed_workers import PASS_DIR, WORKER_ERROR
from indexer.format import SHARD_FILES, ShardInfo, file_checksum, shard_name


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
        a dead actor and resubmits its task without limit;
        :func:`~indexer.distributed_workers.start_attempt` sets the limit."""
        resources = {"num_gpus": 1} if gpu else {"num_cpus": 1}
        env = worker_env()
        return {**resources, **({"runtime_env": {"env_vars": env}} if env else {})}



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
    (from ``pass/worker-error``, see :func:`~indexer.distributed_workers.reported`, or, where a
    full disk kept it from being written, from Ray's text of the worker's traceback)."""
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
    ray = import_ray()
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
