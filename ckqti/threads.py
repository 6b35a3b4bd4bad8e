"""Torch's CPU threads for a build or a rerank, chosen batch by batch by how fast batches go.

Torch's OpenMP threads spin-wait for each other at every operation, so when another job holds a
core a build on two threads waits for a descheduled thread again and again: 1,000 SciFact
abstracts with the bundled NDRM3 took 100-108 s on 2 threads beside a test run and 15.5 s on one
(session 42, docs/INDEX.md "Build threads"), while on quiet cores 2 threads are the faster (10.0
against 11.5 s); a rerank of the bundled sample's 12 queries beside two other jobs, 8.9-13.0 s
against 1.3-1.9 s (session 43). Which is faster depends on what else runs, and that changes during
a build, so :class:`ThreadChooser` measures: it tries both counts on the first batches, keeps the faster, and
tries the other again now and then (after :data:`PROBE_EVERY` batches, then twice as many each time it
stays the slower). Where torch's products are MKL's (x86) the results do not depend on the thread count: ckqti
asks MKL for strict conditional numerical reproducibility (``MKL_CBWR``, ckqti/__init__.py; without it a random
TK's rerank on 2 threads wrote scores 1e-6 apart from one thread's, session 44). Torch's own batched products of
small shapes still can (one of 8 to 13 single-document NDRM scores, 1e-6 apart), so that is not a guarantee
(tests/indexer/test_impacts.py builds
an index with the count switching every batch and compares it byte for byte with a one-thread build;
tests/retriever/test_rerank.py compares reranks likewise).
"""
from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext

import torch

PROBE_EVERY = 16  # batches between two tries of the count not in use, at first and after each switch
MAX_PROBE_EVERY = 128  # each try that does not switch doubles the interval, up to this many batches
EMA = 0.5  # weight of a batch's new measurement in the running cost of the count in use
WARMUP_BATCHES = 1  # not measured, on one thread: the first batch pays one-off costs (allocation, lazy set-up)


class ThreadChooser:
    """Chooses torch's intra-op thread count for each batch: ``most`` (torch's count when the build
    starts) or 1, whichever costs less per unit of work (a batch's padded tokens). After a warm-up
    batch on one thread each count runs one batch; then the cheaper one runs, and after ``probe_every`` batches
    the other one runs one, a probe. The count in use keeps a running average of its cost (one slow
    batch does not turn the choice); a probe's cost replaces the other count's (what it cost long
    ago says little about now), so one probe that finds it cheaper switches. A probe that does not
    switch doubles the batches until the next one, up to :data:`MAX_PROBE_EVERY` (a long build on
    quiet cores spends little on one thread); a switch starts again from ``probe_every``. The dearer
    the other count was found (by a ratio r), the later it is tried again: after at least ``r *
    probe_every`` batches (:meth:`spaced`; a short rerank beside other jobs, where two threads cost
    20x one, then never tries them again).

    ``most`` of 1 leaves nothing to choose: every batch runs on one thread.
    """

    def __init__(self, most: int, probe_every: int = PROBE_EVERY):
        if most < 1 or probe_every < 1:
            raise ValueError("most and probe_every must be >= 1")
        self.options = (most, 1) if most > 1 else (most,)
        self.probe_every = probe_every
        self.interval = probe_every  # batches from one probe (or from the first choice) to the next
        self.cost: dict[int, float] = {}  # thread count -> seconds per unit
        self.batches = 0
        self.since_probe = 0  # batches on the chosen count since the last probe (or the first choice)
        self._probe = False  # the count next() gave last is a probe

    @property
    def best(self) -> int:
        """The count with the lowest cost (``most`` until both are measured)."""
        if len(self.cost) < len(self.options):
            return self.options[0]
        return min(self.options, key=lambda n: self.cost[n])

    def next(self) -> int:
        """The thread count for the next batch (then :meth:`record` what it cost)."""
        self._probe = False
        if len(self.options) == 1 or self.batches < WARMUP_BATCHES:  # warm-up on one thread: beside other jobs
            return self.options[-1]  # two can cost 7x as much, on quiet cores 1.5x
        unmeasured = [n for n in self.options if n not in self.cost]
        if unmeasured:
            return unmeasured[0]
        if self.since_probe >= self.interval:
            self._probe = True
            return next(n for n in self.options if n != self.best)
        return self.best

    def record(self, threads: int, seconds: float, units: int) -> None:
        """What the batch :meth:`next` chose ``threads`` for cost: ``seconds`` for ``units`` of work."""
        self.batches += 1
        if self.batches <= WARMUP_BATCHES or units <= 0 or threads not in self.options:
            return
        per_unit = seconds / units
        if self._probe:
            before = self.best
            self.cost[threads] = per_unit
            self.interval = self.probe_every if self.best != before else self.spaced(2 * self.interval)
            self.since_probe = 0
            return
        settled = len(self.cost) == len(self.options)
        old = self.cost.get(threads)
        self.cost[threads] = per_unit if old is None else (1 - EMA) * old + EMA * per_unit
        self.since_probe += settled
        if not settled and len(self.cost) == len(self.options):  # both measured now: the first choice
            self.interval = self.spaced(self.probe_every)

    def spaced(self, batches: int) -> int:
        """Batches until the next probe: ``batches``, or more where the count not in use was dearer by a ratio
        r (``r * probe_every``: a probe costs r - 1 batches' worth more, and beside other jobs two threads cost
        up to 20x one), at most :data:`MAX_PROBE_EVERY`."""
        ratio = max(self.cost.values()) / max(min(self.cost.values()), 1e-30)
        return min(MAX_PROBE_EVERY, max(batches, round(ratio * self.probe_every)))


    @contextmanager
    def batch(self, units: int) -> Iterator[int]:
        """Runs the block, a batch of ``units`` of work, on the count :meth:`next` chooses (given to the
        block), and records what it cost (:meth:`record`) when it ends without an error."""
        threads = self.next()
        started = time.perf_counter()
        with torch_threads(threads):
            yield threads
        self.record(threads, time.perf_counter() - started, units)

    @classmethod
    def for_device(cls, device: torch.device) -> ThreadChooser | None:
        """A chooser between torch's count now and 1 on a CPU; None on another device (nothing to choose)."""
        return cls(torch.get_num_threads()) if device.type == "cpu" else None


def batch_threads(chooser: ThreadChooser | None, units: int) -> AbstractContextManager:
    """``chooser.batch(units)``, or a block that changes nothing when there is no chooser."""
    return nullcontext() if chooser is None else chooser.batch(units)


@contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """Torch's intra-op thread count set to ``n`` for a block, and set back after it."""
    before = torch.get_num_threads()
    if n != before:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        if n != before:
            torch.set_num_threads(before)
