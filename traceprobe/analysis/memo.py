"""Derived values computed once per trace.

Several figures need the same derived arrays (the launching call of each device
event, each device's interval sets, the compute and communication masks); the
:func:`per_trace` decorator keeps each result in the trace's ``derived`` dict, keyed
by function and arguments, so the report pays for each once. Arrays are returned
read-only: a caller that needs to change one copies it.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar

import numpy as np

from ..trace import Trace

R = TypeVar("R")


def _freeze(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        value.flags.writeable = False
    elif isinstance(value, (tuple, list)):
        for v in value:
            _freeze(v)
    elif isinstance(value, dict):
        for v in value.values():
            _freeze(v)
    return value


def per_trace(fn: Callable[..., R]) -> Callable[..., R]:
    """Compute ``fn(trace, *args)`` once per :class:`~traceprobe.trace.Trace` object and
    (hashable) arguments; later calls return the kept result."""

    @wraps(fn)
    def wrapper(trace: Trace, *args: Any) -> R:
        key = (fn.__module__, fn.__qualname__, args)
        cache = trace.derived
        if key not in cache:
            cache[key] = _freeze(fn(trace, *args))
        return cache[key]

    return wrapper
