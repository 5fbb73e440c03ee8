"""A rank's part of the dependency graph as tables, so that a summary carries it and the what-ifs and the critical path
of a job are replayed from summaries as from traces.

:func:`graph_tables` turns a :class:`~traceprobe.analysis.causal.dependency_graph.RankGraph` into DataFrames (one per
length of its arrays), :func:`graph_from_tables` gives it back, equal in every array and name. Times are stored as ns
after the one before (anchors in time order, ops in their order: by lane, then start; the first after the graph's
earliest time, ``base_ns`` in ``graph_meta``) and ops by their duration, which keeps a summary's numbers short; the
"no edge" value (:data:`~traceprobe.analysis.causal.dependency_graph.NEG`) of ``fixed`` is stored as -1.

Tables (every column int64 unless said):

- ``graph_anchors`` (one row per anchor): ``t`` (after the anchor before), ``h``, ``target``, ``ret``, ``pre_dur``, ``blocking``
  (uint8: 0 or 1), and ``class_<name>`` per host class (:data:`~traceprobe.analysis.causal.dependency_graph.HOST_CLASSES`);
- ``graph_ops`` (one row per device op): ``lane``, ``start`` (after the op before), ``d`` (its duration), ``g``, ``l``, ``anchor``,
  ``fixed`` (after ``base_ns``; -1 none), ``name``, ``dep``, ``dep_lag``, ``pageable``, ``comm`` (uint8: 0 or 1), ``bind``;
- ``graph_also`` (one row per other edge of a device-wide sync): ``anchor``, ``op``;
- ``graph_names`` (``name``, str: kernel names by code), ``graph_lanes`` (``lane``, str: ``cuda:0 stream 7``);
- ``graph_steps``: the graph's steps as it holds them;
- ``graph_meta`` (one row): ``rank``, ``base_ns``, ``id_density`` (float64), ``ranked`` (bool), and ``top_<name>`` (str)
  per host class: the op holding most of it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..causal.dependency_graph import HOST_CLASSES, NEG, RankGraph

TABLE_NAMES = ("graph_anchors", "graph_ops", "graph_also", "graph_names", "graph_lanes", "graph_steps", "graph_meta")
"""The tables a summary carries the graph in."""

_OPS_PLAIN = ("lane", "g", "l", "anchor", "name", "dep", "dep_lag", "bind")


def graph_tables(g: RankGraph) -> dict[str, pd.DataFrame]:
    """The tables of ``g`` (module docstring)."""
    times = [a for a in (g.t, g.start) if a.size]
    base = int(min(int(a.min()) for a in times)) if times else 0
    anchors = pd.DataFrame({"t": np.diff(g.t, prepend=base), "h": g.h, "target": g.target, "ret": g.ret, "pre_dur": g.pre_dur,
                            "blocking": g.blocking.astype(np.uint8),
                            **{f"class_{c}": g.class_ns[i] for i, c in enumerate(HOST_CLASSES)}})
    ops = pd.DataFrame({"start": np.diff(g.start, prepend=base), "d": g.end - g.start, "fixed": np.where(g.fixed > NEG, g.fixed - base, -1),
                        **{k: getattr(g, k).astype(np.int64) for k in _OPS_PLAIN},
                        "pageable": g.pageable.astype(np.uint8), "comm": g.comm.astype(np.uint8)})
    meta = pd.DataFrame({"rank": [int(g.rank)], "base_ns": [base], "id_density": [float(g.id_density)], "ranked": [bool(g.ranked)],
                         **{f"top_{c}": [str(g.class_top[i])] for i, c in enumerate(HOST_CLASSES)}})
    return {
        "graph_anchors": anchors, "graph_ops": ops,
        "graph_also": pd.DataFrame({"anchor": g.also_anchor.astype(np.int64), "op": g.also_op.astype(np.int64)}),
        "graph_names": pd.DataFrame({"name": pd.Series(list(g.names), dtype=object)}),
        "graph_lanes": pd.DataFrame({"lane": pd.Series(list(g.lane_names), dtype=object)}),
        "graph_steps": g.steps.reset_index(drop=True), "graph_meta": meta,
    }


def _ints(df: pd.DataFrame, col: str) -> np.ndarray:
    return df[col].to_numpy(np.int64)


def graph_from_tables(tables: dict[str, pd.DataFrame]) -> RankGraph | None:
    """The graph :func:`graph_tables` wrote; None where the tables are not all there (a summary written without it).

    Raises:
        KeyError, ValueError: a table that lacks a column or holds a value no array of the graph can (the caller
            names the file).
    """
    if any(name not in tables for name in TABLE_NAMES) or len(tables["graph_meta"]) != 1:
        return None
    a, o, meta = tables["graph_anchors"], tables["graph_ops"], tables["graph_meta"].iloc[0]
    base = int(meta["base_ns"])
    start = np.cumsum(_ints(o, "start")) + base
    end = start + _ints(o, "d")
    fixed = _ints(o, "fixed")
    n_a, n_o = len(a), len(o)
    also = tables["graph_also"]
    names = tuple(str(x) for x in tables["graph_names"]["name"])
    lanes = tuple(str(x) for x in tables["graph_lanes"]["lane"])
    anchor, dep, target = _ints(o, "anchor"), _ints(o, "dep"), _ints(a, "target")
    also_a, also_o = _ints(also, "anchor"), _ints(also, "op")
    code, lane = _ints(o, "name"), _ints(o, "lane")
    for idx, size in ((anchor, n_a), (dep, n_o), (target, n_o), (also_a, n_a), (also_o, n_o), (code, len(names)), (lane, len(lanes))):
        if idx.size and (idx.max() >= size or idx.min() < -1):
            raise ValueError("a graph index beyond its table")
    if also_a.size and also_a.min() < 0 or also_o.size and also_o.min() < 0 or code.size and code.min() < 0 or lane.size and lane.min() < 0:
        raise ValueError("a graph index below 0")
    return RankGraph(
        rank=int(meta["rank"]), t=np.cumsum(_ints(a, "t")) + base, h=_ints(a, "h"),
        class_ns=np.stack([_ints(a, f"class_{c}") for c in HOST_CLASSES]) if n_a else np.zeros((len(HOST_CLASSES), 0), np.int64),
        class_top=tuple(str(meta[f"top_{c}"]) for c in HOST_CLASSES), target=target, ret=_ints(a, "ret"),
        lane=lane, start=start, end=end, d=end - start, g=_ints(o, "g"), l=_ints(o, "l"), anchor=anchor,
        fixed=np.where(fixed >= 0, fixed + base, NEG), name=code, names=names, steps=tables["graph_steps"].reset_index(drop=True),
        dep=dep, dep_lag=_ints(o, "dep_lag"), pre_dur=_ints(a, "pre_dur"), pageable=o["pageable"].to_numpy(np.uint8).astype(bool),
        blocking=a["blocking"].to_numpy(np.uint8).astype(bool), comm=o["comm"].to_numpy(np.uint8).astype(bool), bind=o["bind"].to_numpy(np.int64).astype(np.int8),
        id_density=float(meta["id_density"]), lane_names=lanes, ranked=bool(meta["ranked"]), also_anchor=also_a, also_op=also_o,
    )

