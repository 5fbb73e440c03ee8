"""CI gates: which reports fall short of a required overlap or concurrency, or exceed a limit.

Each gate of :data:`GATES` names the figure it judges by its key in the JSON document's
figures (:func:`.figures.figure`) and reads its values from that figure's value in the
trace's JSON object (:func:`.figures.value`), so a gate fails exactly where the document
shows the value past the threshold. Every gate is judged per device of every trace, so
per rank in a distributed run (one trace per rank): a run fails when any of its ranks
does. The CLI's options (``--min-copy-overlap`` ...) are the gates' names.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ..analysis.advice.verdicts import NOT_JUDGED, device_name
from ..analysis.device.busy import fraction
from ..analysis.per_trace import OverlapReport
from .figures import figure, value

Values = Iterable[tuple[int | None, Any]]
"""(device, value) pairs a gate judges; device None for a figure of the whole trace."""


@dataclass(frozen=True)
class Gate:
    """One threshold on one figure.

    Attributes:
        name: the keyword of :func:`shortfalls` (the CLI option, ``min_copy_overlap`` is
            ``--min-copy-overlap``).
        figure: the key of the figure it judges (:data:`.figures.TRACE`).
        label: what the failure line calls the value.
        bound: ``min`` (fails below the threshold) or ``max`` (fails above it).
        read: the (device, fraction) pairs to judge, from the figure's value in the JSON
            object; None and NaN values are not judged (an undefined figure).
        of: said after the value (``" of the window"``).
        skip: whether a trace's device is left unjudged (None: every device is judged).
    """

    name: str
    figure: str
    label: str
    bound: str
    read: Callable[[Any], Values]
    of: str = ""
    skip: Callable[[OverlapReport, int | None], bool] | None = None


def _of_window(column: str) -> Callable[[Any], Values]:
    """Per device row of a breakdown: ``column / window_ns`` (:func:`traceprobe.analysis.device.breakdown.gpu_breakdown`)."""
    return lambda rows: [(b["device"], fraction(int(b[column]), int(b["window_ns"]))) for b in rows]


def _copies_not_judged(r: OverlapReport, device: int | None) -> bool:
    """Every copy verdict of ``device`` is ``n/a`` (copies not meant to overlap, such as a data-parallel wrapper's
    bucket copies: :func:`traceprobe.analysis.advice.verdicts.copy_verdicts`), so the gate does not judge them either."""
    if device is None:
        return False
    name = f"{device_name(r.backend, device)} "
    levels = [v.level for v in r.verdicts if v.figure == "copy_overlap" and v.subject.startswith(name)]
    return bool(levels) and all(lv == NOT_JUDGED for lv in levels)


GATES: tuple[Gate, ...] = (
    Gate("min_copy_overlap", "copy_overlap", "copy/compute overlap", "min",
         lambda rows: [(c["device"], c["fraction"]) for c in rows if c["direction"] == "all"], skip=_copies_not_judged),
    Gate("min_device_concurrency", "device_concurrency", "cross-device concurrency", "min",
         lambda d: [(None, d["concurrency"])] if d["device_count"] >= 2 else []),
    Gate("max_exposed_comm", "breakdown", "exposed communication", "max", _of_window("exposed_comm_ns"), " of the window"),
    Gate("max_idle", "breakdown", "idle time", "max", _of_window("idle_ns"), " of the window"),
)
"""The gates, in the order their failures are listed for each trace."""


def _where(r: OverlapReport, device: int | None = None) -> str:
    rank = f" rank {r.rank}" if r.rank is not None else ""
    dev = f" {r.backend}:{device}" if device is not None else ""
    return f"{r.path}:{rank}{dev}"


def shortfalls(reports: list[OverlapReport], **limits: float | None) -> list[str]:
    """One line per trace, gate and device past its threshold (empty: every gate passed), e.g. ``x.json: cuda:0 idle
    time: 30.0% of the window is above the 5.0% limit``.

    Args:
        limits: a threshold by gate name (None: not judged):
            ``min_copy_overlap``: least copy/compute overlap (the ``all`` row, per device; a device whose copy
            verdicts are all ``n/a``, copies not meant to overlap, is not judged);
            ``min_device_concurrency``: least cross-device concurrency, for traces with
            two or more devices; ``max_exposed_comm``: most exposed communication per
            device, as a fraction of the window (``exposed_comm_ns / window_ns`` of
            :func:`traceprobe.analysis.device.breakdown.gpu_breakdown`); ``max_idle``: most idle
            time per device, as a fraction of the window (``idle_ns / window_ns``).

    Raises:
        ValueError: a name that is no gate of :data:`GATES`.
    """
    unknown = set(limits) - {g.name for g in GATES}
    if unknown:
        raise ValueError(f"no such gate: {', '.join(sorted(unknown))} (one of {', '.join(g.name for g in GATES)})")
    judged = [(g, limit) for g in GATES if (limit := limits.get(g.name)) is not None]
    out = []
    for r in reports:
        for g, limit in judged:
            for device, v in g.read(value(figure(g.figure), r)):
                if v is None or math.isnan(v) or (g.skip is not None and g.skip(r, device)):
                    continue
                if g.bound == "min" and v < limit:
                    out.append(f"{_where(r, device)} {g.label}: {v:.1%}{g.of} is below the {limit:.1%} minimum")
                elif g.bound == "max" and v > limit:
                    out.append(f"{_where(r, device)} {g.label}: {v:.1%}{g.of} is above the {limit:.1%} limit")
    return out
