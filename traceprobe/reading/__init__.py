"""Getting from a path to a :class:`Trace`: the reading stage of the pipeline.

In the order the bytes go through them: :mod:`.files` (local paths and fsspec URLs, within a size limit,
gzip inflated as read), :mod:`.splitter` (the JSON cut into its head and pieces of its event list),
:mod:`.decode` (each piece into columns, with :mod:`.columns`), :mod:`.trace` (the columns as a
:class:`Trace`'s DataFrames, its Python frames and CUDA sync events by :mod:`.side_tables`, within the bounds of
:mod:`.limits`); :mod:`.comm_kernels` lists the communication kernel families. ``Trace`` and
``load_trace`` are loaded on first use, so that ``traceprobe.reading.files`` imports without pandas.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .trace import Trace, load_trace

__all__ = ["Trace", "load_trace"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        value = getattr(importlib.import_module(".trace", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
