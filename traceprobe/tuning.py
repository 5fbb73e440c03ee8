"""Process settings for the analysis commands, made before numpy loads: BLAS threads, glibc's malloc, the garbage collector.

:func:`tune` is called by the command entry point (:func:`traceprobe.launch.entry`)
for every command but ``record`` (which runs torch and the user's program with
their own settings). Library callers are left alone. A variable the user has
set is never overridden.

- **BLAS threads off** (:data:`BLAS_THREADS` set to 1): the analysis does no
  matrix products, and idle BLAS threads only spin.
- **malloc keeps its freed memory for the next trace** (:data:`MALLOC`): by
  default glibc gives every allocation above a few hundred KB its own ``mmap``
  and returns it to the system when freed, so each trace's columns are faulted
  in page by page again. With a fixed 32 MiB mmap threshold (the largest value
  glibc's own adaptive threshold reaches), 64 MiB kept at the top of the heap and
  16 MiB of headroom per heap extension, freed memory is reused instead.
  Measured on a batch of 100 rank traces of 10^4 events (2 CPUs): system time
  0.66 -> 0.19 s, wall time 3.08 -> 2.71 s (medians of 5, alternating); peak
  memory unchanged. The same settings as glibc's ``MALLOC_MMAP_THRESHOLD_``,
  ``MALLOC_TRIM_THRESHOLD_`` and ``MALLOC_TOP_PAD_`` variables, which must be set
  before a process starts; made here with ``mallopt``, on glibc only.
- **No cyclic garbage collection while the analysis is imported**: :func:`tune`
  pauses the collector, and :func:`imports_done` (called once the analysis is
  imported, before any trace is analysed or worker forked) moves every object
  made so far into the permanent generation (``gc.freeze``: modules and classes,
  which are never garbage) and resumes it. Without this, importing pandas ran
  about 150 collections, one of them a full one over every module's objects
  (12-20 ms). HTA's 216k-event trace: 28 -> 1.5 ms of collection in the command's
  process; a batch of 100 rank traces of 10^4 events: 65 -> 7 ms in each worker.
  ``collect.analyze_paths`` and ``overlap-report --engine perfetto`` call it; a
  command that loads no trace (``schema``, ``view``, usage errors) ends with the
  collector still paused, having made little garbage.
"""

from __future__ import annotations

import gc
import os
import sys

BLAS_THREADS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
"""Set to 1 unless set already."""

MALLOC = {"MALLOC_MMAP_THRESHOLD_": (-3, 32 << 20), "MALLOC_TRIM_THRESHOLD_": (-1, 64 << 20), "MALLOC_TOP_PAD_": (-2, 16 << 20)}
"""glibc variable -> (``mallopt`` parameter, bytes): ``M_MMAP_THRESHOLD``, ``M_TRIM_THRESHOLD``, ``M_TOP_PAD``."""


_GC_HELD = [False]


def tune() -> None:
    """Make the settings of the module docstring in this process (and the processes it forks)."""
    if gc.isenabled():
        gc.disable()
        _GC_HELD[0] = True
    for k in BLAS_THREADS:
        os.environ.setdefault(k, "1")
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt  # glibc; absent from musl
    except (OSError, AttributeError):
        return
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    for var, (param, value) in MALLOC.items():
        if var not in os.environ:
            mallopt(param, value)


def imports_done() -> None:
    """The analysis is imported: the objects made so far (modules, classes) are set aside from the
    cyclic garbage collector for good (``gc.freeze``), and :func:`tune`'s pause of it ends."""
    if _GC_HELD[0]:
        _GC_HELD[0] = False
        gc.freeze()
        gc.enable()


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity where the system tells it, else the CPU count), at least 1.
    (Here, not in :mod:`traceprobe.execution`: the decoding forked before the options are parsed asks for it,
    and importing ``multiprocessing`` there cost 5 ms before the fork.)"""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
