"""Which windows of a job's summaries are replayed, and their graphs read for it: the memory a replay from summaries
takes (measured: :data:`NODE_BYTES` an event of the ranks' traces), within a budget that ``traceprobe job
--replay-memory`` sets (default: the larger of 2 GB and half the memory available)."""

from __future__ import annotations

import msgspec

from ...errors import TraceFormatError
from ..causal.dependency_graph import RankGraph
from ..causal.packed import pack
from .summaries import graph_of_file

REPLAY_BYTES = 2 * 10**9
"""The least memory a window replayed from summaries may take, the whole job report with it (bytes): the default
budget (:func:`replay_budget`) where half the memory available is less."""
BASE_BYTES = 200_000_000
"""The job report's memory beside the replay (bytes): the interpreter, its modules (numba's among them) and the
collectives of the ranks; the intercept of the fit below."""
NODE_BYTES = 87
"""The replay's memory an event of the ranks' traces (bytes; a rank of 20,000 events is about 8,000 replay nodes:
4,011 host anchors, 4,000 device ops, so about 217 bytes a node): the slope of the peak resident memory of ``traceprobe
job`` on SYNTHETIC summaries of 20,000 events a rank (``scripts/bench_job.py``): 256 ranks 0.65 GB, 512 ranks 1.10
GB, 1,024 ranks 1.98 GB (88 and 86 bytes an event between them)."""


def replay_budget(budget: int | None = None) -> int:
    """The memory (bytes) a window replayed from summaries may take: ``budget`` where given (``job --replay-memory``),
    else the larger of :data:`REPLAY_BYTES` and half the memory available now
    (:func:`traceprobe.reading.files.available_memory`, the share ``--max-bytes``'s default takes)."""
    from ...reading.files import MEMORY_SHARE, available_memory

    return int(budget) if budget is not None else max(REPLAY_BYTES, int(available_memory() * MEMORY_SHARE))


def max_replay_events(budget: int) -> int:
    """The events of a window's rank traces (each summary's ``event_count``, summed) that a replay from summaries within
    ``budget`` bytes takes: what it holds beyond :data:`BASE_BYTES` at :data:`NODE_BYTES` an event (2 GB: 20,689,655,
    the 1,024 ranks of 20,000 events, not 2,048)."""
    return max(budget - BASE_BYTES, 0) // NODE_BYTES


def window_graphs(paths: list[str], events: int, budget: int = REPLAY_BYTES) -> tuple[list[RankGraph | None], str, list[Exception]]:
    """The graphs of a window's rank summaries (``paths``, one a rank), to replay it: ``(graphs, note, errors)``; no
    graph and a note in words where the ranks' traces held more events together (``events``) than a replay within
    ``budget`` bytes takes (:func:`max_replay_events`), no graph and the error where a summary's graph cannot be read
    (:class:`TraceFormatError`, OSError, msgspec.DecodeError); a None among the graphs where a summary carries none."""
    if events > max_replay_events(budget):
        return [], (f"not replayed: its {len(paths)} ranks' traces hold {events:,} events, more than the "
                    f"{max_replay_events(budget):,} a replay from summaries takes within {budget / 1e9:.1f} GB of memory "
                    f"(about {(BASE_BYTES + events * NODE_BYTES) / 1e9:.1f} GB would do; --replay-memory sets it): no "
                    "what-if or critical path; or replay the ranks that matter from their summaries"), []
    try:
        graphs = [graph_of_file(p) for p in paths]
        return (pack(graphs) if all(g is not None for g in graphs) else graphs), "", []  # type: ignore[arg-type]
    except (TraceFormatError, OSError, msgspec.DecodeError) as e:
        return [], "", [e]
