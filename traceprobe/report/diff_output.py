"""Outputs of ``traceprobe diff``: a rich table, JSON, CSV and Markdown of a :class:`~traceprobe.analysis.diff.Diff`."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from rich.console import Console
from rich.table import Table

from ..analysis.diff import Diff
from . import units
from .grid import cell, shorten, shortened
from .json_document import SCHEMA_VERSION, rows

FIGURE_NAMES = {"duration_ns": "trace window", "mean_step_ns": "mean step", "throughput_steps_per_s": "throughput",
                "busbw_gbps": "bus bandwidth", "collective_wait_ns": "collective wait", "cpu_gpu_overlap": "CPU/GPU overlap",
                "copy_ns": "copy time", "headroom_ns": "finding"}
"""Names a person reads for the figures of :mod:`traceprobe.analysis.diff` (the others: ``_`` as spaces, ``_ns`` dropped)."""


def unrelated(d: Diff, a: str, b: str, a_paths: list[str], b_paths: list[str]) -> str:
    """Why two folders ``a`` and ``b`` have nothing to compare, or ``""``: no file name (relative to its folder) is in
    both and no pair was made by rank; the message names both folders' traces (the first five of each). Two folders of
    one trace each are a pair whatever their names (``tensorboard_trace_handler`` names each file by worker and time)."""
    from pathlib import Path

    def names(root: str, paths: list[str]) -> list[str]:
        out = []
        for p in paths:
            try:
                out.append(str(Path(p).relative_to(root)))
            except ValueError:
                out.append(Path(p).name)
        return sorted(out)

    na, nb = names(a, a_paths), names(b, b_paths)
    if len(na) == 1 and len(nb) == 1:  # (one trace each, before and after: a pair whatever their names)
        return ""
    if not na or not nb or set(na) & set(nb) or any(label.startswith("rank ") for label, _, _ in d.pairs):
        return ""

    def listed(xs: list[str]) -> str:
        return ", ".join(xs[:5]) + (f" and {len(xs) - 5} more" if len(xs) > 5 else "")

    return (f"nothing to compare: no trace name of {a} ({listed(na)}) is in {b} ({listed(nb)}), and they name no ranks "
            "to pair by; give two files to compare them whatever their names")


def subject_words(figure: str, subject: str) -> str:
    """A row's subject for a person: a finding's kind in words (``idle_cpu_op cuda:0`` -> ``CPU ops that launch nothing
    cuda:0``, ``exposed_copy cuda:0 HtoD`` -> ``exposed copy cuda:0 HtoD``; the what-ifs' names,
    :data:`traceprobe.analysis.causal.what_if_windows.LABELS`), any other subject as it is."""
    if figure != "headroom_ns" or not subject:
        return subject
    from ..analysis.causal.what_if_windows import LABELS

    kind, _, rest = subject.partition(" ")
    cause = kind[5:] if kind.startswith("idle_") else ""
    words = {"launch": "launch-bound dispatch", "host": "host outside ops"}.get(cause) or LABELS.get(cause) or kind.replace("_", " ")
    return f"{words} {rest}".strip()


def _kernel_rows(d: Diff) -> list[tuple[str, str, dict]]:
    """Each kernel change as (its pair's label, the kernel's name, the row): the pair's label (a trace file of a folder)
    apart from the kernel's name, so that neither is shortened into the other."""
    labels = sorted({label for label, _, _ in d.pairs if label}, key=len, reverse=True)
    out = []
    for rec in d.kernels.to_dict(orient="records"):
        name = str(rec["name"])
        label = next((x for x in labels if name.startswith(x + ": ")), "")
        out.append((label, name[len(label) + 2:] if label else name, rec))
    return out


def figure_name(figure: str) -> str:
    """``duration_ns`` -> ``trace window``, ``exposed_comm_ns`` -> ``exposed comm``: no unit in the name (the cells carry it)."""
    if figure in FIGURE_NAMES:
        return FIGURE_NAMES[figure]
    return (figure[:-3] if figure.endswith("_ns") else figure).replace("_", " ")


def value(figure: str, v: float, signed: bool = False) -> str:
    """One value of ``figure`` in human units, the unit named: ``58.0 ms``, ``39.4 ms/step``, ``98.0%``, ``234.4 GB/s``,
    ``46.1 steps/s``."""
    if units.missing(v):
        return "-"
    sign = "+" if signed and v > 0 else ""
    if figure == "mean_step_ns":
        return sign + units.duration(v) + "/step"
    if figure.endswith("_ns"):
        return sign + units.duration(v)
    if figure.endswith("_gbps"):
        return f"{v:{sign},.1f} GB/s"
    if figure.endswith("_per_s"):
        return f"{v:{sign},.2f} steps/s"
    return f"{v * 100:{sign}.1f}%" if not signed else f"{v * 100:+.1f} pt"


PER_STEP = ("mean_step_ns", "throughput_steps_per_s")
"""Figures of a step, shown first in each group (the unit rule: per step first, the window's totals after)."""


def _per_step_first(g: pd.DataFrame) -> pd.DataFrame:
    first = g["figure"].isin(PER_STEP).to_numpy()
    order = np.r_[np.flatnonzero(first), np.flatnonzero(~first)]
    return g.iloc[order]


def _groups(d: Diff) -> list[tuple[str, pd.DataFrame]]:
    """The figures by pair (the pair's label taken out of each subject), then those across ranks; in each, the
    figures of a step first (:data:`PER_STEP`)."""
    return [(label, _per_step_first(g)) for label, g in _pairs_of(d)]


def _pairs_of(d: Diff) -> list[tuple[str, pd.DataFrame]]:
    labels = [label for label, _, _ in d.pairs if label]
    if not labels:
        return [("", d.figures)]
    subj = d.figures["subject"].astype(str)
    out = []
    taken = np.zeros(len(subj), dtype=bool)
    for label in labels:
        mine = ((subj == label) | subj.str.startswith(label + ": ")).to_numpy() & ~taken
        taken |= mine
        g = d.figures[mine].copy()
        g["subject"] = [s[len(label) + 2:] if s.startswith(label + ": ") else "" for s in g["subject"]]
        out.append((label, g))
    if (~taken).any():
        out.append(("across ranks", d.figures[~taken]))
    return out


def render(console: Console, d: Diff) -> None:
    """Print the pairs, the figures side by side (per pair), then the kernels whose total time changed most (each name
    whole where it fits, else shortened in the middle with ``…``: never cut without one, never wrapped mid-name)."""
    for label, a, b in d.pairs:
        if label:
            console.print(cell(f"{label}:"), soft_wrap=True)
        console.print(cell(f"  A {a}"), soft_wrap=True)
        console.print(cell(f"  B {b}"), soft_wrap=True)
    for label, g in _groups(d):
        title = ((f"{label}: " if label else "") + "figures: A, B and the change (B - A; pt: percentage points; the step "
                 "first and then times over each trace's whole window)")
        t = Table(title=cell(title), title_justify="left", show_edge=False)
        for h in ("figure", "subject", "A", "B", "change"):
            t.add_column(h, justify="left" if h in ("figure", "subject") else "right")
        for f, subject, a, b, delta in zip(g["figure"], g["subject"], g["a"], g["b"], g["delta"]):
            t.add_row(figure_name(f), cell(subject_words(f, subject)), value(f, a), value(f, b), value(f, delta, signed=True))
        console.print(t)
    if not d.kernels.empty:
        rows = _kernel_rows(d)
        traces = any(label for label, _, _ in rows)
        k = Table(title="kernels whose total time changed most", title_justify="left", show_edge=False)
        for h in ("trace", "device", "kernel", "A", "B", "change") if traces else ("device", "kernel", "A", "B", "change"):
            k.add_column(h, justify="left" if h in ("kernel", "trace") else "right", no_wrap=True)
        wide = max((len(str(rec["device_label"])) for _, _, rec in rows), default=6)  # (cuda:0, or a pair: cuda:3 / cuda:1)
        room = max(console.width - 39 - wide - (24 if traces else 0), 20)  # (device, three times and the gaps around them)
        for (label, _, rec), name in zip(rows, shortened([name for _, name, _ in rows], room)):
            k.add_row(*([cell(shorten(label, 22))] if traces else []), rec["device_label"], cell(name),
                      units.duration(rec["a_ns"]), units.duration(rec["b_ns"]), value("delta_ns", rec["delta_ns"], signed=True))
        console.print(k)
    for side, paths in (("A", d.only_a), ("B", d.only_b)):
        for p in paths:
            console.print(cell(f"only in {side}: {p}", style="yellow"))


@dataclass(frozen=True)
class DiffRenderer:
    """``traceprobe diff``'s human table (:func:`render`) as text: ``width`` columns (None: 140), ANSI colours with ``color``."""

    width: int | None = None
    color: bool = False
    name: str = "table"

    def render(self, d: Diff) -> str:
        """The pairs, figures and kernels as text."""
        buf = io.StringIO()
        console = Console(file=buf, width=self.width or 140, force_terminal=self.color, no_color=not self.color,
                          color_system="standard" if self.color else None, legacy_windows=False)
        render(console, d)
        return buf.getvalue()


def document(d: Diff) -> dict[str, Any]:
    """``{"schema", "figures": [{figure, subject, a, b, delta}], "kernels", "pairs", "only_a", "only_b"}``."""
    return {
        "schema": SCHEMA_VERSION,
        "figures": rows(d.figures),
        "kernels": rows(d.kernels),
        "pairs": [{"label": label, "a": a, "b": b} for label, a, b in d.pairs],
        "only_a": list(d.only_a),
        "only_b": list(d.only_b),
    }


def to_json(d: Diff) -> str:
    """:func:`document` as indented JSON text."""
    return json.dumps(document(d), indent=2) + "\n"


def to_csv(d: Diff) -> str:
    """The figures as CSV (``figure, subject, a, b, delta``)."""
    return d.figures.to_csv(index=False)


def to_tsv(d: Diff) -> str:
    """The figures as tab-separated values (``figure, subject, a, b, delta``; ns and 0..1 fractions, as CSV)."""
    return d.figures.to_csv(index=False, sep="\t")


def to_markdown(d: Diff) -> str:
    """The figures and the kernel changes as Markdown tables, in human units with the unit named
    (JSON and CSV keep integer ns and 0..1 fractions)."""
    parts = []
    for label, g in _groups(d):
        t = pd.DataFrame({"figure": [figure_name(f) for f in g["figure"]],
                          "subject": [subject_words(f, x) for f, x in zip(g["figure"], g["subject"])],
                          "A": [value(f, v) for f, v in zip(g["figure"], g["a"])], "B": [value(f, v) for f, v in zip(g["figure"], g["b"])],
                          "change": [value(f, v, signed=True) for f, v in zip(g["figure"], g["delta"])]})
        parts.append(f"## Figures{': ' + label if label else ''}\n\n" + t.to_markdown(index=False, colalign=("left", "left", "right", "right", "right")))
    if not d.kernels.empty:
        k = d.kernels
        t = pd.DataFrame({"device": k["device_label"].to_numpy(), "kernel": k["name"].to_numpy(),
                          "A": [units.duration(x) for x in k["a_ns"]], "B": [units.duration(x) for x in k["b_ns"]],
                          "change": [value("delta_ns", x, signed=True) for x in k["delta_ns"]]})
        parts.append("## Kernels whose total time changed most\n\n" + t.to_markdown(index=False))
    return "\n\n".join(parts) + "\n"
