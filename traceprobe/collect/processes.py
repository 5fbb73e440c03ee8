"""How many processes a command's work takes: worker processes for a folder of traces (:func:`local_jobs`), work
beside them in this process (:func:`work_beside`), and the processes that decode one large trace (:func:`decoders`);
:mod:`.execution` runs the work on them."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

POOL_BYTES = 6 << 20
"""Trace bytes (decompressed; a ``.gz`` file counted at ten times its size, about traces' ratio) below which
:func:`local_jobs` runs the files in this process by default: a worker process costs about 25 ms of CPU to start
and to warm up on its first file (the fork, copy-on-write faults, every cache built again), and each report
3-4 ms to pickle and unpickle, which a few small files do not give back (two SYNTHETIC traces of 500 events: 0.06 s
more CPU in two workers, no less wall time). About two SYNTHETIC rank traces of 10^4 events."""


def trace_bytes(files: Sequence[Any], stop: int | None = None) -> int | None:
    """The trace bytes of local ``files`` as :data:`POOL_BYTES` counts them (a ``.gz`` file at ten times its size),
    counted until they reach ``stop`` where given; None where one is a URL string or cannot be read."""
    if any(isinstance(f, str) for f in files):
        return None
    total = 0
    for f in files:
        try:
            size = os.stat(f).st_size
        except OSError:
            return None
        total += size * 10 if str(f).endswith(".gz") else size
        if stop is not None and total >= stop:
            break
    return total


def local_jobs(files: Sequence[Any], jobs: int | None) -> int | None:
    """The worker processes for ``files`` (local paths, or URL strings): ``jobs`` where given; else 1 (this process)
    where they are local files of fewer than :data:`POOL_BYTES` in all, and None (:func:`default_jobs`) otherwise
    (a URL's size is not asked for)."""
    if jobs is not None:
        return jobs
    total = trace_bytes(files, POOL_BYTES)
    return 1 if total is not None and total < POOL_BYTES else None


ONE_FILE_BESIDE_BYTES = 128 << 20
"""Trace bytes (as :data:`POOL_BYTES` counts them) of one file above which :func:`work_beside` keeps it here: reading
and analysing it takes over 2 s (SYNTHETIC 10^6 events, 289 MiB of JSON: 2.5 s on the 2-CPU benchmark machine), so
the 0.45 s overlapped is under a fifth of it, while a worker holds the trace beside this process (200 MB more)."""


def work_beside(files: Sequence[Any], jobs: int | None) -> bool:
    """Whether this process should run work of its own in a thread (:func:`map_items`'s ``beside``) while local worker
    processes read ``files``: where workers run them (:func:`local_jobs` not 1), this process has a CPU of its own
    beside them (two or more usable CPUs: on one, the thread only takes the workers' time), and one file, where it is
    one, is at most :data:`ONE_FILE_BESIDE_BYTES` (a URL's size is not known: kept here)."""
    if local_jobs(files, jobs) == 1 or usable_cpus() < 2:
        return False
    if len(files) > 1:
        return True
    total = trace_bytes(files)
    return total is not None and total <= ONE_FILE_BESIDE_BYTES


SHARE_BYTES = 16 << 20
"""Trace bytes (as :data:`POOL_BYTES` counts them) of one trace for each process that decodes it
(:func:`decoders`): each reads, inflates and cuts the whole file, and the fork, the hand-over and the merge cost
about 25 ms, which a trace of 16 MB of JSON (about 0.1 s to decode) gives back on 2 CPUs."""

MAX_DECODERS = 8
"""The most processes that decode one trace: each also inflates and cuts the whole file (a seventh of its read at
10^6 events), so that more give little back."""


def decoders(files: Sequence[Any], jobs: int | None) -> int:
    """The processes that decode ``files`` where they are one local trace analysed in this process
    (:func:`traceprobe.reading.shares.read_events_shared`): one per :data:`SHARE_BYTES` of it, at most
    :data:`MAX_DECODERS`, the usable CPUs and ``jobs``; 1 (this process alone) for several files, a URL, a trace
    under :data:`SHARE_BYTES` or ``jobs`` 1."""
    if len(files) != 1 or jobs == 1:
        return 1
    total = trace_bytes(files)
    if total is None or total < SHARE_BYTES:
        return 1
    return max(1, min(-(-total // SHARE_BYTES), MAX_DECODERS, usable_cpus(), jobs or MAX_DECODERS))


def default_jobs(n_items: int, jobs: int | None = None) -> int:
    """Worker processes for ``n_items`` items: ``jobs`` (default: the CPU count), at most one per item, at least 1."""
    n = jobs if jobs and jobs > 0 else (os.cpu_count() or 1)
    return max(1, min(n, n_items))


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity where the system tells it, else the CPU count), at least 1."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
