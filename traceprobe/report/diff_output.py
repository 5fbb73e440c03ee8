"""Outputs of ``traceprobe diff``: a rich table, JSON, CSV and Markdown of a :class:`~traceprobe.analysis.diff.Diff`."""

from __future__ import annotations

import json
import math
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..analysis.diff import Diff
from .json_document import SCHEMA_VERSION, rows


def _value(figure: str, v: float, signed: bool = False) -> str:
    if v is None or math.isnan(v):
        return "-"
    sign = "+" if signed else ""
    if figure.endswith("_ns"):
        return f"{v / 1e6:{sign},.3f} ms"
    if figure.endswith("_gbps") or figure.endswith("_per_s"):
        return f"{v:{sign},.2f}"
    return f"{v:{sign}.1%}"


def render(console: Console, d: Diff) -> None:
    """Print the figures side by side, then the kernels whose total time changed most."""
    for label, a, b in d.pairs:
        console.print(Text(f"A: {a}\nB: {b}" + (f"  ({label})" if label else ""), style="dim"))
    t = Table(title="figures: A, B and the change (B - A)", title_justify="left", show_edge=False)
    for h in ("figure", "subject", "A", "B", "change"):
        t.add_column(h, justify="left" if h in ("figure", "subject") else "right")
    for rec in d.figures.to_dict(orient="records"):
        f = rec["figure"]
        t.add_row(f, rec["subject"], _value(f, rec["a"]), _value(f, rec["b"]), _value(f, rec["delta"], signed=True))
    console.print(t)
    if not d.kernels.empty:
        k = Table(title="kernels whose total time changed most", title_justify="left", show_edge=False)
        for h in ("device", "kernel", "A ms", "B ms", "change ms"):
            k.add_column(h, justify="left" if h == "kernel" else "right", overflow="fold")
        for rec in d.kernels.to_dict(orient="records"):
            k.add_row(str(rec["device"]), rec["name"][:100], f"{rec['a_ns'] / 1e6:,.3f}", f"{rec['b_ns'] / 1e6:,.3f}", f"{rec['delta_ns'] / 1e6:+,.3f}")
        console.print(k)
    for side, paths in (("A", d.only_a), ("B", d.only_b)):
        for p in paths:
            console.print(Text(f"only in {side}: {p}", style="yellow"))


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


def to_markdown(d: Diff) -> str:
    """The figures and the kernel changes as Markdown tables."""
    parts = ["## Figures\n\n" + d.figures.to_markdown(index=False)]
    if not d.kernels.empty:
        parts.append("## Kernels whose total time changed most\n\n" + d.kernels.to_markdown(index=False))
    return "\n\n".join(parts) + "\n"
