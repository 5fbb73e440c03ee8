"""Getting from a path to a :class:`Trace`: the reading stage of the pipeline.

The modules, in the order the bytes go through them:

- :mod:`.sources`: local paths and fsspec URLs;
- :mod:`.files`: the bytes, streamed within a size limit (gzip inflated as it is read);
- :mod:`.splitter`: the JSON cut into its head and pieces of its event list;
- :mod:`.decode`: each piece decoded into columns (:mod:`.columns`, :mod:`.timestamps`);
  files that are not traces are named by :mod:`.identify`;
- :mod:`.frames` and :mod:`.trace`: the columns as the DataFrames of a :class:`Trace`.

``Trace`` and ``load_trace`` are loaded on first use, so that ``traceprobe.reading.files``
(say) can be imported without pandas.
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
