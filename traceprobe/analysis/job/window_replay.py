"""The graphs of a window of a job's summaries, read for its replay where it fits its memory budget
(:mod:`..causal.replay_memory`)."""

from __future__ import annotations

import msgspec

from ...errors import TraceFormatError
from ..causal.dependency_graph import RankGraph
from ..causal.packed import pack
from ..causal.replay_memory import REPLAY_BYTES, over_budget
from .summaries import graph_of_file


def window_graphs(paths: list[str], events: int, budget: int = REPLAY_BYTES) -> tuple[list[RankGraph | None], str, list[Exception]]:
    """The graphs of a window's rank summaries (``paths``, one a rank), to replay it: ``(graphs, note, errors)``; no
    graph and a note in words where the ranks' traces held more events together (``events``) than a replay within
    ``budget`` bytes takes (:func:`..causal.replay_memory.over_budget`), no graph and the error where a summary's graph cannot be read
    (:class:`TraceFormatError`, OSError, msgspec.DecodeError); a None among the graphs where a summary carries none."""
    if note := over_budget(len(paths), events, budget):
        return [], note, []
    try:
        graphs = [graph_of_file(p) for p in paths]
        return (pack(graphs) if all(g is not None for g in graphs) else graphs), "", []  # type: ignore[arg-type]
    except (TraceFormatError, OSError, msgspec.DecodeError) as e:
        return [], "", [e]
