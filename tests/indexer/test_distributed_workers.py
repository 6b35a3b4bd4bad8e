"""What runs in the actors of a distributed build (indexer.distributed_workers), without Ray: the
count of a shard's starts, a worker's error noted for the driver, a failed shard write cleaned up."""

from __future__ import annotations

import pytest

from ckqti.errors import CkqtiError


def test_a_shard_starts_max_retries_plus_one_times_then_fails_the_build(tmp_path):
    """Without Ray: the count of starts :func:`start_attempt` keeps in the pass folder."""
    from indexer.distributed_workers import start_attempt

    for _ in range(3):  # the first start and 2 retries
        start_attempt(tmp_path, 4, max_retries=2)
    with pytest.raises(CkqtiError, match="died in each of its 3 attempts"):
        start_attempt(tmp_path, 4, max_retries=2)
    start_attempt(tmp_path, 5, max_retries=0)  # another shard counts its own
    with pytest.raises(ValueError, match="max_retries"):
        from indexer.distributed_passes import RayPlan

        RayPlan(tmp_path, workers=1, device="cpu", max_retries=-1)


def test_a_worker_that_cannot_write_its_note_raises_its_own_error(tmp_path, monkeypatch):
    from ckqti.errors import DiskFullError
    from indexer import distributed_workers

    def full(path):
        raise DiskFullError(f"no space left on device writing {path}")

    monkeypatch.setattr(distributed_workers, "replacing", full)
    with pytest.raises(CkqtiError, match="shard-00001/docs.arrow"), distributed_workers.reported(tmp_path):
        raise DiskFullError("no space left on device writing /x/final/shard-00001/docs.arrow")


def test_a_shard_writer_that_fails_leaves_nothing_in_writing(tmp_path, monkeypatch):
    """Its half-written shard stayed under ``writing/`` and filled the disk for the rerun (a build on an
    8 MB tmpfs: 260 kB after one failed run, 556 kB after two)."""
    from ckqti.errors import DiskFullError
    from indexer import distributed_workers

    def write_shard(tmp, name, *args):
        (tmp / name).mkdir(parents=True)
        (tmp / name / "postings.arrow").write_bytes(b"half")
        raise DiskFullError("no space left on device writing postings.arrow")

    class Corpus:
        vocab = ()

        @staticmethod
        def doc_table(start, stop):
            return {}

    monkeypatch.setattr(distributed_workers, "write_shard", write_shard)
    monkeypatch.setattr(distributed_workers, "quantized_shard", lambda path, quantizer: None)
    writer = distributed_workers.ShardWriter.__new__(distributed_workers.ShardWriter)
    writer.work, writer.corpus, writer.quantizer = tmp_path, Corpus, None
    with pytest.raises(DiskFullError):
        writer.write(1, 0, 10)
    assert list((tmp_path / "writing").iterdir()) == []
