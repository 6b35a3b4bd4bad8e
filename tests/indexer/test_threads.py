"""Torch's thread count chosen batch by batch (indexer.threads): the schedule, and an index that does not depend on it."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
import torch

from indexer import threads as threads_module
from indexer.threads import ThreadChooser, torch_threads


def run(chooser: ThreadChooser, cost: dict[int, float], batches: int) -> list[int]:
    """The counts ``chooser`` picks for ``batches`` batches of 100 units when a unit costs ``cost[n]`` on n threads."""
    picked = []
    for _ in range(batches):
        n = chooser.next()
        picked.append(n)
        chooser.record(n, cost[n] * 100, 100)
    return picked


def test_both_counts_are_tried_then_the_faster_runs_and_the_other_is_probed(monkeypatch):
    """A warm-up batch on torch's count, then 2 and 1 once each, then the cheaper (here 1), with the
    other after ``probe_every`` batches, then twice as many each time it stays dearer, up to
    MAX_PROBE_EVERY; a switch at the first probe that finds it cheaper, after which the probes come
    after ``probe_every`` batches again."""
    monkeypatch.setattr(threads_module, "MAX_PROBE_EVERY", 16)
    chooser = ThreadChooser(2, probe_every=4)
    picked = run(chooser, {2: 3.0, 1: 1.0}, 3 + 4 + 1 + 8 + 1 + 16 + 1 + 16 + 1)
    assert picked[:3] == [2, 2, 1]
    assert [i for i, n in enumerate(picked[3:]) if n == 2] == [4, 4 + 9, 4 + 9 + 17, 4 + 9 + 17 + 17]
    assert chooser.best == 1 and chooser.cost == {2: pytest.approx(3.0), 1: pytest.approx(1.0)}
    # the other jobs end: two threads become the faster; the next probe finds it, and 2 runs from then on
    picked = run(chooser, {2: 0.5, 1: 1.0}, 16 + 1 + 4 + 1)
    assert picked.index(2) == 16 and chooser.best == 2
    assert picked[16:] == [2] * 5 + [1]  # then 1 is the count probed, after probe_every batches


def test_the_count_that_runs_keeps_a_running_cost():
    """One slow batch on the chosen count (a hiccup) moves its running cost halfway and leaves the
    choice; a second one turns it."""
    chooser = ThreadChooser(4)
    run(chooser, {4: 1.0, 1: 2.0}, 3)
    assert chooser.best == 4
    assert chooser.next() == 4
    chooser.record(4, 250, 100)
    assert chooser.best == 4 and chooser.cost[4] == pytest.approx(1.75)
    assert chooser.next() == 4
    chooser.record(4, 250, 100)
    assert chooser.best == 1 and chooser.cost[4] == pytest.approx(2.125)


def test_nothing_to_choose_on_one_thread_and_bad_arguments():
    chooser = ThreadChooser(1)
    assert run(chooser, {1: 1.0}, 40) == [1] * 40
    with pytest.raises(ValueError):
        ThreadChooser(0)
    with pytest.raises(ValueError):
        ThreadChooser(2, probe_every=0)


def test_torch_threads_sets_and_restores():
    before = torch.get_num_threads()
    with torch_threads(before + 1):
        assert torch.get_num_threads() == before + 1
    assert torch.get_num_threads() == before
    with pytest.raises(RuntimeError), torch_threads(before + 2):
        raise RuntimeError
    assert torch.get_num_threads() == before


def index_files(path: Path) -> dict[str, bytes]:
    """Every file of an index but its manifest (which records the build's seconds)."""
    return {str(f.relative_to(path)): f.read_bytes() for f in sorted(path.rglob("*"))
            if f.is_file() and f.name != "manifest.json"}


def test_an_index_built_switching_threads_every_batch_is_the_one_thread_index(scifact_small, tmp_path, monkeypatch):
    """The bundled NDRM3 (a latent model: encoder, cosine bound, per-document channel scores) over
    200 abstracts in batches of 16, built on one thread and built with torch's count switching
    between 2 and 1 at every batch: the same index, byte for byte; torch's count is set back."""
    from ckqti import api

    corpus = tmp_path / "corpus.jsonl"
    with open(scifact_small) as f:
        corpus.write_text("".join(itertools.islice(f, 200)))
    api.index(corpus, tmp_path / "one", batch_size=16, progress=False)  # the tests' one torch thread: nothing to choose

    used = []
    counts = itertools.cycle([2, 1])

    def alternate(self) -> int:
        n = next(counts)
        used.append((n, torch.get_num_threads()))
        return n

    recorded = []
    record = ThreadChooser.record
    monkeypatch.setattr(ThreadChooser, "next", alternate)
    monkeypatch.setattr(ThreadChooser, "record", lambda self, n, s, u: (recorded.append(n), record(self, n, s, u)))
    torch.set_num_threads(2)  # restored to the tests' one thread by the conftest fixture
    api.index(corpus, tmp_path / "switching", batch_size=16, progress=False)
    assert torch.get_num_threads() == 2
    assert len(used) == 13 and recorded == [n for n, _ in used] and {n for n, _ in used} == {1, 2}
    assert all(before == 2 for _, before in used)  # each batch's count set back after it
    assert index_files(tmp_path / "switching") == index_files(tmp_path / "one")
