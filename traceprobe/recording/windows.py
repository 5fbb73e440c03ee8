"""Which steps of a run a capture records: windows of a ``torch.profiler.schedule``.

Code that never calls ``traceprobe.step()`` (or :meth:`Capture.step`) is profiled
whole: one trace, variant ``run``, from start to stop. Code that calls it is
profiled in windows chosen by a ``torch.profiler.schedule`` of ``wait``,
``warmup``, ``active`` and ``repeat`` steps, with torch's meaning: step *n* runs
from the *n*-th ``step()`` call to the next (step 0 from the start to the first
call), each cycle skips ``wait`` steps, warms the profiler up for ``warmup``
steps and records ``active`` steps, and ``repeat`` cycles are done (0: until the
run ends). Each recorded window is written as soon as it ends, as its own trace
named by its steps (``<name>.steps2-4[.rankR].pt.trace.json.gz``), holding
``ProfilerStep#N`` annotations. Step 0 (imports, set-up, the first iteration:
one-time costs) is never in a window; with ``wait=0`` the first cycle starts at
step 1. Until the first ``step()`` call the run is recorded as if it were to be
profiled whole; that recording is dropped at the first call.

Default window: ``wait=1, warmup=1, active=3, repeat=1`` (torch's documented
example), so steps 2-4 of a run: one trace. The aim is a trace under about
100 MB of JSON (a few MB gzipped), which Perfetto UI opens in seconds: it runs
in a browser tab, whose memory (about 2 GB typically, per Perfetto's "large
traces" page) must hold the parsed trace, several times the JSON's size. Three
steps of real training stay well inside that: a 12-layer transformer encoder
(d=512, 16x256 tokens, AdamW) on an H200 wrote 9 MB of JSON (0.7 MB gzipped,
36,000 events) for 3 steps, 16.5 MB with ``record_shapes`` and ``with_stack``;
a model ten times that size still fits. Raise ``active`` for short steps,
``repeat`` (one trace each) to follow a long run.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

DEFAULT_WAIT = 1
DEFAULT_WARMUP = 1
DEFAULT_ACTIVE = 3
DEFAULT_REPEAT = 1


@dataclass(frozen=True)
class Windows:
    """A schedule of profiled windows (see the module documentation).

    Raises:
        ValueError: ``wait``, ``warmup`` or ``repeat`` is not an integer >= 0, or
            ``active`` not an integer >= 1.
    """

    wait: int = DEFAULT_WAIT
    warmup: int = DEFAULT_WARMUP
    active: int = DEFAULT_ACTIVE
    repeat: int = DEFAULT_REPEAT

    def __post_init__(self) -> None:
        for k, lo in (("wait", 0), ("warmup", 0), ("active", 1), ("repeat", 0)):
            v = getattr(self, k)
            if not isinstance(v, int) or isinstance(v, bool) or v < lo:
                raise ValueError(f"{k} must be an integer >= {lo}, not {v!r}")

    @functools.cached_property
    def schedule(self) -> Any:
        """The ``torch.profiler.schedule`` (imports torch); step 0 is skipped when ``wait`` is 0."""
        from torch.profiler import schedule

        return schedule(wait=self.wait, warmup=self.warmup, active=self.active, repeat=self.repeat, skip_first=1 if self.wait == 0 else 0)

    def records(self, n: int) -> bool:
        """Whether step ``n`` is recorded."""
        from torch.profiler import ProfilerAction

        return self.schedule(n) in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)

    def first(self) -> tuple[int, int] | None:
        """``(first, last)`` step of the first window."""
        for n in range(0, 1 + self.wait + self.warmup + self.active + 1):
            if self.records(n):
                return n, n + self.active - 1
        return None

    def ending(self, step_num: int, complete: bool) -> tuple[int, int]:
        """``(first, last)`` step of the window torch hands over at ``step_num``.

        ``complete``: handed over by a ``step()`` call (the window's last step
        ended), rather than by the profiler stopping mid-window.
        """
        last = step_num - 1 if complete else step_num
        first = last
        while first > 0 and self.records(first - 1):
            first -= 1
        return first, last

    def options(self) -> dict[str, int]:
        return {"wait": self.wait, "warmup": self.warmup, "active": self.active, "repeat": self.repeat}
