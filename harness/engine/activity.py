"""What a run is doing now, for its progress display: which cells run, in which stage since when, and
how long the rest should take.

The executors tell an `Activity` when a cell starts, each stage it enters (`dpgym.engine.cell.STAGE_LISTENER`)
and when it ends; supervisor threads do so concurrently, hence the lock. The estimate of the time
left uses what this run directory has measured: each method's mean wall time per finished cell
(earlier runs' cells included), else the mean over every method, else none yet.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Running:
    """A running cell as the display shows it."""

    key: str
    title: str
    method: str  # the method's display label: what its expected duration is keyed by
    stage: str
    cell_seconds: float
    stage_seconds: float


@dataclass
class _State:
    title: str
    method: str
    started: float
    stage: str
    stage_started: float


class Activity:
    """Running cells and their stages, plus measured cell durations per method."""

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self._clock = clock
        self._lock = threading.Lock()
        self._running: dict[str, _State] = {}
        # Sum and count of measured cell seconds, per method and over all (key None): the display
        # asks for expectations at every refresh, once per queued cell.
        self._totals: dict[str | None, list[float]] = defaultdict(lambda: [0.0, 0])

    def measured(self, method: str, seconds: float) -> None:
        """A finished cell of `method` took `seconds` (this run's, or an earlier run's in the same directory)."""
        with self._lock:
            for key in (method, None):
                self._totals[key][0] += seconds
                self._totals[key][1] += 1

    def start(self, key: str, title: str, method: str) -> None:
        now = self._clock()
        with self._lock:
            self._running[key] = _State(title, method, now, "starting", now)

    def stage(self, key: str, label: str) -> None:
        with self._lock:
            state = self._running.get(key)
            if state is not None and state.stage != label:
                state.stage, state.stage_started = label, self._clock()

    def finish(self, key: str) -> None:
        with self._lock:
            self._running.pop(key, None)

    def running(self) -> list[Running]:
        now = self._clock()
        with self._lock:
            return [Running(key, s.title, s.method, s.stage, now - s.started, now - s.stage_started)
                    for key, s in self._running.items()]

    def expected(self, method: str) -> float | None:
        """Mean measured seconds of one cell of `method`; of any cell when `method` has none yet."""
        with self._lock:
            total, count = self._totals[method] if method in self._totals else self._totals.get(None, (0.0, 0))
        return total / count if count else None

    def seconds_left(self, queued: Iterable[str], workers: int) -> float | None:
        """Estimated wall seconds until the last cell ends: the queued cells' expected durations (by
        method) plus what the running ones have left, shared by `workers`. None until a cell has been
        measured. A running cell past its expected duration counts as about to end."""
        work = 0.0
        for method in queued:
            expected = self.expected(method)
            if expected is None:
                return None
            work += expected
        for cell in self.running():
            expected = self.expected(cell.method)
            if expected is None:
                return None
            work += max(expected - cell.cell_seconds, 0.0)
        return work / max(workers, 1)
