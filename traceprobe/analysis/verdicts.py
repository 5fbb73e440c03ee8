"""Plain-English verdicts on each figure.

Thresholds (quoted by the README), applied to a fraction f of the figure:

- f >= 0.5: ``confirmed`` ("parallelism confirmed");
- 0.05 <= f < 0.5: ``partial`` ("partial overlap");
- f < 0.05: ``none`` ("no overlap"), with a hint on how to get overlap.

A figure whose denominator is zero (no copies, a single device, ...) gets no verdict,
nor do copies or communication taking under 1% of the trace's duration (``MIN_SHARE``),
and CPU/GPU overlap gets none unless both sides did real work (see
:func:`cpu_gpu_verdict`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from .overlap import CpuGpuOverlap

CONFIRMED = 0.5
PARTIAL = 0.05
MIN_SIDE = 0.05
MIN_SHARE = 0.01


@dataclass(frozen=True)
class Verdict:
    """One statement about one figure.

    Attributes:
        figure: ``copy_overlap``, ``device_concurrency``, ``stream_concurrency``,
            ``comm_overlap`` or ``cpu_gpu``.
        subject: what it is about, e.g. ``cuda:0 DtoH``.
        value: the fraction judged (0..1).
        level: ``confirmed``, ``partial`` or ``none``.
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


def copy_verdicts(
    copy: pd.DataFrame, same_stream: dict[int, bool], pageable: dict[tuple[int, str], bool], duration_ns: int = 0
) -> list[Verdict]:
    """Verdicts on copy/compute overlap, one per device and direction (not ``all``).

    Copies that take less than ``MIN_SHARE`` (1%) of ``duration_ns`` (the trace window's length) get no
    verdict: whether a few µs of copies overlapped does not matter to the run.

    ``same_stream[d]`` says whether every copy on d shared a stream with compute
    kernels; ``pageable[(d, direction)]`` whether any copy touched pageable memory.
    Both only shape the hint.
    """
    out = []
    for r in copy.itertuples(index=False):
        if r.direction == "all" or not (r.copy_ns > 0) or math.isnan(r.fraction) or r.copy_ns < MIN_SHARE * duration_ns:
            continue
        lvl = level_of(r.fraction)
        if same_stream.get(r.device):
            hint = "copies ran on the compute stream, so each waited for the compute before it; issue them on a separate stream ordered by CUDA events"
        else:
            hint = "copies ran while no compute kernel did; enqueue the next compute before waiting on a copy"
        if pageable.get((r.device, r.direction)):
            hint += "; pageable host memory makes copies staged and synchronous: copy into pinned memory"
        out.append(
            Verdict(
                "copy_overlap",
                f"cuda:{r.device} {r.direction}",
                float(r.fraction),
                lvl,
                f"{r.direction} copies on cuda:{r.device} overlapped by compute {r.fraction:.1%} "
                f"of their {ms(r.copy_ns)}: {_tail(lvl, hint)}",
            )
        )
    return out


def device_verdict(any_busy_ns: int, concurrent_ns: int, concurrency: float, device_count: int) -> list[Verdict]:
    """Verdict on cross-device concurrency (only with two or more devices)."""
    if device_count < 2 or any_busy_ns <= 0:
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


def stream_verdicts(streams: pd.DataFrame) -> list[Verdict]:
    """Verdicts on stream concurrency, for devices with two or more streams."""
    out = []
    for r in streams.itertuples(index=False):
        if r.streams < 2 or not (r.busy_ns > 0):
            continue
        lvl = level_of(r.concurrency)
        out.append(
            Verdict(
                "stream_concurrency",
                f"cuda:{r.device}",
                float(r.concurrency),
                lvl,
                f"two or more of {r.streams} streams on cuda:{r.device} busy at once {r.concurrency:.1%} "
                f"of its {ms(r.busy_ns)} busy time (kernels only: {r.kernel_concurrency:.1%}): "
                + _tail(lvl, "the streams took turns; independent work needs free SMs or copy engines to overlap"),
            )
        )
    return out


def comm_verdicts(comm: pd.DataFrame, duration_ns: int = 0) -> list[Verdict]:
    """Verdicts on communication/compute overlap, one per device (none under ``MIN_SHARE`` of ``duration_ns``)."""
    out = []
    for r in comm.itertuples(index=False):
        if not (r.comm_ns > 0) or r.comm_ns < MIN_SHARE * duration_ns:
            continue
        lvl = level_of(r.fraction)
        rank = "" if pd.isna(r.rank) else f" (rank {r.rank})"
        out.append(
            Verdict(
                "comm_overlap",
                f"cuda:{r.device}{rank}",
                float(r.fraction),
                lvl,
                f"NCCL kernels on cuda:{r.device}{rank} overlapped by compute {r.fraction:.1%} of their "
                f"{ms(r.comm_ns)}: "
                + _tail(lvl, "communication ran while compute waited; bucket gradients so all-reduce starts during backward"),
            )
        )
    return out


def cpu_gpu_verdict(c: CpuGpuOverlap) -> list[Verdict]:
    """Verdict on CPU/GPU overlap, judged on ``c.fraction_of_shorter``.

    No verdict unless both sides did real work: the shorter of host compute and
    device busy time must be at least ``MIN_SIDE`` (5%) of the longer; otherwise a
    0.1 ms host op under a 200 ms GPU run would "confirm" parallelism.
    """
    host_ns, gpu_ns, over_ns = c.host_compute_ns, c.device_busy_ns, c.overlapped_ns
    den = min(host_ns, gpu_ns)
    if den <= 0 or den < MIN_SIDE * max(host_ns, gpu_ns):
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
            + _tail(lvl, "the host computed while the GPU was idle; enqueue GPU work before CPU work, synchronize after"),
        )
    ]
