"""The tables of a summary, checked: every known table's columns declared once, with their kind.

:data:`COLUMNS` declares them (what :mod:`traceprobe.summary_file`'s ``tables`` hold); :func:`table_problem` checks a
table against its own dtypes and its known columns' meaning, :func:`tables_problem` a summary's tables and their
process groups; with no pandas: a column's types are read with one ``set(map(type, ...))`` and its integers' range
with ``min``/``max``, in C.
"""

from __future__ import annotations

import functools
import re
from typing import Any, Literal

_INT_DTYPES = {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "Int8", "Int16", "Int32", "Int64", "UInt8", "UInt16", "UInt32"}
_TEXT_DTYPES = {"str", "string", "object", "category"}
DTYPES = frozenset({*_INT_DTYPES, *_TEXT_DTYPES, "float32", "float64", "Float64", "bool", "boolean"})
"""The pandas dtypes a summary's table columns may have (others, ``U1000000000`` say, are refused)."""
_FLOAT_DTYPES = {"float32", "float64", "Float64"}

Column = tuple[Literal["int", "float", "str"], bool]
"""What a known column of a summary's table holds: its kind (``int``: integers, times in ns, counts, bytes, ranks,
steps, devices; ``float``: fractions and ratios, ``null`` for NaN; ``str``: names and words) and whether an
integer column may hold ``null`` (a pandas ``Int64`` column: the ``rank`` of a trace without one)."""


def _columns(ints: str = "", floats: str = "", texts: str = "", nullable_ints: str = "") -> dict[str, Column]:
    """Columns by kind, each argument their names separated by spaces."""
    return {**{c: ("int", False) for c in ints.split()}, **{c: ("int", True) for c in nullable_ints.split()},
            **{c: ("float", True) for c in floats.split()}, **{c: ("str", False) for c in texts.split()}}


_BREAKDOWN = "device window_ns compute_ns exposed_comm_ns exposed_copy_ns other_ns set_aside_ns idle_ns idle_launch_ns idle_sync_ns idle_other_ns"
COLUMNS: dict[str, dict[str, Column]] = {
    "streams": _columns("device stream busy_ns events kernels memcpys memsets", "utilization"),
    "copy_overlap": _columns("device copies bytes copy_ns overlapped_ns", "fraction", "direction"),
    "stream_concurrency": _columns("device streams busy_ns multi_stream_ns kernel_busy_ns multi_stream_kernel_ns side_busy_ns",
                                   "concurrency kernel_concurrency side_concurrency"),
    "comm_overlap": _columns("device comm_kernels comm_ns overlapped_ns", "fraction", nullable_ints="rank"),
    "steps": _columns("step host_start_ns host_end_ns host_ns gpu_start_ns gpu_end_ns gpu_ns gpu_busy_ns events launched_start_ns "
                      "launched_end_ns launched_busy_ns", "device_concurrency copy_overlap comm_overlap stream_concurrency"),
    "breakdown": _columns(_BREAKDOWN, nullable_ints="rank"),
    "breakdown_steps": _columns("step " + _BREAKDOWN, nullable_ints="rank"),
    "findings": _columns("device headroom_ns per_step_ns", texts="kind subject label text"),
    "kernels": _columns("device count total_ns mean_ns max_ns", "share", "kind name"),
    "queue": _columns("device launched mean_ns p50_ns p95_ns max_ns", texts="kind"),
    "collectives": _columns("device stream start_ns end_ns bytes group_size", texts="pg pg_desc collective name dtype p2p",
                            nullable_ints="rank"),
    "set_aside": _columns("device events busy_ns", texts="reason work"),
    "exposed_comm": _columns("device start_ns end_ns"),
    "idle_causes": _columns("device step ns", texts="cause top"),
    "pg_members": _columns(texts="pg_ranks"),
    "devices": _columns("device busy_ns idle_ns concurrent_ns", "utilization concurrency"),
    "idle_gaps": _columns("device gaps longest_gap_ns longest_gap_start_ns"),
    "kernel_classes": _columns("device time_ns events modelled_ns flops bytes", "share tflops tbps efficiency", "klass bound",
                               "roofline_ns lost_ns"),
    "kernel_ops": _columns("device count time_ns flops bytes", "tflops tbps efficiency", "name klass dtype shape bound",
                           "roofline_ns lost_ns"),
    "mfu": _columns("device step window_ns flops hardware_flops", "peak_tflops mfu hfu", "dtype"),
}
"""Every known table of a summary (``tables``) and its known columns (:data:`Column`), declared once: what the
writer (:func:`traceprobe.analysis.job.summaries.to_summary`) gives them and every reader (the report rebuilt from a
summary, the whole-job report's :mod:`traceprobe.analysis.job.job`) takes them to be. A column's dtype must be one of
its kind's (an ``int`` column: an integer dtype; ``float``: a float or integer one; ``str``: ``str``, ``string``,
``object`` or ``category``; any kind: ``object`` where the column is empty, as pandas gives an empty table) and its
values of its kind. Tables and columns not declared here are allowed, checked against their own dtypes alone (the
``graph`` table among them: its packed graph is checked where it is unpacked,
:mod:`traceprobe.analysis.job.graph_tables`, so that a spoiled graph costs the replay alone, never the rank's
figures). A collective's ``pg_ranks`` is a row of ``pg_members`` (an integer within its rows) where the summary
carries that table, else the group's members themselves (:data:`MEMBERS`), as summaries written before it hold them."""

_KIND_DTYPES = {"int": frozenset(_INT_DTYPES), "float": frozenset(_INT_DTYPES | _FLOAT_DTYPES), "str": frozenset(_TEXT_DTYPES)}
_KIND_TYPES: dict[tuple[str, bool], set[type]] = {("int", False): {int}, ("int", True): {int, type(None)},
                                                  ("float", True): {int, float, type(None)}, ("str", False): {str}}
_KIND_WORDS = {"int": "integers", "float": "numbers", "str": "strings"}

MEMBERS = re.compile(r"(?:-?[0-9]{1,9}(?:,-?[0-9]{1,9})*)?")
"""A process group's members as a summary holds them (``pg_members.pg_ranks``): ranks, comma-separated integers of
at most 9 digits (a rank lies within 2^28 in magnitude, :data:`traceprobe.summary_file.MAX_RANK`), or ``""`` where unknown."""


@functools.cache
def _int_range(dtype: str) -> tuple[int, int]:
    bits = int("".join(c for c in dtype if c.isdigit()))
    return (0, (1 << bits) - 1) if dtype.lower().startswith("uint") else (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)


def _names(kinds: set[type]) -> str:
    return ", ".join(sorted("null" if k is type(None) else k.__name__ for k in kinds))


def table_problem(t: Any, where: str, known: dict[str, Column] | None = None) -> str:
    """What in ``t`` does not fit its own dtypes or, for a column of ``known`` (its table's :data:`COLUMNS`), its
    meaning, in words naming the key (``where``: the table's JSON path), or "".

    Args:
        t: a :class:`traceprobe.summary_file.Table`, or any view of one with ``columns``, ``dtypes`` (str) and ``data`` (a list per column).
        where: its JSON path (``$.tables.steps``), which the words name.
        known: its known columns (:data:`COLUMNS` of its name); None: none.

    Checked: as many dtypes and value lists as columns, every list as long as the first, every dtype one of
    :data:`DTYPES`, and each column's values of its dtype: integers within its range (no ``null`` in a numpy
    integer column), numbers or ``null`` in a float column, booleans in a bool one; a known column's dtype of its
    kind and its values of its kind (no ``null`` in a non-nullable integer column whatever its dtype, no number in a
    str one, no fraction in an integer one). A column's types are read with one ``set(map(type, ...))``, not value by
    value in Python.
    """
    if not (len(t.columns) == len(t.dtypes) == len(t.data)):
        return f"{where}: {len(t.columns)} columns, {len(t.dtypes)} dtypes and {len(t.data)} value lists"
    rows = len(t.data[0]) if t.data else 0
    for name, dtype, values in zip(t.columns, t.dtypes, t.data):
        key = f"{where}.{name}"
        if len(values) != rows:
            return f"{key}: {len(values)} values where the table's first column has {rows} (a ragged table)"
        if dtype not in DTYPES:
            return f"{key}: dtype {dtype[:40]!r} is none of a summary's"
        kinds = set(map(type, values))
        column = known.get(name) if known else None
        if column is not None:
            kind, allowed = column[0], _KIND_TYPES[column]
            if dtype not in _KIND_DTYPES[kind] and (values or dtype != "object"):
                return f"{key}: dtype {dtype!r} for a column of {_KIND_WORDS[kind]}"
            if not kinds <= allowed:
                return f"{key}: a column of {_KIND_WORDS[kind]} holds {_names(kinds - allowed)}"
        nullable = dtype[0].isupper() or dtype in ("boolean",)
        if dtype in _INT_DTYPES:
            allowed = {int, type(None)} if nullable else {int}
            if not kinds <= allowed:
                return f"{key}: {dtype} column holds {_names(kinds - allowed)}"
            ints: list[int] = values if type(None) not in kinds else [v for v in values if v is not None]  # type: ignore[assignment]  (ints: kinds says so; min and max in C)
            lo, hi = _int_range(dtype)
            if ints and (min(ints) < lo or max(ints) > hi):
                return f"{key}: {dtype} column holds a value outside {lo}..{hi}"
        elif dtype in ("float32", "float64", "Float64"):
            if not kinds <= {int, float, type(None)}:
                return f"{key}: {dtype} column holds {', '.join(sorted(k.__name__ for k in kinds - {int, float, type(None)}))}"
        elif dtype in ("bool", "boolean"):
            allowed = {bool, type(None)} if nullable else {bool}
            if not kinds <= allowed:
                return f"{key}: {dtype} column holds {_names(kinds - allowed)}"
    return ""


def _members_problem(values: list, key: str) -> str:
    bad = next((v for v in set(values) if not (isinstance(v, str) and _is_members(v))), None) if values else None
    return "" if bad is None else f"{key}: {str(bad)[:40]!r} is no list of ranks (comma-separated integers)"


_LISTS_SEEN: dict[str, None] = {}
"""Long member lists already found to be lists of ranks (:func:`_is_members`), the latest :data:`LISTS_KEPT`."""
LISTS_KEPT, LONG_LIST = 16, 1_000


def _is_members(v: str) -> bool:
    """Whether ``v`` is a list of ranks (:data:`MEMBERS`). Every rank of a job names its world group's members (40 KB of
    text in a job of 8,192 ranks): a long list seen before is known by its hash, and the pattern runs once."""
    if len(v) < LONG_LIST:
        return MEMBERS.fullmatch(v) is not None
    if v in _LISTS_SEEN:
        return True
    if MEMBERS.fullmatch(v) is None:
        return False
    _LISTS_SEEN[v] = None
    while len(_LISTS_SEEN) > LISTS_KEPT:
        del _LISTS_SEEN[next(iter(_LISTS_SEEN))]
    return True


def tables_problem(tables: Any, where: str = "$.tables") -> str:
    """What in a summary's ``tables`` (by name: :class:`~traceprobe.summary_file.Table` or views of them, as :func:`table_problem` reads; None
    for a table not there) does not fit the format, in words naming the key, or "".

    Each table as :func:`table_problem` checks it, a known one against its :data:`COLUMNS`; then the process
    groups: every ``pg_members.pg_ranks`` a list of ranks (:data:`MEMBERS`), and every collective's ``pg_ranks`` an
    integer row of that table, or where there is none (summaries written before it), itself a list of ranks.
    """
    for name, t in tables.items():
        if t is None:
            continue
        problem = table_problem(t, f"{where}.{name}", COLUMNS.get(name))
        if problem:
            return problem
    members = tables.get("pg_members")
    listed = _col_of(members, "pg_ranks")
    if listed is not None:
        problem = _members_problem(listed, f"{where}.pg_members.pg_ranks")
        if problem:
            return problem
    codes = _col_of(tables.get("collectives"), "pg_ranks")
    if not codes:
        return ""
    key = f"{where}.collectives.pg_ranks"
    if members is None:
        return _members_problem(codes, key)
    kinds = set(map(type, codes))
    if not kinds <= {int}:
        return f"{key}: rows of pg_members that are {_names(kinds - {int})}"
    n = len(listed or [])
    if min(codes) < 0 or max(codes) >= n:
        return f"{key}: a process group's members beyond its table of {n} (pg_members)"
    return ""


def _col_of(t: Any, name: str) -> list | None:
    """The values of column ``name`` of table ``t`` (None where either is missing)."""
    if t is None or name not in t.columns:
        return None
    i = t.columns.index(name)
    return t.data[i] if i < len(t.data) else None
