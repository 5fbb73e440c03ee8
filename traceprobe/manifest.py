"""``manifest.json``: what a recording folder holds, as typed data with one load and one save.

``traceprobe record`` (built-in workloads) and ``record --script``/``capture()``
write a manifest beside their traces; ``overlap-report`` reads it to name each
trace's workload and variant and to compare wall times. Layout on disk
(``schema`` 2; files without ``schema`` are read the same way)::

    {"schema": 2, "traceprobe": "0.1.0", "created": ISO time, "command": [argv...],
     "environment": {...machine facts...},
     "processes": [{...one per record --script / capture process...}],
     "variants": [{"workload", "variant", "status", "traces": [file names], "description",
                   "reason", "wall_s", "wall_runs_s", "params", "device", "devices", "rank", "steps", "runs_before", ...}]}

Older manifests name a variant's file(s) under ``trace`` (a string or a list);
both are read into :attr:`Entry.traces`, always a list. Keys this module does not
know are kept as they were (``Entry.extra``, ``Manifest.extra``).

A hostile or damaged manifest never gives a traceback: a file that is not JSON,
or not an object, raises :class:`ManifestError` (one line naming the file); an
entry with a field of the wrong type (``"wall_s": "fast"``, a list as workload) or
a trace name that is not a plain file name (``../x``, ``a/b``) is dropped or has
that field ignored, and :attr:`Manifest.problems` says so in one line each.

The manifest is rewritten atomically (:mod:`traceprobe.fileio`) under an
exclusive lock on ``.manifest.lock`` (:func:`update`), so the ranks of one
torchrun job can share a folder.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .fileio import atomic_write

MANIFEST = "manifest.json"
"""The manifest's file name in a recording folder."""
TRACE_SUFFIX = ".pt.trace.json.gz"
"""Suffix of every trace traceprobe records."""
LOCK = ".manifest.lock"
"""Lock file guarding the manifest's read-modify-write (:func:`update`)."""
SCHEMA = 2
STATUSES = ("ok", "partial", "kept", "skipped", "failed", "interrupted", "running")
"""An entry's ``status``: ``ok`` whole trace(s); ``partial`` a window or run cut short;
``kept`` an existing trace not recorded again; ``skipped`` the machine lacks what the
variant needs; ``failed`` an error inside it; ``interrupted`` Ctrl-C or a killed run;
``running`` listed before its traces are written (torchrun variants)."""


class ManifestError(ValueError):
    """``manifest.json`` cannot be used at all; ``str()`` is one line naming the file."""

    def __init__(self, path: str | Path, reason: str) -> None:
        self.path, self.reason = str(path), reason
        super().__init__(f"{path}: {reason}")


def trace_name(workload: str, variant: str, rank: int | None = None) -> str:
    """File name of a variant's trace: ``<workload>.<variant>[.rank<R>].pt.trace.json.gz``.

    The one naming rule for every trace traceprobe records, e.g.
    ``compute-copy.overlapped.pt.trace.json.gz``, ``train.steps2-4.rank1.pt.trace.json.gz``.
    """
    r = "" if rank is None else f".rank{rank}"
    return f"{workload}.{variant}{r}{TRACE_SUFFIX}"


def plain_name(name: object) -> bool:
    """Whether ``name`` is a plain file name inside its folder (no path separator, not ``.``/``..``, no NUL)."""
    return (
        isinstance(name, str) and bool(name) and name not in (".", "..")
        and "/" not in name and "\\" not in name and "\0" not in name
    )


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v: object) -> bool:
    return (isinstance(v, (int, float)) and not isinstance(v, bool)) and v == v and v not in (float("inf"), float("-inf"))


_CHECKS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "description": (lambda v: isinstance(v, str), "a string"),
    "reason": (lambda v: isinstance(v, str), "a string"),
    "wall_s": (lambda v: _is_num(v) and v >= 0, "a number of seconds >= 0"),
    "wall_runs_s": (lambda v: isinstance(v, list) and bool(v) and all(_is_num(x) and x >= 0 for x in v), "a list of seconds >= 0"),
    "params": (lambda v: isinstance(v, dict), "an object"),
    "device": (lambda v: isinstance(v, str), "a string"),
    "devices": (lambda v: isinstance(v, list) and all(isinstance(d, str) for d in v), "a list of strings"),
    "rank": (lambda v: _is_int(v) and v >= 0, "an integer >= 0"),
    "steps": (lambda v: isinstance(v, list) and len(v) == 2 and all(_is_int(s) for s in v), "[first, last]"),
    "runs_before": (lambda v: _is_int(v) and v >= 0, "an integer >= 0"),
}
"""Optional entry fields and what they must be (``None`` is always allowed)."""


@dataclass
class Entry:
    """One variant (or one window of a ``record --script`` run) and its trace files.

    Attributes:
        workload, variant: names (``compute-copy``, ``overlapped``; ``train``, ``steps2-4``).
        status: one of :data:`STATUSES`.
        traces: file names in the manifest's folder, one per rank (empty when none was written).
        description: one line on what the variant does.
        reason: why it is not ``ok`` (None when it is).
        wall_s: float seconds on the wall clock of one run: the median of
            ``wall_runs_s`` where the variant was timed several times, or None.
        wall_runs_s: every timed run, float seconds, in order (``record``
            times each in-process variant :data:`~traceprobe.recording.record.TIMED_RUNS` times), or None.
        params: sizes and counts.
        device: ``cuda`` or ``cpu``; devices: torch device strings used.
        rank: the torchrun rank that wrote it (``record --script``), else None.
        steps: ``[first, last]`` profiled steps of a window, None for a whole run.
        runs_before: how many times the variant ran before the run its trace profiled (``record``: its warm-up run and
            its timed runs), None where not said.
        extra: every other key, kept as read (``resumed``, ``pid``, ``json_bytes``...).
    """

    workload: str
    variant: str
    status: str = "ok"
    traces: list[str] = field(default_factory=list)
    description: str | None = None
    reason: str | None = None
    wall_s: float | None = None
    wall_runs_s: list[float] | None = None
    params: dict[str, Any] | None = None
    device: str | None = None
    devices: list[str] | None = None
    rank: int | None = None
    steps: list[int] | None = None
    runs_before: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, str]:
        """``(workload, variant)``."""
        return self.workload, self.variant

    def to_json(self) -> dict[str, Any]:
        """The entry as written to ``manifest.json`` (None fields left out)."""
        d: dict[str, Any] = {"workload": self.workload, "variant": self.variant, "status": self.status, "traces": list(self.traces)}
        for k in _CHECKS:
            v = getattr(self, k)
            if v is not None:
                d[k] = v
        return {**d, **self.extra}

    @classmethod
    def from_json(cls, d: object, where: str, problems: list[str]) -> Entry | None:
        """Read one entry; None (with a line in ``problems``) when it cannot be used."""
        if not isinstance(d, dict):
            problems.append(f"{where}: not an object, ignored")
            return None
        for k in ("workload", "variant"):
            if not plain_name(d.get(k)):
                problems.append(f"{where}: {k} must be a plain name, not {_short(d.get(k))}; entry ignored")
                return None
        status = d.get("status", "ok")
        if status not in STATUSES:
            problems.append(f"{where}: unknown status {_short(status)}; entry ignored")
            return None
        raw = d.get("traces", d.get("trace", []))
        names = [raw] if isinstance(raw, str) else raw if isinstance(raw, list) else None
        if names is None or not all(plain_name(n) for n in names):
            problems.append(f"{where}: trace names must be plain file names in the folder, not {_short(raw)}; entry ignored")
            return None
        kw: dict[str, Any] = {}
        for k, (ok, what) in _CHECKS.items():
            v = d.get(k)
            if v is None:
                continue
            if ok(v):
                kw[k] = float(v) if k == "wall_s" else [float(x) for x in v] if k == "wall_runs_s" else v
            else:
                problems.append(f"{where}: {k} must be {what}, not {_short(v)}; ignored")
        extra = {k: v for k, v in d.items() if k not in _CHECKS and k not in ("workload", "variant", "status", "trace", "traces")}
        return cls(workload=d["workload"], variant=d["variant"], status=status, traces=list(names), extra=extra, **kw)


def _short(v: object) -> str:
    s = json.dumps(v, default=str)
    return s if len(s) <= 40 else s[:37] + "..."


@dataclass
class Manifest:
    """The contents of one ``manifest.json``.

    Attributes:
        variants: the entries, in the order recorded (``record`` writes each
            workload's baseline variant first).
        processes: one dict per ``record --script``/``capture()`` process (rank,
            pid, target, options, status, exit code, environment).
        environment: the machine's facts (see :mod:`traceprobe.recording.environment`).
        traceprobe, created, command: the version, ISO time and command line of the first writer.
        extra: other top-level keys, kept as read.
        problems: what was ignored while reading, one line each (not written back).
    """

    variants: list[Entry] = field(default_factory=list)
    processes: list[dict[str, Any]] = field(default_factory=list)
    environment: dict[str, Any] = field(default_factory=dict)
    traceprobe: str | None = None
    created: str | None = None
    command: list[str] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def find(self, trace_file: str) -> tuple[int, Entry] | None:
        """``(position, entry)`` of the entry listing ``trace_file`` (a file name), or None."""
        for i, e in enumerate(self.variants):
            if trace_file in e.traces:
                return i, e
        return None

    def put_process(self, proc: dict[str, Any], entries: list[Entry]) -> None:
        """Record one ``record --script``/``capture()`` process (``proc["id"]``) and its entries, replacing earlier copies.

        The first writer's command, start time and environment name the manifest;
        processes are kept in rank order.
        """
        from .version import __version__

        self.traceprobe = self.traceprobe or __version__
        self.created = self.created or proc.get("started")
        self.command = self.command or proc.get("command")
        self.environment = self.environment or proc.get("environment") or {}
        procs = [p for p in self.processes if p.get("id") != proc.get("id")] + [proc]
        self.processes = sorted(procs, key=lambda p: (p.get("rank") is None, p.get("rank") or 0, str(p.get("started"))))
        names = {t for e in entries for t in e.traces}
        self.variants = [e for e in self.variants if not names.intersection(e.traces)] + entries

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"schema": SCHEMA, "traceprobe": self.traceprobe, "created": self.created, "command": self.command,
                             "environment": self.environment}
        if self.processes:
            d["processes"] = self.processes
        return {**d, **self.extra, "variants": [e.to_json() for e in self.variants]}

    @classmethod
    def from_json(cls, doc: object, path: str | Path) -> Manifest:
        """Read a decoded manifest. Raises :class:`ManifestError` when ``doc`` is not an object."""
        if not isinstance(doc, dict):
            raise ManifestError(path, f"not a traceprobe manifest (a JSON {type(doc).__name__}, not an object)")
        problems: list[str] = []
        raw = doc.get("variants", [])
        if not isinstance(raw, list):
            problems.append(f"{path}: variants must be a list; ignored")
            raw = []
        entries = [Entry.from_json(e, f"{path}: variant {i}", problems) for i, e in enumerate(raw)]
        m = cls(variants=[e for e in entries if e is not None], problems=problems)
        for k, ok in (("processes", lambda v: isinstance(v, list) and all(isinstance(p, dict) for p in v)),
                      ("environment", lambda v: isinstance(v, dict)), ("traceprobe", lambda v: isinstance(v, str)),
                      ("created", lambda v: isinstance(v, str)),
                      ("command", lambda v: isinstance(v, list) and all(isinstance(a, str) for a in v))):
            v = doc.get(k)
            if v is None:
                continue
            if ok(v):
                setattr(m, k, v)
            else:
                problems.append(f"{path}: {k} has the wrong type; ignored")
        m.extra = {k: v for k, v in doc.items() if k not in ("schema", "variants", "processes", "environment", "traceprobe", "created", "command")}
        return m


def path_of(folder: str | Path) -> Path:
    """``folder/manifest.json``."""
    return Path(folder) / MANIFEST


def load(folder: str | Path) -> Manifest:
    """The manifest in ``folder``, or an empty :class:`Manifest` when there is none.

    Raises:
        ManifestError: the file exists but cannot be read, is not UTF-8 JSON, or is
            not an object (one line naming the file).
    """
    p = path_of(folder)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        return Manifest()
    except OSError as e:
        raise ManifestError(p, f"cannot read: {e.strerror or e}") from None
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError) as e:
        raise ManifestError(p, f"not valid JSON ({type(e).__name__})") from None
    return Manifest.from_json(doc, p)


def save(folder: str | Path, manifest: Manifest) -> None:
    """Write ``folder/manifest.json`` atomically (raises :class:`~traceprobe.fileio.WriteError`)."""
    atomic_write(path_of(folder), json.dumps(manifest.to_json(), indent=2, default=str) + "\n")


@contextlib.contextmanager
def lock(folder: str | Path) -> Iterator[None]:
    """An exclusive lock on ``folder``'s manifest for a read-modify-write (POSIX ``flock``; none elsewhere)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: one writer assumed
        yield
        return
    fd = os.open(Path(folder) / LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield  # closing the descriptor releases the lock
    finally:
        os.close(fd)


def update(folder: str | Path, change: Callable[[Manifest], None]) -> Manifest:
    """Load, ``change`` in place, and save the manifest of ``folder``, all under :func:`lock`.

    A manifest that cannot be read is replaced (its problems are lost with it),
    so a damaged file never stops a recording. Returns the manifest saved.
    """
    with lock(folder):
        try:
            m = load(folder)
        except ManifestError:
            m = Manifest()
        change(m)
        save(folder, m)
        return m


@functools.lru_cache(maxsize=64)
def _cached(path: str, mtime_ns: int, size: int) -> Manifest | None:
    try:
        return load(Path(path).parent)
    except ManifestError:
        return None


def info_for(trace_file: str | Path) -> dict[str, Any]:
    """What the ``manifest.json`` beside ``trace_file`` says of it; empty when nothing (or the manifest is unusable).

    Keys: ``workload``, ``variant``, ``wall_s``, ``wall_runs_s``, ``description``, ``params``,
    ``devices``, ``rank`` and ``steps`` (``record --script``: the trace's rank and
    its window's first and last step), ``runs_before``, those the entry has; ``order`` (the entry's position:
    ``record`` writes each workload's baseline first) and ``environment``
    (``host``, ``torch``, ``cuda``, ``devices`` of the machine, those present).
    """
    p = path_of(Path(trace_file).parent)
    try:
        st = p.stat()
    except OSError:
        return {}
    m = _cached(str(p), st.st_mtime_ns, st.st_size)
    hit = m.find(Path(trace_file).name) if m is not None else None
    if m is None or hit is None:
        return {}
    order, e = hit
    info: dict[str, Any] = {"workload": e.workload, "variant": e.variant}
    for k in ("wall_s", "wall_runs_s", "description", "params", "devices", "rank", "steps", "runs_before"):
        v = getattr(e, k)
        if v is not None:
            info[k] = v
    info["order"] = order
    info["environment"] = {k: m.environment[k] for k in ("host", "torch", "cuda", "devices") if k in m.environment}
    return info
