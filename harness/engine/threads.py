"""The cores a run may use, and each cell's share of them.

The executors give every cell process its share through OMP_NUM_THREADS (and the like); plugins
that parallelise by hand ask `cell_threads`, so that parallel workers don't oversubscribe the cores.
"""

from __future__ import annotations

import os


def cpu_count() -> int:
    """Cores this process may use (respects affinity masks and cgroup cpusets)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def cell_threads() -> int:
    """CPU threads the running cell may use: its worker's share of the cores (the runner sets
    OMP_NUM_THREADS in each cell process) or, run serially, every core. Plugins that parallelise
    by hand (joblib's n_jobs) ask here."""
    granted = os.environ.get("OMP_NUM_THREADS", "")
    return int(granted) if granted.isdigit() and int(granted) > 0 else cpu_count()
