"""Ray for a distributed build (:mod:`indexer.distributed`): joining a local session or a cluster,
what the cluster holds, and the environment its actors start in.

Ray is imported here, lazily (:func:`import_ray`): the rest of ckqti never needs it.
"""

from __future__ import annotations

import os
from pathlib import Path

from ckqti.errors import CkqtiError

ROOT = Path(__file__).resolve().parents[1]

PACKAGES = ("ckqti", "indexer", "retriever")

INSTALLED = {"site-packages", "dist-packages"}  # where pip installs packages (dist-: Debian's Python)



def worker_env() -> dict[str, str]:
    """Environment variables the actors need beyond Ray's defaults: this checkout on
    ``PYTHONPATH`` when the driver runs it from elsewhere without installing it (Ray puts
    the driver's working directory on the workers' path; code for a remote cluster ships
    with the job, see :func:`connect`). Empty in the usual case (an installed ckqti, or run from
    its checkout), so that actors start in Ray's already running worker processes."""
    if Path.cwd().resolve() == ROOT or not INSTALLED.isdisjoint(ROOT.parts):
        return {}
    return {"PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}



def import_ray():
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
    ray = import_ray()
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
    ray = import_ray()
    res = ray.cluster_resources()
    gpus, cpus = int(res.get("GPU", 0)), max(1, int(res.get("CPU", 1)))
    if device is not None and device.startswith("cuda") and gpus == 0:
        raise CkqtiError(f"device {device} asked for, but the Ray cluster has no GPU")
    gpu = gpus > 0 and (device is None or device.startswith("cuda"))
    return (gpus if gpu else cpus), gpu
