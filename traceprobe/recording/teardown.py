"""What a recording keeps alive until the interpreter exits, and why.

torch 2.13 with gloo can deadlock when a process group dies while the interpreter
runs: the group's destructor, reached from DDP's ``Reducer`` with the GIL held,
joins a gloo thread, and that thread, freeing the last all-reduce (whose saved
thread-local state holds a Python object: the ``contextvars`` context torch's
backward stashes), waits for the GIL. At interpreter exit torch frees such
objects without taking the GIL, so a group that dies then cannot hang.

Two things made traceprobe's ranks die early where ``python`` would not:

- ``runpy`` frees a script's globals (a module-level DDP model) when the script
  returns; ``python`` keeps ``__main__``'s until exit. :func:`keep` holds them.
- a capture's profiler runs from the start, so it is on while the group is
  created; with that, a DDP model local to ``main()`` dying on return hangs in
  about half the runs (plain ``torch.profiler`` started before
  ``init_process_group`` reproduces it). :func:`hold_gloo_group` keeps the
  default gloo group alive until exit.
"""

from __future__ import annotations

import sys
from typing import Any

_KEPT: list[Any] = []


def keep(obj: Any) -> None:
    """Hold ``obj`` until the interpreter exits."""
    _KEPT.append(obj)


def hold_gloo_group() -> bool:
    """Hold this process's default process group until exit if it is gloo's; True once ``torch.distributed`` is initialized.

    Cheap before then (one dictionary look-up), so a capture calls it at each step until it returns True.
    """
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is None or not dist.is_available() or not dist.is_initialized():
            return False
        if dist.get_backend() == "gloo":
            keep(dist.group.WORLD)
        return True
    except Exception:  # noqa: BLE001 - never break the profiled loop
        return True
