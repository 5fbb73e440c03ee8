"""A rank's part of the dependency graph in a summary, so that the what-ifs and the critical path of a job are
replayed from summaries as from traces.

:func:`graph_blob` packs a :class:`~traceprobe.analysis.causal.dependency_graph.RankGraph` into one string: its arrays
in numpy's ``.npz`` format, deflated, in base64 (a summary's ``tables.graph``: one column ``npz``, one row). A JSON
list of numbers per array would make a summary several times larger and slower to read for the whole-job report,
which skips this one string; :func:`graph_from_blob` gives the graph back, equal in every array and name. Names
(kernels, lanes, each host class's top op) are stored as fixed-width unicode arrays, the steps as one array per
column, anchor and op times as their differences (an op's end as its duration): nothing is pickled, and a blob is read with ``allow_pickle=False``.
"""

from __future__ import annotations

import base64
import binascii
import io
import zipfile

import numpy as np
import pandas as pd

from ..causal.dependency_graph import RankGraph

TABLE = "graph"
"""The summary table that holds the blob (column ``npz``)."""

MAX_INFLATED = 1 << 30
"""Largest a blob's arrays may inflate to (bytes): a summary is read within its own limit, its blob within this."""

_ARRAYS = ("t", "h", "class_ns", "target", "ret", "lane", "start", "end", "d", "g", "l", "anchor", "fixed", "name", "dep", "dep_lag",
           "pre_dur", "pageable", "blocking", "comm", "bind", "also_anchor", "also_op")


_OPTIONAL = ("freeing",)
"""Arrays a packed graph may lack (written by an older traceprobe): read as -1 (no device free), one per anchor."""


def graph_blob(g: RankGraph) -> str:
    """``g`` as one base64 string (module docstring)."""
    arrays = {k: np.asarray(getattr(g, k)) for k in (*_ARRAYS, *_OPTIONAL) if k != "end"}
    arrays["t"], arrays["start"] = np.diff(g.t, prepend=0), np.diff(g.start, prepend=0)  # (small numbers deflate well)
    arrays |= {"names": np.array(g.names, dtype=str), "lane_names": np.array(g.lane_names, dtype=str),
               "class_top": np.array(g.class_top, dtype=str),
               "meta": np.array([g.rank, int(g.ranked), g.stack_frames, int(g.replays), int(g.host_ops)], dtype=np.int64),
               "backend": np.array([g.backend], dtype=str), "id_density": np.array([g.id_density], dtype=np.float64),
               "steps_columns": np.array(list(map(str, g.steps.columns)), dtype=str)}
    arrays |= {f"steps_{i}": g.steps[c].to_numpy() for i, c in enumerate(g.steps.columns)}
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)  # pyright: ignore[reportArgumentType]
    return base64.b64encode(buf.getvalue()).decode("ascii")


def graph_from_blob(blob: str) -> RankGraph:
    """The graph :func:`graph_blob` packed.

    Raises:
        ValueError: a blob that is not base64, not an ``.npz`` of the graph's arrays, inflates past
            :data:`MAX_INFLATED`, or holds indices beyond its arrays (the caller names the file).
    """
    try:
        raw = base64.b64decode(blob, validate=True)
        with zipfile.ZipFile(io.BytesIO(raw)) as z:
            if sum(i.file_size for i in z.infolist()) > MAX_INFLATED:
                raise ValueError(f"a graph that inflates past {MAX_INFLATED:,} bytes")
        with np.load(io.BytesIO(raw), allow_pickle=False) as npz:
            a = {k: npz[k] for k in npz.files}
    except (binascii.Error, zipfile.BadZipFile, OSError, EOFError) as e:
        raise ValueError(f"a graph that is not a packed graph ({type(e).__name__})") from None
    missing = [k for k in (*(x for x in _ARRAYS if x != "end"), "names", "lane_names", "class_top", "meta", "id_density", "steps_columns") if k not in a]
    if missing:
        raise ValueError(f"a graph without {missing[0]!r}")
    names, lanes = tuple(str(x) for x in a["names"]), tuple(str(x) for x in a["lane_names"])
    n_a, n_k = a["t"].size, a["start"].size
    for key, size in (("anchor", n_a), ("dep", n_k), ("target", n_k), ("also_anchor", n_a), ("also_op", n_k), ("name", len(names)),
                      ("lane", len(lanes))):
        v = a[key]
        if v.size and (int(v.max()) >= size or int(v.min()) < -1):
            raise ValueError(f"a graph index ({key}) beyond its arrays")
    a["t"], a["start"] = np.cumsum(a["t"]), np.cumsum(a["start"])
    a["end"] = a["start"] + a["d"]
    steps = pd.DataFrame({str(c): a[f"steps_{i}"] for i, c in enumerate(a["steps_columns"])})
    meta = a["meta"]
    return RankGraph(rank=int(meta[0]), names=names, lane_names=lanes, class_top=tuple(str(x) for x in a["class_top"]),
                     steps=steps, id_density=float(a["id_density"][0]), ranked=bool(meta[1]),
                     stack_frames=int(meta[2]) if meta.size > 2 else 0, replays=bool(meta[3]) if meta.size > 3 else False,
                     host_ops=bool(meta[4]) if meta.size > 4 else True,
                     backend=str(a["backend"][0]) if "backend" in a and a["backend"].size else "cuda", **{k: a[k] for k in _ARRAYS},
                     freeing=a["freeing"].astype(np.int8) if "freeing" in a and a["freeing"].size == n_a else np.full(n_a, -1, np.int8))
