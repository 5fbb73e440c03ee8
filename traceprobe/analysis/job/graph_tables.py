"""A rank's part of the dependency graph in a summary, so that the what-ifs and the critical path of a job are
replayed from summaries as from traces.

:func:`graph_blob` packs a :class:`~traceprobe.analysis.causal.dependency_graph.RankGraph` into one string: its arrays
in numpy's ``.npz`` format, deflated, in base64 (a summary's ``tables.graph``: one column ``npz``, one row). A JSON
list of numbers per array would make a summary several times larger and slower to read for the whole-job report,
which skips this one string; :func:`graph_from_blob` gives the graph back, equal in every array and name. Names
(kernels, lanes, each host class's top op) are stored as fixed-width unicode arrays, the steps as one array per
column, anchor and op times as their differences (an op's end as its duration): nothing is pickled, and a blob is read with ``allow_pickle=False``.
The kernel what-ifs (:attr:`RankGraph.device_causes`, where the trace recorded shapes) are three more arrays:
``dc_causes`` and ``dc_tops`` (one name each) and ``dc_d`` (one row of op durations each).
"""

from __future__ import annotations

import base64
import binascii
import io
import math
import re
import struct
import zipfile
import zlib
from typing import Any, cast

import numpy as np
import pandas as pd

from ..causal.dependency_graph import HOST_CLASSES, INDICES, RankGraph

try:  # (ISA-L's inflate, as the traces' reading takes it: several times zlib's on a graph's arrays; same API)
    from isal import isal_zlib as _zlib
except ImportError:  # pragma: no cover - isal is a dependency; zlib is the fallback
    import zlib as _zlib  # type: ignore[no-redef]

_ZLIB_ERROR = cast("type[Exception]", _zlib.error)

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
    arrays = {k: g.class_ns.dense() if k == "class_ns" else np.asarray(getattr(g, k))
              for k in (*_ARRAYS, *_OPTIONAL) if k != "end"}  # (the host classes dense, int64, ...)
    arrays |= {k: arrays[k].astype(np.int64) for k in INDICES}  # (... the indices int64: as written before they were held
    # sparse and as int32; each array in its place, so that a summary is the same byte for byte)
    arrays["t"], arrays["start"] = np.diff(g.t, prepend=0), np.diff(g.start, prepend=0)  # (small numbers deflate well)
    arrays |= {"names": np.array(g.names, dtype=str), "lane_names": np.array(g.lane_names, dtype=str),
               "class_top": np.array(g.class_top, dtype=str),
               "meta": np.array([g.rank, int(g.ranked), g.stack_frames, int(g.replays), int(g.host_ops)], dtype=np.int64),
               "backend": np.array([g.backend], dtype=str), "id_density": np.array([g.id_density], dtype=np.float64),
               "steps_columns": np.array(list(map(str, g.steps.columns)), dtype=str)}
    arrays |= {f"steps_{i}": g.steps[c].to_numpy() for i, c in enumerate(g.steps.columns)}
    if g.device_causes:  # (the kernel what-ifs: each cause, what holds it, the device ops' durations with it removed)
        arrays |= {"dc_causes": np.array([c for c, _, _ in g.device_causes], dtype=str),
                   "dc_tops": np.array([t for _, t, _ in g.device_causes], dtype=str),
                   "dc_d": np.stack([np.asarray(d, np.int64) for _, _, d in g.device_causes])}
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)  # pyright: ignore[reportArgumentType]
    return base64.b64encode(buf.getvalue()).decode("ascii")


PER_ANCHOR = ("t", "h", "target", "ret", "pre_dur", "blocking")
"""The packed arrays of shape (A,), one value per anchor (:class:`RankGraph`; ``freeing`` too where it is packed)."""
PER_OP = ("lane", "start", "d", "g", "l", "anchor", "fixed", "name", "dep", "dep_lag", "pageable", "comm", "bind")
"""The packed arrays of shape (K,), one value per device op."""
_MASKS = ("pageable", "blocking", "comm")
"""Arrays of booleans; every other array of the graph's own (all but the names, ``id_density``) holds integers."""
_TEXTS = ("names", "lane_names", "class_top", "steps_columns", "backend")
STEP_COLUMNS = ("step", "start_ns", "end_ns")
"""The columns of a graph's steps that its replay reads (int64)."""


def inflated_size(blob: str) -> int:
    """The bytes a packed graph's arrays inflate to (the sum of its ``.npz`` members' sizes, as its zip directory says;
    nothing is inflated), to count against a limit before :func:`graph_from_blob` reads them.

    Raises:
        ValueError: a blob that is not base64 or not a zip.
    """
    try:
        with zipfile.ZipFile(io.BytesIO(base64.b64decode(blob, validate=True))) as z:
            return sum(i.file_size for i in z.infolist())
    except (binascii.Error, zipfile.BadZipFile, OSError, EOFError) as e:
        raise ValueError(f"a graph that is not a packed graph ({type(e).__name__})") from None


def graph_from_blob(blob: str, max_inflated: int = MAX_INFLATED) -> RankGraph:
    """The graph :func:`graph_blob` packed.

    ``max_inflated``: the most its arrays may inflate to (bytes; at most :data:`MAX_INFLATED`), checked from the zip's
    directory before any is read. Every array is checked before it is read and before the graph is built: each ``.npy`` member's header (its
    shape times its dtype's size) against the bytes the member holds, so that no header makes numpy allocate more
    than the blob holds (:func:`_member`); then each array's dtype and shape against the others (:func:`graph_problem`).

    Raises:
        ValueError: a blob that is not base64, not an ``.npz`` of the graph's arrays, inflates past
            ``max_inflated`` or :data:`MAX_INFLATED`, holds an array whose header claims more or fewer bytes than it holds, arrays whose
            dtypes or lengths disagree (:func:`graph_problem`), or indices beyond its arrays (the caller names the
            file).
    """
    try:
        raw = base64.b64decode(blob, validate=True)
        with zipfile.ZipFile(io.BytesIO(raw)) as z:
            inflated, limit = sum(i.file_size for i in z.infolist()), min(max_inflated, MAX_INFLATED)
            if inflated > limit:
                raise ValueError(f"a graph that inflates to {inflated:,} bytes, past {limit:,}")
            infos = z.infolist()
        a = {info.filename.removesuffix(".npy"): _member(raw, info) for info in infos}
    except (binascii.Error, zipfile.BadZipFile, zlib.error, OSError, EOFError) as e:
        raise ValueError(f"a graph that is not a packed graph ({type(e).__name__})") from None
    except MemoryError:  # (each array's size was checked against the blob's bytes: not expected)
        raise ValueError("a graph too large for the memory available") from None
    problem = graph_problem(a)
    if problem:
        raise ValueError(problem)
    names, lanes = tuple(str(x) for x in a["names"]), tuple(str(x) for x in a["lane_names"])
    n_a, n_k = a["t"].size, a["start"].size
    for key, size in (("anchor", n_a), ("dep", n_k), ("target", n_k), ("also_anchor", n_a), ("also_op", n_k), ("name", len(names)),
                      ("lane", len(lanes)), ("freeing", len(HOST_CLASSES))):
        v = a.get(key, np.zeros(0, np.int64))
        if v.size and (int(v.max()) >= size or int(v.min()) < -1):
            raise ValueError(f"a graph index ({key}) beyond its arrays")
    a["t"], a["start"] = np.cumsum(a["t"]), np.cumsum(a["start"])
    a["end"] = a["start"] + a["d"]
    steps = pd.DataFrame({str(c): a[f"steps_{i}"] for i, c in enumerate(a["steps_columns"])}, columns=[str(c) for c in a["steps_columns"]])
    meta = a["meta"]
    arrays: dict[str, Any] = {k: a[k] for k in _ARRAYS}
    return RankGraph(rank=int(meta[0]), names=names, lane_names=lanes, class_top=tuple(str(x) for x in a["class_top"]),
                     steps=steps, id_density=float(a["id_density"][0]), ranked=bool(meta[1]),
                     stack_frames=int(meta[2]) if meta.size > 2 else 0, replays=bool(meta[3]) if meta.size > 3 else False,
                     host_ops=bool(meta[4]) if meta.size > 4 else True,
                     backend=str(a["backend"][0]) if "backend" in a and a["backend"].size else "cuda", **arrays,
                     freeing=a["freeing"].astype(np.int8) if "freeing" in a else np.full(n_a, -1, np.int8),
                     device_causes=tuple((str(c), str(t), d.astype(np.int64)) for c, t, d in zip(a["dc_causes"], a["dc_tops"], a["dc_d"]))
                     if "dc_d" in a else ())


_HEADER = re.compile(r"\{'descr': '([<>|=][a-zA-Z][0-9]{0,9})', 'fortran_order': (False|True), 'shape': \(((?:[0-9]{1,19}, ?)*[0-9]{0,19})\), \} *\n?")
"""An ``.npy`` header as numpy writes it (keys in order, a plain dtype): read without ``ast``."""
MAX_HEADER = 10_000
"""Longest ``.npy`` header read (bytes; numpy's own default limit)."""


def _member(raw: bytes, info: zipfile.ZipInfo) -> np.ndarray:
    """The array of one ``.npy`` member of a packed graph (``raw``: the whole ``.npz``; ``info``: the member's entry of
    its zip directory), its header checked before any memory is taken for its data: the bytes it claims (its shape's
    product times its dtype's size) must be the bytes the member holds after it (so no header makes numpy allocate
    more than the blob holds). Each header is parsed once (numpy's ``np.load`` parses it with ``ast``, a tenth of a
    millisecond an array).

    The member is inflated in one call where its data lies in ``raw`` (:func:`_inflated`), not through
    :meth:`zipfile.ZipFile.open`, which inflates it with the standard library's zlib in slices of a Python read loop:
    a 1,024-rank job's graphs (about 1 MB of arrays a rank) read in 7.4 -> 3.6 ms each on this project's 2-CPU
    machine. Its CRC-32 is checked as ``zipfile`` checks it.

    Raises:
        ValueError: not an ``.npy`` array of format 1.0, 2.0 or 3.0 with a plain dtype (as ``np.savez`` writes a
            graph's), an array of objects, a size that disagrees with the member's, or a member whose data does not
            inflate to its size and CRC-32.
    """
    name = info.filename.removesuffix(".npy")[:40]
    data = _inflated(raw, info, name)
    magic = data[:8]
    if len(magic) < 8 or magic[:6] != b"\x93NUMPY" or magic[6] not in (1, 2, 3):
        raise ValueError(f"a graph member ({name!r}) that is not a numpy array")
    size = 2 if magic[6] == 1 else 4
    length = int.from_bytes(data[8:8 + size], "little")
    if length > MAX_HEADER:
        raise ValueError(f"a graph array ({name!r}) whose header is {length:,} bytes long")
    header = bytes(data[8 + size:8 + size + length]).decode("utf-8" if magic[6] == 3 else "latin-1", errors="replace")
    m = _HEADER.fullmatch(header)
    if m is None:
        raise ValueError(f"a graph array ({name!r}) whose header is not a plain array's: {header.strip()[:60]!r}")
    try:
        dtype = np.dtype(m.group(1))
    except TypeError:
        raise ValueError(f"a graph array ({name!r}) of dtype {m.group(1)!r}") from None
    if dtype.hasobject or dtype.itemsize == 0:
        raise ValueError(f"a graph array ({name!r}) of dtype {m.group(1)!r}")
    shape = tuple(int(x) for x in m.group(3).replace(" ", "").split(",") if x)
    claimed, held = math.prod(shape) * dtype.itemsize, len(data) - 8 - size - length
    if claimed != held:
        raise ValueError(f"a graph array ({name!r}) whose header claims {claimed:,} bytes ({'x'.join(map(str, shape)) or 'scalar'} "
                         f"{dtype.str}) where its member holds {held:,}")
    return np.frombuffer(data, dtype, count=math.prod(shape), offset=8 + size + length).reshape(shape, order="F" if m.group(2) == "True" else "C")


_LOCAL = struct.Struct("<4s22xHH")
"""A zip member's local header (APPNOTE 4.3.7): its signature, then (after 22 bytes the directory repeats) the lengths
of its name and of its extra field, after which its data begins."""


def _inflated(raw: bytes, info: zipfile.ZipInfo, name: str) -> bytearray:
    """The bytes of one zip member (stored or deflated, as ``np.savez`` and ``np.savez_compressed`` write them), inflated
    with :mod:`isal` (zlib where it is not installed) into at most the size its directory gives (already counted against
    the caller's limit), and checked against that size and its CRC-32.

    Raises:
        ValueError: a local header that is not one, a member compressed otherwise, or data that does not inflate to
            its size and CRC-32.
    """
    at = info.header_offset
    if at < 0 or at + _LOCAL.size > len(raw):
        raise ValueError(f"a graph member ({name!r}) beyond its blob")
    signature, n_name, n_extra = _LOCAL.unpack_from(raw, at)
    start = at + _LOCAL.size + n_name + n_extra
    packed = memoryview(raw)[start:start + info.compress_size]
    if signature != b"PK\x03\x04":
        raise ValueError(f"a graph member ({name!r}) whose local header is not one")
    if len(packed) != info.compress_size:
        raise ValueError(f"a graph member ({name!r}) cut short")
    if info.compress_type == zipfile.ZIP_STORED:
        data = bytearray(packed)
    elif info.compress_type == zipfile.ZIP_DEFLATED:
        inflate = _zlib.decompressobj(-15)  # (raw deflate, as a zip member holds it)
        try:
            data = bytearray(inflate.decompress(packed, info.file_size + 1))  # (one byte more: a member inflating past its size is seen)
        except _ZLIB_ERROR as e:
            raise ValueError(f"a graph member ({name!r}) that does not inflate ({e})") from None
    else:
        raise ValueError(f"a graph member ({name!r}) compressed with method {info.compress_type}")
    if len(data) != info.file_size or _zlib.crc32(data) != info.CRC:
        raise ValueError(f"a graph member ({name!r}) whose data does not inflate to its size and CRC-32")
    return data


def graph_problem(a: dict[str, np.ndarray]) -> str:
    """What in the arrays of a packed graph (``a``, by name, as :func:`graph_blob` writes them) does not fit a
    :class:`RankGraph`, in words, or "".

    Checked, before any is used: every array the graph reads there (others, of a later version, are let be); A = ``t``'s length (anchors), K = ``start``'s (device ops);
    each of :data:`PER_ANCHOR` (and ``freeing`` where packed) one-dimensional of length A, each of :data:`PER_OP` of
    length K, ``class_ns`` of shape (len(HOST_CLASSES), A), ``class_top`` one name per host class, ``also_anchor``
    and ``also_op`` of one length; masks (``pageable``, ``blocking``, ``comm``) of booleans, the other arrays of
    integers (never floats), the names of strings, ``meta`` at least 2 integers, ``id_density`` one number; the steps
    as many arrays as ``steps_columns`` names, of integers and one length, among them :data:`STEP_COLUMNS`.
    """
    missing = [k for k in (*(x for x in _ARRAYS if x != "end"), "names", "lane_names", "class_top", "meta", "id_density", "steps_columns") if k not in a]
    if missing:
        return f"a graph without {missing[0]!r}"
    for k in (*_ARRAYS, *_OPTIONAL, *_TEXTS, "meta", "id_density"):  # (arrays of a later version, not read here, are let be)
        v = a.get(k)
        if v is None:
            continue
        if v.ndim != (2 if k == "class_ns" else 1):
            return f"a graph whose {k[:40]!r} is of {v.ndim} dimensions"
        kind = "U" if k in _TEXTS else "b" if k in _MASKS else "f" if k == "id_density" else "i"
        if v.dtype.kind != kind and not (kind == "f" and v.dtype.kind == "i"):
            return f"a graph whose {k[:40]!r} holds {v.dtype.name} values, not {_KIND_WORDS[kind]}"
    n_a, n_k = a["t"].size, a["start"].size
    for keys, n, what in ((PER_ANCHOR + (("freeing",) if "freeing" in a else ()), n_a, "anchors (t)"), (PER_OP, n_k, "device ops (start)")):
        for k in keys:
            if a[k].size != n:
                return f"a graph whose {k!r} has {a[k].size:,} values for its {n:,} {what}"
    if a["class_ns"].shape != (len(HOST_CLASSES), n_a):
        return f"a graph whose 'class_ns' is {'x'.join(map(str, a['class_ns'].shape))} where its host classes and anchors make {len(HOST_CLASSES)}x{n_a}"
    if a["class_top"].size != len(HOST_CLASSES):
        return f"a graph whose 'class_top' names {a['class_top'].size} host classes of {len(HOST_CLASSES)}"
    if a["also_anchor"].size != a["also_op"].size:
        return f"a graph whose 'also_anchor' ({a['also_anchor'].size:,}) and 'also_op' ({a['also_op'].size:,}) differ in length"
    if a["meta"].size < 2 or a["id_density"].size < 1:
        return "a graph whose 'meta' or 'id_density' is short"
    columns = [str(c) for c in a["steps_columns"]]
    steps = [a.get(f"steps_{i}") for i in range(len(columns))]
    if any(v is None for v in steps) or len(set(columns)) != len(columns):
        return f"a graph whose steps ({', '.join(c[:40] for c in columns[:8])}) are not one array per column"
    if any(v.dtype.kind != "i" for v in steps if v is not None) or len({v.size for v in steps if v is not None}) > 1:
        return "a graph whose steps are not integers of one length"
    lost = [c for c in STEP_COLUMNS if c not in columns]
    if lost:
        return f"a graph whose steps lack {lost[0]!r}"
    dc = [a.get(k) for k in ("dc_causes", "dc_tops", "dc_d")]
    if any(v is not None for v in dc):
        names, tops, d = dc
        if names is None or tops is None or d is None or names.dtype.kind != "U" or tops.dtype.kind != "U" or d.dtype.kind != "i" \
                or d.ndim != 2 or not names.size == tops.size == d.shape[0] or d.shape[1] != n_k:
            return "a graph whose device causes (dc_causes, dc_tops, dc_d) do not fit one another and its device ops"
    return ""


_KIND_WORDS = {"U": "strings", "b": "booleans", "f": "numbers", "i": "integers"}
