"""Torch's thread count chosen batch by batch (ckqti.threads): the schedule and the batch block."""

from __future__ import annotations

import pytest
import torch

from ckqti import threads as threads_module
from ckqti.threads import ThreadChooser, batch_threads, torch_threads


def run(chooser: ThreadChooser, cost: dict[int, float], batches: int) -> list[int]:
    """The counts ``chooser`` picks for ``batches`` batches of 100 units when a unit costs ``cost[n]`` on n threads."""
    picked = []
    for _ in range(batches):
        n = chooser.next()
        picked.append(n)
        chooser.record(n, cost[n] * 100, 100)
    return picked


def test_both_counts_are_tried_then_the_faster_runs_and_the_other_is_probed(monkeypatch):
    """A warm-up batch on one thread (the safer guess beside other jobs), then 2 and 1 once each, then the
    cheaper (here 1), with the other after ``probe_every`` batches times how much dearer it was (1.5x: 6),
    then twice as many each time it stays dearer, up to MAX_PROBE_EVERY; a switch at the first probe that
    finds it cheaper, after which the probes come after ``probe_every`` batches again."""
    monkeypatch.setattr(threads_module, "MAX_PROBE_EVERY", 16)
    chooser = ThreadChooser(2, probe_every=4)
    picked = run(chooser, {2: 1.5, 1: 1.0}, 3 + 6 + 1 + 12 + 1 + 16 + 1 + 16 + 1)
    assert picked[:3] == [1, 2, 1]
    assert [i for i, n in enumerate(picked[3:]) if n == 2] == [6, 6 + 13, 6 + 13 + 17, 6 + 13 + 17 + 17]
    assert chooser.best == 1 and chooser.cost == {2: pytest.approx(1.5), 1: pytest.approx(1.0)}
    # the other jobs end: two threads become the faster; the next probe finds it, and 2 runs from then on
    picked = run(chooser, {2: 0.5, 1: 1.0}, 16 + 1 + 4 + 1)
    assert picked.index(2) == 16 and chooser.best == 2
    assert picked[16:] == [2] * 5 + [1]  # then 1 is the count probed, after probe_every batches


def test_a_count_found_much_dearer_is_tried_again_much_later():
    """Beside other jobs two threads cost up to 20x one (a rerank's batches: 1.04 against 0.04 s): a probe
    every 16 batches would cost more than the rest; it comes after MAX_PROBE_EVERY instead, and so does
    the next while it stays that dear."""
    chooser = ThreadChooser(2)
    picked = run(chooser, {2: 20.0, 1: 1.0}, 3 + 2 * (threads_module.MAX_PROBE_EVERY + 1))
    assert [i for i, n in enumerate(picked) if n == 2] == [1, 3 + 128, 3 + 128 + 129]


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


def test_a_batch_runs_on_the_chosen_count_and_records_its_cost(monkeypatch):
    """``with chooser.batch(units)`` sets torch's count to :meth:`next`'s for the block, sets it back, and records
    the block's seconds for its units; a block that fails records nothing. No chooser: the block runs as it is."""
    chooser = ThreadChooser(2)
    seen, recorded = [], []
    monkeypatch.setattr(chooser, "record", lambda n, seconds, units: recorded.append((n, units)))
    monkeypatch.setattr(chooser, "next", lambda: 3)
    before = torch.get_num_threads()
    with chooser.batch(40) as n:
        seen.append((n, torch.get_num_threads()))
    with pytest.raises(RuntimeError), chooser.batch(7):
        raise RuntimeError
    assert seen == [(3, 3)] and recorded == [(3, 40)] and torch.get_num_threads() == before
    with batch_threads(None, 40) as nothing:
        assert nothing is None and torch.get_num_threads() == before
    assert ThreadChooser.for_device(torch.device("meta")) is None and ThreadChooser.for_device(torch.device("cpu")).options[0] == before
