"""A window's graphs packed for its replay: each array the replay concatenates held once for the whole window.

The replay (:mod:`.what_if`, :mod:`.sweep`, :mod:`.critical_path`) reads the ranks' arrays concatenated: anchor times,
op starts and ends, lags. :func:`pack` puts each of them in one array for the window's ranks, each rank's graph
holding a view of its part, so that :func:`.sweep.joined` gives that array back without a copy where the replay would
concatenate the ranks' parts again (a copy of each per replay step held beside the graphs: 48 bytes a node of the
1,024-rank job). Figures are the same to the ns.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from .dependency_graph import RankGraph

PACKED = ("t", "h", "ret", "pre_dur", "blocking", "freeing", "start", "end", "d", "g", "l", "fixed", "dep_lag", "pageable", "comm", "bind")
"""The arrays of :class:`.dependency_graph.RankGraph` the replay concatenates as they are (one value an anchor or an op,
no rank-local index): :func:`pack` holds each once for the window."""


def pack(graphs: list[RankGraph]) -> list[RankGraph]:
    """``graphs`` (one window's ranks), in place, with each array of :data:`PACKED` a view of one array for the window
    (in the graphs' order: :func:`.sweep.joined` gives it back without a copy); returns the list. Equal to ``graphs`` in every
    value; the arrays are read, never written, by the replay. The window's arrays are built first, then each graph is
    replaced in the list once: the memory it takes beyond the graphs' is the packed arrays' (about half of the graphs':
    below the replay's own, which comes after)."""
    views: list[dict[str, np.ndarray]] = [{} for _ in graphs]
    for name in PACKED:
        parts = [getattr(g, name) for g in graphs]
        whole = np.concatenate(parts) if parts else np.zeros(0)
        bounds = np.cumsum([0] + [p.size for p in parts]).tolist()
        del parts
        for v, lo, hi in zip(views, bounds[:-1], bounds[1:]):
            v[name] = whole[lo:hi]
    for i, g in enumerate(graphs):  # (one replacement a graph, its own arrays going with it: one a field took 1.8 s at 4,096 ranks)
        graphs[i] = replace(g, **views[i])
    give_back_freed()
    return graphs


def give_back_freed() -> None:
    """Return the C heap's free pages to the system (glibc's ``malloc_trim``; nothing where the C library has none).

    The ranks' arrays as read are small (tens of KB: the heap's, not mapped pages of their own) and freed once
    packed: without this their pages stay in the process's resident memory, holes the window's large arrays (mapped
    pages) never reuse: 580 MB of the 1,024-rank job's peak."""
    import ctypes

    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return
    trim(0)

