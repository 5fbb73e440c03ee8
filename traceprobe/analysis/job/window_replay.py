"""The graphs of a window of a job's summaries, read for its replay where it fits its memory budget
(:mod:`..causal.replay_memory`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from ...errors import TraceFormatError
from ..causal.dependency_graph import RankGraph
from ..causal.packed import pack
from ..causal.replay_memory import REPLAY_BYTES, over_budget
from .summaries import graph_of_file

Mapper = Callable[..., list[Any]]
"""How the summaries and the graphs are read: ``mapper(fn, paths)`` is ``[fn(p) for p in paths]`` (the default), or
the same run in worker processes (``traceprobe.collect.execution.map_items``, which the command line passes), where a
value that is an exception is a file whose worker died on it; the summaries are read with ``on_index=cb`` too,
``cb(i, value)`` called in this process with each value as it arrives (``map_items``' own)."""


def window_graphs(paths: list[str], events: int, budget: int = REPLAY_BYTES,
                  mapper: Mapper | None = None) -> tuple[list[RankGraph | None], str, list[Exception]]:
    """The graphs of a window's rank summaries (``paths``, one a rank), to replay it: ``(graphs, note, errors)``; no
    graph and a note in words where the ranks' traces held more events together (``events``) than a replay within
    ``budget`` bytes takes (:func:`..causal.replay_memory.over_budget`), no graph and the error where a summary's graph cannot be read
    (:class:`TraceFormatError`, OSError, msgspec.DecodeError, or the death of the worker that read it); a None among
    the graphs where a summary carries none. ``mapper`` reads them (:data:`Mapper`): each graph is read and checked
    on its own, so reading them in parallel gives the same graphs (a 512-rank window's on 2 CPUs: 1.7 s of CPU)."""
    if note := over_budget(len(paths), events, budget):
        return [], note, []
    graphs = mapper(graph_or_error, paths) if mapper is not None else [graph_or_error(p) for p in paths]
    if failed := next((g for g in graphs if isinstance(g, Exception)), None):
        return [], "", [failed]
    return (pack(graphs) if all(g is not None for g in graphs) else graphs), "", []  # type: ignore[arg-type]


def graph_or_error(path: str) -> RankGraph | None | Exception:
    """:func:`.summaries.graph_of_file`, its error (:class:`TraceFormatError`, OSError, msgspec.DecodeError) returned
    as the value: a worker reading one of a window's graphs hands its error back instead of raising it, which would
    stop the other workers mid-file."""
    try:
        return graph_of_file(path)
    except (TraceFormatError, OSError, msgspec.DecodeError) as e:
        return e
