"""Plain-English verdicts on each figure.

Thresholds (quoted by docs/measures.md), applied to a fraction f of the figure:

- f >= 0.5: ``confirmed`` ("parallelism confirmed");
- 0.05 <= f < 0.5: ``partial`` ("partial overlap");
- f < 0.05: ``none`` ("no overlap"), with a hint on how to get overlap;
- ``n/a``, whatever f: copies that are not meant to overlap, the data-parallel
  wrapper's own copies into and out of its communication buffers (DDP's
  gradient buckets, FSDP's copy-in/out): their figure is given, not judged
  (:func:`copy_verdicts`).

A figure whose denominator is zero (no copies, a single device, ...) gets no verdict.
*The floor*, one for every verdict: no verdict is given on work that took under
``MIN_NS`` (50 µs) or under ``MIN_SHARE`` (1%) of the busy time it is judged
against (:func:`too_small`). The work judged, and what it is judged against:

- copy/compute overlap: a device's copies of one direction, against the
  device's busy time;
- communication/compute overlap: a device's communication kernels, against the
  device's busy time;
- stream concurrency: the time a device's streams other than the busiest were
  busy (``side_busy_ns``), against the device's busy time;
- cross-device concurrency: the busy time of the devices other than the busiest,
  summed, against the time any device was busy;
- CPU/GPU overlap: the shorter of host compute and device busy time, against
  the longer (and at least ``MIN_SIDE``, 5%, of it: :func:`cpu_gpu_verdict`);
- host-thread concurrency: the threads' op time beyond the busiest thread's,
  against the time any thread was busy (at least ``MIN_SIDE``).

:func:`omissions` names the copies, communication and side streams under the
floor, so nothing vanishes silently; ``parallelism`` (any ``confirmed`` verdict)
is therefore only ever set by work above it. Devices are named by the trace's
backend (``cuda:0``, ``hip:2``, ``mtia:17``) and hints speak its runtime's words
(CUDA, HIP or MTIA events and graphs). Hints are chosen to fit: see
:func:`stream_verdicts` and the report's copy and communication hints.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import pandas as pd

from ..device.overlap import CpuGpuOverlap


def columns(df: pd.DataFrame, *names: str) -> Iterator[tuple[Any, ...]]:
    """The rows of ``df``'s columns ``names``, as tuples of Python values (``Series.tolist``: NaN stays
    NaN, a missing nullable value is ``pd.NA``). Cheaper than ``itertuples``, which builds a namedtuple
    class on every call."""
    return zip(*(df[n].tolist() for n in names))


CONFIRMED = 0.5
PARTIAL = 0.05
MIN_SIDE = 0.05
MIN_SHARE = 0.01
MIN_NS = 50_000
"""The absolute floor of every verdict (module doc), in ns: 50 µs, a few kernel launches' worth of device time."""
MOSTLY_BUSY = 0.5

RUNTIME_WORDS = {"cuda": "CUDA", "hip": "HIP", "mtia": "MTIA"}
"""The runtime's name for each backend, as hints say it (``CUDA events``, ``HIP graphs``)."""


def wrapper_copy_words(collectives: tuple[str, ...]) -> str:
    """What DtoD copies beside a data-parallel wrapper's ``collectives`` are, and the one setting that removes them
    (:func:`..job.comm_types.wrapper_copy_devices`): the copy verdict's hint and the findings' advice, in one place."""
    return (f"DtoD copies beside {'/'.join(collectives)} are the data-parallel wrapper's own copies into and out of its "
            "communication buffers (DDP's gradient buckets: gradient_as_bucket_view=True removes them; FSDP's copy-in/out), "
            "not copies to move to another stream")


def device_name(backend: str, device: int) -> str:
    """How a verdict names a device: ``cuda:0``, ``hip:2``, ``mtia:17`` (as :meth:`traceprobe.reading.Trace.device_label`)."""
    return f"{backend}:{device}"


def runtime_word(backend: str) -> str:
    """``CUDA``, ``HIP`` or ``MTIA``: the runtime whose events and graphs a hint names."""
    return RUNTIME_WORDS.get(backend, backend.upper())


@dataclass(frozen=True)
class Verdict:
    """One statement about one figure.

    Attributes:
        figure: ``copy_overlap``, ``device_concurrency``, ``stream_concurrency``,
            ``comm_overlap`` or ``cpu_gpu``.
        subject: what it is about, e.g. ``cuda:0 DtoH``.
        value: the fraction judged (0..1).
        level: ``confirmed``, ``partial``, ``none`` or ``n/a`` (measured, not judged).
        text: the sentence printed for a person.
    """

    figure: str
    subject: str
    value: float
    level: str
    text: str


def level_of(f: float) -> str:
    """``confirmed``/``partial``/``none`` for a fraction (thresholds in the module doc)."""
    if f >= CONFIRMED:
        return "confirmed"
    if f >= PARTIAL:
        return "partial"
    return "none"


def _tail(level: str, none_hint: str) -> str:
    if level == "confirmed":
        return "parallelism confirmed"
    if level == "partial":
        return "partial overlap"
    return f"no overlap: {none_hint}"


def ms(ns: float) -> str:
    """Format ns as milliseconds for verdict text."""
    return f"{ns / 1e6:.1f} ms"


def _share(ns: int, busy_ns: int) -> str:
    return f"{ns / busy_ns:.1%} of its {ms(busy_ns)} busy time" if busy_ns > 0 else "no busy time"


def too_small(ns: int, busy_ns: int) -> bool:
    """The floor (module doc): work of ``ns`` under ``MIN_NS`` (50 µs) or under ``MIN_SHARE`` (1%) of the busy time
    ``busy_ns`` it is judged against gets no verdict: it cannot matter to the run."""
    return ns < MIN_NS or ns < MIN_SHARE * busy_ns


def _floor() -> str:
    return f"under the floor ({MIN_SHARE:.0%} of busy time, {MIN_NS / 1e3:.0f} µs), no verdict"


NOT_JUDGED = "n/a"
"""The level of a figure measured but not judged (module doc)."""


def copy_verdicts(copy: pd.DataFrame, busy_ns: dict[int, int], hints: dict[tuple[int, str], str], backend: str = "cuda",
                  not_meant: frozenset[tuple[int, str]] = frozenset()) -> list[Verdict]:
    """Verdicts on copy/compute overlap, one per device and direction (not ``all``).

    Copies under the floor (:func:`too_small`) against their device's busy time
    (``busy_ns[device]``, union of its streams, not the trace span that start-up
    idle can inflate) get no verdict; :func:`omissions` says so.
    ``hints[(device, direction)]`` is the hint a ``none`` verdict gives (see
    ``report._copy_hints``); ``backend`` names the devices. The (device, direction)
    pairs of ``not_meant`` hold copies not meant to overlap (a data-parallel
    wrapper's): level ``n/a`` whatever their overlap, the hint saying why.
    """
    out = []
    for d, direction, copy_ns, f in columns(copy, "device", "direction", "copy_ns", "fraction"):
        d, direction, copy_ns, f = int(d), str(direction), int(copy_ns), float(f)
        if direction == "all" or copy_ns <= 0 or math.isnan(f) or too_small(copy_ns, busy_ns.get(d, 0)):
            continue
        lvl = NOT_JUDGED if (d, direction) in not_meant else level_of(f)
        tail = f"not judged: {hints.get((d, direction), '')}" if lvl == NOT_JUDGED else _tail(lvl, hints.get((d, direction), ""))
        out.append(
            Verdict(
                "copy_overlap",
                f"{device_name(backend, d)} {direction}",
                f,
                lvl,
                f"{direction} copies on {device_name(backend, d)} overlapped by compute {f:.1%} of their {ms(copy_ns)}: " + tail,
            )
        )
    return out


def device_verdict(any_busy_ns: int, concurrent_ns: int, concurrency: float, device_count: int,
                   busy_ns: dict[int, int] | None = None) -> list[Verdict]:
    """Verdict on cross-device concurrency (only with two or more devices).

    None under the floor (:func:`too_small`): the busy time of the devices other
    than the busiest (from ``busy_ns``, per device; summed), against
    ``any_busy_ns``. Without ``busy_ns`` only ``any_busy_ns`` is held to ``MIN_NS``.
    """
    others = sum(busy_ns.values()) - max(busy_ns.values()) if busy_ns else any_busy_ns
    if device_count < 2 or any_busy_ns <= 0 or too_small(others, any_busy_ns):
        return []
    lvl = level_of(concurrency)
    return [
        Verdict(
            "device_concurrency",
            f"{device_count} devices",
            concurrency,
            lvl,
            f"two or more of {device_count} devices busy at once {concurrency:.1%} of the "
            f"{ms(any_busy_ns)} any device was busy: "
            + _tail(lvl, "devices ran one after another; launch work on all devices before synchronizing"),
        )
    ]


def stream_verdicts(streams: pd.DataFrame, utilization: dict[int, float], backend: str = "cuda") -> list[Verdict]:
    """Verdicts on stream concurrency, judged on ``side_concurrency`` (see :mod:`.concurrency`).

    Devices with two or more streams only, and none under the floor
    (:func:`too_small`): the time the streams other than the busiest were busy
    (``side_busy_ns``) against the device's busy time (``busy_ns``);
    :func:`omissions` says so. The ``none`` hint depends on
    ``utilization[device]``: below ``MOSTLY_BUSY`` (50%) the device was mostly
    idle, so the streams were short of work, not of free SMs.
    """
    out = []
    rt = runtime_word(backend)
    for d, n, side_ns, multi_ns, f, concurrency, kernel_concurrency, busy in columns(
            streams, "device", "streams", "side_busy_ns", "multi_stream_ns", "side_concurrency", "concurrency", "kernel_concurrency", "busy_ns"):
        d, n, side_ns, multi_ns = int(d), int(n), int(side_ns), int(multi_ns)
        if n < 2 or side_ns <= 0 or too_small(side_ns, int(busy)):
            continue
        f = float(f)
        lvl = level_of(f)
        u = utilization.get(d, float("nan"))
        if not u < MOSTLY_BUSY:  # busy enough, or unknown
            hint = "the streams took turns; independent work needs free SMs or copy engines to overlap"
        else:
            hint = (f"the device was busy only {u:.0%} of the trace: the work is launch-bound, not short of SMs; "
                    f"launch fewer, larger kernels (fuse ops, {rt} graphs)")
        out.append(
            Verdict(
                "stream_concurrency",
                device_name(backend, d),
                f,
                lvl,
                f"two or more of {n} streams on {device_name(backend, d)} busy at once for {ms(multi_ns)}, {f:.1%} of the {ms(side_ns)} "
                f"its streams other than the busiest were busy ({float(concurrency):.1%} of all its busy time, "
                f"kernels only {float(kernel_concurrency):.1%}): " + _tail(lvl, hint),
            )
        )
    return out


def comm_verdicts(comm: pd.DataFrame, busy_ns: dict[int, int], hints: dict[int, str], backend: str = "cuda") -> list[Verdict]:
    """Verdicts on communication/compute overlap, one per device.

    None under the floor (:func:`too_small`) against the device's busy time
    (:func:`omissions` says so); ``hints[device]`` is the ``none`` hint, chosen by
    the collectives that ran and whether the trace trains (see
    ``report._comm_hints``).
    """
    out = []
    for d, comm_ns, f, rank_ in columns(comm, "device", "comm_ns", "fraction", "rank"):
        d, comm_ns, f = int(d), int(comm_ns), float(f)
        if comm_ns <= 0 or too_small(comm_ns, busy_ns.get(d, 0)):
            continue
        lvl = level_of(f)
        rank = "" if pd.isna(rank_) else f" (rank {rank_})"
        out.append(
            Verdict(
                "comm_overlap",
                f"{device_name(backend, d)}{rank}",
                f,
                lvl,
                f"communication kernels on {device_name(backend, d)}{rank} overlapped by compute {f:.1%} of their {ms(comm_ns)}: " + _tail(lvl, hints.get(d, "")),
            )
        )
    return out


def waited(v: Verdict, wait_ns: int, late: int) -> Verdict:
    """A ``none`` communication verdict (:func:`comm_verdicts`) of a rank whose exposed communication was mostly a wait
    for the late rank ``late`` (``wait_ns``, its exposed wait for that rank: :func:`..job.causes.with_causes`), told so
    in place of its own hint, as its ``wait`` finding tells it: overlapping the collectives on this rank would not help."""
    head = v.text.rsplit("no overlap: ", 1)[0]
    return replace(v, text=f"{head}no overlap: {ms(wait_ns)} of it waited for rank {late}, which arrived last at these "
                           f"collectives: overlap here would not help; see rank {late}'s own findings")


def omissions(copy: pd.DataFrame, comm: pd.DataFrame, busy_ns: dict[int, int], streams: pd.DataFrame | None = None,
              backend: str = "cuda") -> list[str]:
    """One line for each copy direction, device's communication or device's side streams that exist but get no
    verdict (under the floor, :func:`too_small`)."""
    out = []
    for d, direction, copy_ns, copies in columns(copy, "device", "direction", "copy_ns", "copies"):
        d, direction, copy_ns = int(d), str(direction), int(copy_ns)
        if direction != "all" and copy_ns > 0 and too_small(copy_ns, busy_ns.get(d, 0)):
            out.append(f"{int(copies):,} {direction} copies on {device_name(backend, d)} took {ms(copy_ns)}, "
                       f"{_share(copy_ns, busy_ns.get(d, 0))}: {_floor()}")
    for d, comm_ns, comm_kernels in columns(comm, "device", "comm_ns", "comm_kernels"):
        d, comm_ns = int(d), int(comm_ns)
        if comm_ns > 0 and too_small(comm_ns, busy_ns.get(d, 0)):
            out.append(f"{int(comm_kernels):,} communication kernels on {device_name(backend, d)} took {ms(comm_ns)}, "
                       f"{_share(comm_ns, busy_ns.get(d, 0))}: {_floor()}")
    if streams is not None and not streams.empty:
        for d, n, side_ns, busy in columns(streams, "device", "streams", "side_busy_ns", "busy_ns"):
            d, side_ns, busy = int(d), int(side_ns), int(busy)
            if int(n) >= 2 and side_ns > 0 and too_small(side_ns, busy):
                out.append(f"the streams of {device_name(backend, d)} other than the busiest were busy {ms(side_ns)}, "
                           f"{_share(side_ns, busy)}: stream concurrency {_floor()}")
    return out


def cpu_gpu_verdict(c: CpuGpuOverlap) -> list[Verdict]:
    """Verdict on CPU/GPU overlap, judged on ``c.fraction_of_shorter``.

    No verdict unless both sides did real work: the shorter of host compute and
    device busy time must be at least ``MIN_SIDE`` (5%) of the longer, and at
    least ``MIN_NS``; otherwise a 0.1 ms host op under a 200 ms GPU run would
    "confirm" parallelism.
    """
    host_ns, gpu_ns, over_ns = c.host_compute_ns, c.device_busy_ns, c.overlapped_ns
    den = min(host_ns, gpu_ns)
    if den <= 0 or den < MIN_SIDE * max(host_ns, gpu_ns) or too_small(den, max(host_ns, gpu_ns)):
        return []
    f = c.fraction_of_shorter
    lvl = level_of(f)
    return [
        Verdict(
            "cpu_gpu",
            "host and devices",
            f,
            lvl,
            f"host compute ({ms(host_ns)}) and device work ({ms(gpu_ns)}) ran at once for {ms(over_ns)}, "
            f"{f:.1%} of the shorter: "
            + _tail(lvl, "the host computed while the device was idle; enqueue device work before CPU work, synchronize after"),
        )
    ]
