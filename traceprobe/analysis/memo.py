"""Derived values computed once per trace.

Several figures need the same derived arrays (the launching call of each device
event, each device's interval sets, the compute and communication masks); the
:func:`per_trace` decorator keeps each result in the trace's ``derived`` dict, keyed
by function and arguments, so the report pays for each once. Arrays are returned
read-only: a caller that needs to change one copies it.

:func:`empty_frame` (:mod:`traceprobe.reading.side_tables`'s, imported here for the figures) gives what they build
again and again: an empty table of given columns, built once per column set.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar

import numpy as np

from ..reading import Trace
from ..reading.side_tables import empty_frame as empty_frame  # (the figures import it from here)

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
    """Compute ``fn(trace, *args)`` once per :class:`~traceprobe.reading.Trace` object and
    (hashable) arguments; later calls return the kept result."""

    @wraps(fn)
    def wrapper(trace: Trace, *args: Any) -> R:
        key = (fn.__module__, fn.__qualname__, args)
        cache = trace.derived
        if key not in cache:
            cache[key] = _freeze(fn(trace, *args))
        return cache[key]

    return wrapper


@per_trace
def device_column(trace: Trace, name: str) -> np.ndarray:
    """``trace.device_events[name]`` as a read-only numpy array, read once per trace.

    For the numeric columns (``device``, ``stream``, ``start_ns``, ``end_ns``,
    ``correlation``, ``bytes``: int64; ``is_comm``: bool). The figures read the same
    columns many times; a DataFrame column read costs pandas several µs each time,
    which adds up on small traces (about 170 reads per report).
    """
    return _numeric(trace.device_events[name].to_numpy())


@per_trace
def host_column(trace: Trace, name: str) -> np.ndarray:
    """``trace.host_events[name]`` as a read-only numpy array (numeric columns: ``start_ns``,
    ``end_ns``, ``correlation``, ``external_id``, int64), read once per trace."""
    return _numeric(trace.host_events[name].to_numpy())


def _numeric(values: np.ndarray) -> np.ndarray:
    """The column's own array; int64 where it came as objects (a frame built by hand, an empty one)."""
    return values.astype(np.int64) if values.dtype == object else values
