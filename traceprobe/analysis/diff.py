"""Diff: every figure of two analyses side by side, with the change.

``traceprobe diff A B`` analyses A and B (files or folders) and pairs their traces:
one trace on each side is a pair; otherwise traces pair by file name (relative to
the folder given), and, where no name matches, by run window and rank (the
``rank 1, steps 2-4`` trace of A with that of B). Each pair's figures are
flattened to rows ``figure``, ``subject``, ``a``, ``b``, ``delta`` (= b - a; NaN
where a side lacks the figure):

- ``duration_ns`` (trace window), ``mean_step_ns``, ``throughput_steps_per_s``;
- per device: the breakdown (:mod:`.breakdown`: ``compute_ns``,
  ``exposed_comm_ns``, ``exposed_copy_ns``, ``other_ns``, ``idle_ns``),
  ``utilization``, ``stream_concurrency``, ``comm_overlap``;
- per device and memcpy direction: ``copy_overlap`` and ``copy_ns``;
- ``device_concurrency``, ``cpu_gpu_overlap``;
- per device and kernel class: ``kernel_time_ns``; per device: ``mfu`` over the trace window (:mod:`.work.efficiency`,
  where the trace recorded shapes);
- per finding (kind and subject, the subject without the trace's own rank and its device
  named as paired): ``headroom_ns`` (:mod:`.findings`);
- per window of a run: each rank's collective ``wait_ns`` and each collective
  type's ``busbw_gbps`` (:mod:`.collectives`).

Subjects carry the pair's label when there is more than one pair. A pair's devices
pair by their index; where the two traces ran on as many devices but not the same
ones (a run placed on another GPU, rank 3's trace against rank 1's), by their order,
each pair of devices named by both (``cuda:3 / cuda:1``, A's first). Kernels are
compared by device (so paired) and name: the total device time of each on both sides,
and the ones whose total changed most.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .per_trace import OverlapReport
from .run import trace_key
from .summary import Summary

FIGURE_COLUMNS = ["figure", "subject", "a", "b", "delta"]
KERNEL_COLUMNS = ["device", "name", "a_ns", "b_ns", "delta_ns", "device_label"]
TOP_KERNELS = 10
"""Kernels listed by :func:`diff`: the ones whose total time changed most."""


@dataclass(frozen=True)
class Diff:
    """Two analyses side by side (module docstring).

    Attributes:
        figures: ``figure`` (str), ``subject`` (str), ``a``, ``b``, ``delta``
            (float64; times in ns, fractions 0..1), in the order of A's figures
            then B's new ones.
        kernels: ``device`` (int64), ``name`` (str), ``a_ns``, ``b_ns``,
            ``delta_ns`` (int64 total device time), ``device_label`` (str, the device
            named by its trace's backend: ``cuda:0``, ``hip:2``; A's where A ran the
            kernel), the :data:`TOP_KERNELS` largest changes of each pair, largest first.
        pairs: (label, A path, B path) of each pair of traces.
        only_a, only_b: paths of traces with no partner.
    """

    figures: pd.DataFrame
    kernels: pd.DataFrame
    pairs: tuple[tuple[str, str, str], ...]
    only_a: tuple[str, ...]
    only_b: tuple[str, ...]


def report_figures(r: OverlapReport, names: dict[int, str] | None = None) -> list[tuple[str, str, float]]:
    """One report's figures as ``(figure, subject, value)`` rows (module docstring); ``names``: how each device is named
    in the subjects (:func:`device_names`; None: ``cuda:N`` as its trace's backend names it)."""
    out: list[tuple[str, str, float]] = [("duration_ns", "", float(r.window_ns[1] - r.window_ns[0]))]
    named = names or {}

    def device_name(device: Any) -> str:  # (cuda:N, hip:N or mtia:N as the trace's backend names it, or as paired)
        return named.get(int(device), f"{r.backend}:{int(device)}")

    if not r.steps.empty:
        out += [("mean_step_ns", "", 1e9 / r.throughput if r.throughput > 0 else float("nan")), ("throughput_steps_per_s", "", r.throughput)]
    for b in r.breakdown.to_dict(orient="records"):
        dev = device_name(b['device'])
        out += [(c, dev, float(b[c])) for c in ("compute_ns", "exposed_comm_ns", "exposed_copy_ns", "other_ns", "idle_ns")]
    for d in r.devices.devices.to_dict(orient="records"):
        out.append(("utilization", device_name(d['device']), float(d["utilization"])))
    for c in r.copy_overlap.to_dict(orient="records"):
        subj = f"{device_name(c['device'])} {c['direction']}"
        out += [("copy_overlap", subj, float(c["fraction"])), ("copy_ns", subj, float(c["copy_ns"]))]
    if r.devices.device_count >= 2:
        out.append(("device_concurrency", "", r.devices.concurrency))
    for s in r.stream_concurrency.to_dict(orient="records"):
        if s["streams"] > 1:
            out.append(("stream_concurrency", device_name(s['device']), float(s["concurrency"])))
    for c in r.comm_overlap.to_dict(orient="records"):
        out.append(("comm_overlap", device_name(c['device']), float(c["fraction"])))
    out.append(("cpu_gpu_overlap", "", r.cpu_gpu.fraction))
    for k in r.extra.get("kernel_classes", pd.DataFrame()).to_dict(orient="records"):
        out.append(("kernel_time_ns", f"{device_name(k['device'])} {k['klass']}", float(k["time_ns"])))
    for m in r.extra.get("mfu", pd.DataFrame()).to_dict(orient="records"):
        if m["step"] < 0:
            out.append(("mfu", device_name(m['device']), float(m["mfu"])))
    for f in r.findings.to_dict(orient="records"):
        out.append(("headroom_ns", f"{f['kind']} {_finding_subject(r, f['subject'], int(f['device']), device_name)}".strip(),
                    float(f["headroom_ns"])))
    return out


def _finding_subject(r: OverlapReport, subject: str, device: int, device_name: Any) -> str:
    """A finding's subject (:func:`.advice.findings.findings`) as the diff names it: without the trace's own rank (the
    pair names the traces: rank 0's finding and rank 1's of the same kind are one row), its device as the pair names
    it (``device_name``)."""
    own = f"rank {r.rank}" if r.rank is not None else None
    if own is not None and (subject == own or subject.startswith(own + " ")):
        subject = subject[len(own):].lstrip()
    label = f"{r.backend}:{device}"
    if device >= 0 and (subject == label or subject.startswith(label + " ")):
        subject = device_name(device) + subject[len(label):]
    return subject


def _devices(r: OverlapReport) -> list[int]:
    """The devices of a report's device work, by index."""
    return sorted({int(d) for d in r.devices.devices["device"].tolist()}) if not r.devices.devices.empty else []


def device_names(ra: OverlapReport, rb: OverlapReport) -> tuple[dict[int, str], dict[int, str], dict[int, int]]:
    """How a pair's devices are named and matched (module docstring): ``(A's names, B's names, B's device -> A's)``,
    all empty where they pair by index (the same devices, or not as many)."""
    da, db = _devices(ra), _devices(rb)
    if da == db or len(da) != len(db):
        return {}, {}, {}
    names = [f"{ra.backend}:{a} / {rb.backend}:{b}" for a, b in zip(da, db)]
    return dict(zip(da, names)), dict(zip(db, names)), dict(zip(db, da))


def _pair_key(r: OverlapReport, root: str) -> str:
    try:
        return str(Path(r.path).relative_to(root))
    except ValueError:
        return Path(r.path).name


def _rank_key(r: OverlapReport) -> str:
    k = trace_key(r)
    return ", ".join(x for x in (f"rank {k.rank}" if k.rank is not None else "", k.window) if x)


def pair_reports(a: Summary, b: Summary, root_a: str = "", root_b: str = "") -> tuple[list[tuple[str, OverlapReport, OverlapReport]], list[str], list[str]]:
    """Pair the traces of A and B (module docstring): ``(pairs, only_a, only_b)``."""
    if len(a.reports) == 1 and len(b.reports) == 1:
        return [("", a.reports[0], b.reports[0])], [], []
    for key in (lambda r, root: _pair_key(r, root), lambda r, root: _rank_key(r)):
        ka = {key(r, root_a): r for r in a.reports}
        kb = {key(r, root_b): r for r in b.reports}
        if set(ka) & set(kb):
            pairs = [(k, ka[k], kb[k]) for k in ka if k in kb]
            return pairs, [r.path for k, r in ka.items() if k not in kb], [r.path for k, r in kb.items() if k not in ka]
    return [], [r.path for r in a.reports], [r.path for r in b.reports]


def _collective_figures(s: Summary) -> list[tuple[str, str, float]]:
    out = []
    for c in s.collectives:
        where = f"{c.window}" if c.window else ""
        out += [("collective_wait_ns", f"{where} rank {rank}".strip(), float(w)) for rank, w in c.wait_ns.items()]
        for t in c.by_type.to_dict(orient="records"):
            out.append(("busbw_gbps", f"{where} {t['collective']}".strip(), float(t["busbw_gbps"])))
    return out


def _side_by_side(rows_a: list[tuple[str, str, float]], rows_b: list[tuple[str, str, float]]) -> pd.DataFrame:
    da = {(f, s): v for f, s, v in rows_a}
    db = {(f, s): v for f, s, v in rows_b}
    keys = list(dict.fromkeys([*da, *db]))
    a = np.array([da.get(k, np.nan) for k in keys], dtype=np.float64)
    b = np.array([db.get(k, np.nan) for k in keys], dtype=np.float64)
    return pd.DataFrame({"figure": [k[0] for k in keys], "subject": [k[1] for k in keys], "a": a, "b": b, "delta": b - a},
                        columns=FIGURE_COLUMNS)


def _kernel_changes(ra: OverlapReport, rb: OverlapReport, names_a: dict[int, str], b_to_a: dict[int, int]) -> pd.DataFrame:
    """The pair's kernels side by side (:data:`KERNEL_COLUMNS`), B's devices taken as the A devices they pair with
    (:func:`device_names`: ``names_a``, ``b_to_a``)."""
    cols = ["device", "name", "total_ns"]
    ka = ra.kernels.reindex(columns=cols) if not ra.kernels.empty else pd.DataFrame(columns=cols)
    kb = rb.kernels.reindex(columns=cols) if not rb.kernels.empty else pd.DataFrame(columns=cols)
    if b_to_a:  # (B's devices as the A devices they pair with)
        kb = kb.assign(device=[b_to_a.get(int(d), int(d)) for d in kb["device"].tolist()])
    m = ka.merge(kb, on=["device", "name"], how="outer", suffixes=("_a", "_b"))
    if m.empty:
        return pd.DataFrame(columns=KERNEL_COLUMNS)
    a = np.nan_to_num(m["total_ns_a"].to_numpy(np.float64)).astype(np.int64)
    b = np.nan_to_num(m["total_ns_b"].to_numpy(np.float64)).astype(np.int64)
    device = m["device"].to_numpy(np.int64)
    label = [names_a.get(d) or f"{ra.backend if in_a else rb.backend}:{d}" for d, in_a in zip(device.tolist(), m["total_ns_a"].notna().tolist())]
    out = pd.DataFrame({"device": device, "name": m["name"].astype(str).to_numpy(), "a_ns": a, "b_ns": b, "delta_ns": b - a,
                        "device_label": np.array(label, dtype=object)})
    order = np.argsort(-np.abs(out["delta_ns"].to_numpy()), kind="stable")[:TOP_KERNELS]
    return out.iloc[order].reset_index(drop=True)


def diff(a: Summary, b: Summary, root_a: str = "", root_b: str = "") -> Diff:
    """Every figure of ``a`` and ``b`` side by side (module docstring).

    Args:
        a, b: the two analyses (``collect.analyze_paths`` of each side).
        root_a, root_b: the folders given for each side, for pairing by file name.

    Returns:
        a :class:`Diff`.
    """
    pairs, only_a, only_b = pair_reports(a, b, root_a, root_b)
    frames, kernels = [], []
    for label, ra, rb in pairs:
        names_a, names_b, b_to_a = device_names(ra, rb)
        side = _side_by_side(report_figures(ra, names_a), report_figures(rb, names_b))
        if len(pairs) > 1:
            side["subject"] = [f"{label}: {s}" if s else label for s in side["subject"]]
        frames.append(side)
        k = _kernel_changes(ra, rb, names_a, b_to_a)
        if len(pairs) > 1 and not k.empty:
            k["name"] = [f"{label}: {n}" for n in k["name"]]
        kernels.append(k)
    frames.append(_side_by_side(_collective_figures(a), _collective_figures(b)))
    figures = pd.concat([f for f in frames if not f.empty], ignore_index=True) if any(not f.empty for f in frames) else _side_by_side([], [])
    kern = pd.concat([k for k in kernels if not k.empty], ignore_index=True) if any(not k.empty for k in kernels) else pd.DataFrame(columns=KERNEL_COLUMNS)
    return Diff(figures, kern, tuple((label, ra.path, rb.path) for label, ra, rb in pairs), tuple(only_a), tuple(only_b))

