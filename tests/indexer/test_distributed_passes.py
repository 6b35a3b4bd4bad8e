"""A distributed build's passes on the driver (indexer.distributed_passes), without Ray: the shards
the workers report are checked, and a worker's error reaches the driver as one line."""

from __future__ import annotations

import pytest

from ckqti.errors import CkqtiError
from indexer.format import SHARD_FILES


def test_a_shard_a_worker_reported_is_checked_for_its_size_and_every_checksum(tmp_path):
    from indexer.distributed_passes import verify_shards
    from indexer.format import ShardInfo, file_checksum

    folder = tmp_path / "shard-00000"
    folder.mkdir()
    for f in SHARD_FILES:
        (folder / f).write_text(f)
    info = ShardInfo("shard-00000", 10, 0, {f: file_checksum(folder / f) for f in SHARD_FILES})
    assert verify_shards(tmp_path, {0: info}, [(0, 10)]) == [info]
    with pytest.raises(CkqtiError, match="did not report this shard"):
        verify_shards(tmp_path, {0: info}, [(0, 11)])
    (folder / SHARD_FILES[0]).write_text("changed")
    with pytest.raises(CkqtiError, match="not as its worker wrote it"):
        verify_shards(tmp_path, {0: info}, [(0, 10)])


# Ray's text of a worker's CkqtiError (Ray 2.60, a UDF raising DiskFullError): the worker's traceback, its
# exception's line, then Ray Data's; the cause itself does not reach the driver
RAY_TEXT = ("\x1b[36mray::MapWorker(MapBatches(ShardWriter)).submit()\x1b[39m (pid=17524, ip=192.0.2.2, actor_id=28f7)\n"
            '  File "/w/indexer/distributed.py", line 6, in __call__\n    raise DiskFullError("x")\n'
            "ckqti.errors.DiskFullError: no space left on device writing /x/final/shard-00001/docs.arrow\n\n"
            "The above exception was the direct cause of the following exception:\n\n"
            "\x1b[36mray::MapWorker(MapBatches(ShardWriter)).submit()\x1b[39m (pid=17524, ip=192.0.2.2)\n"
            "ray.exceptions.UserCodeException: UDF failed to process a data block.\n"
            "Failed to apply UDF transform after 1/1 attempts (total backoff 0.0s).")


def test_a_workers_error_reaches_the_driver_when_its_note_could_not_be_written(tmp_path):
    """A full disk is where ``pass/worker-error`` cannot be written: the driver said "distributed build
    failed after retries (RayTaskError(UserCodeException): \\x1b[36mray::MapWorker..." (no retry had run)
    and not that the disk was full; now the worker's error is read from Ray's text of it."""
    from indexer.distributed_passes import _failure

    err = _failure(RuntimeError(RAY_TEXT), tmp_path)
    assert str(err) == "no space left on device writing /x/final/shard-00001/docs.arrow"
    other = _failure(RuntimeError(RAY_TEXT.replace("ckqti.errors.DiskFullError", "ValueError")), tmp_path)
    assert str(other).startswith(f"{tmp_path}: distributed build failed in a worker (ValueError: no space left ")
    assert "\x1b" not in str(other) and "after retries" not in str(other)
