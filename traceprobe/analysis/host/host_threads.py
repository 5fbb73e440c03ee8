"""Host-thread concurrency: did two or more host threads compute at once?

This is the figure a CPU-only trace can be judged by (``record --device cpu``,
the ``small-ops.cpu-threads`` experiment, data loaders), where the device figures
have nothing to say.

Definition. For each host thread (``pid``, ``tid``), T_i is the union of its
``cpu_op`` events (Kineto category ``cpu_op``; nested ops count once). Then:

- ``busy_ns`` = |T_1 ∪ ... ∪ T_n|: time at least one thread was in an op;
- ``multi_thread_ns`` = time at least two threads were in an op at once;
- ``concurrency`` = ``multi_thread_ns`` / ``busy_ns`` (the raw figure);
- ``fair_concurrency`` = (Σ|T_i| − ``busy_ns``) / (Σ|T_i| − max|T_i|): the thread
  time that ran beside another thread, over the most that could have (all threads
  but the busiest running under it). With two threads this is
  ``multi_thread_ns`` / |shorter thread|; it is 1 when every thread ran wholly
  beside another and 0 when they took turns. The verdict judges this one, as
  stream concurrency is judged against all but the busiest stream: a worker
  thread that ran wholly beside a long main thread is concurrency however short
  it was.

HTA and TraceLens report no host-thread figure; this one is traceprobe's.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ... import intervals as iv
from ...reading import Trace
from ..advice.verdicts import MIN_SIDE, Verdict, level_of, ms, too_small
from ..device.busy import cpu_ops, fraction, host_thread_codes
from ..memo import host_column


@dataclass(frozen=True)
class HostThreadConcurrency:
    """Host-thread concurrency of one trace (definitions in the module docstring).

    Attributes:
        threads: host threads with at least one ``cpu_op`` of non-zero length.
        busy_ns: time at least one thread was in an op, ns.
        multi_thread_ns: time two or more threads were in an op at once, ns.
        thread_ns_sum: Σ|T_i| over threads, ns.
        busiest_thread_ns: max|T_i|, ns (0 without threads).
        concurrency: ``multi_thread_ns / busy_ns`` (NaN when ``busy_ns`` is 0).
        fair_concurrency: ``(thread_ns_sum - busy_ns) / (thread_ns_sum - busiest_thread_ns)``
            (NaN with fewer than two threads).
    """

    threads: int
    busy_ns: int
    multi_thread_ns: int
    thread_ns_sum: int
    busiest_thread_ns: int
    concurrency: float
    fair_concurrency: float


def host_thread_concurrency(trace: Trace) -> HostThreadConcurrency:
    """Host-thread concurrency of ``trace`` (module docstring); never raises on empty traces."""
    host = trace.host_events
    is_op = cpu_ops(trace) if not host.empty else np.zeros(0, bool)
    if not is_op.any():
        return HostThreadConcurrency(0, 0, 0, 0, 0, float("nan"), float("nan"))
    thread = host_thread_codes(trace)[is_op]
    k, s, e = iv.grouped_union(thread, host_column(trace, "start_ns")[is_op], host_column(trace, "end_ns")[is_op])
    if s.size == 0:
        return HostThreadConcurrency(0, 0, 0, 0, 0, float("nan"), float("nan"))
    bounds = np.flatnonzero(np.diff(k)) + 1
    per_thread = list(zip(np.split(s, bounds), np.split(e, bounds)))
    lengths = np.array([int((te - ts).sum()) for ts, te in per_thread], dtype=np.int64)
    busy = iv.length(iv.coverage_at_least(per_thread, 1))
    multi = iv.length(iv.coverage_at_least(per_thread, 2)) if len(per_thread) > 1 else 0
    total, top = int(lengths.sum()), int(lengths.max())
    fair = fraction(total - busy, total - top) if len(per_thread) > 1 else float("nan")
    return HostThreadConcurrency(len(per_thread), busy, multi, total, top, fraction(multi, busy), fair)


def host_thread_verdict(h: HostThreadConcurrency, has_device_work: bool) -> list[Verdict]:
    """The verdict on host-thread concurrency, judged on ``fair_concurrency``.

    Given only for traces without device work (on a GPU trace the host threads are
    launchers and the device figures speak), with two or more threads whose work
    beyond the busiest thread is at least ``MIN_SIDE`` (5%) of ``busy_ns`` and at least
    the floor's ``MIN_NS``; thresholds as in :mod:`.verdicts`.
    """
    other = h.thread_ns_sum - h.busiest_thread_ns
    if has_device_work or h.threads < 2 or h.busy_ns <= 0 or other < MIN_SIDE * h.busy_ns or too_small(other, h.busy_ns):
        return []
    f = h.fair_concurrency
    level = level_of(f)
    if level == "none":
        tail = "no overlap: the host threads took turns (a lock or the GIL serialises them; ops that release the GIL, or processes, can run at once)"
    else:
        tail = "parallelism confirmed" if level == "confirmed" else "partial overlap"
    text = (f"host threads: {f:.1%} of the other threads' op time ran beside another thread "
            f"({ms(h.thread_ns_sum - h.busy_ns)} of {ms(other)}; {h.threads} threads, "
            f"two or more busy {h.concurrency:.1%} of {ms(h.busy_ns)}): {tail}")
    return [Verdict("host_threads", f"{h.threads} host threads", f, level, text)]
