"""``overlap-report --format markdown``: a page per trace, then the across-trace tables.

A format for people: times in human units with the unit named (``58.0 ms``, ``1.92 s``),
fractions as percentages, and column names without the ``_ns`` the cells no longer need.
JSON and CSV keep integer nanoseconds and 0..1 fractions.
"""

from __future__ import annotations

import pandas as pd
from tabulate import tabulate

from ..analysis.summary import Summary
from . import units
from .actions import tops_by_path
from .clock_notes import clock_head, clock_rows, reported
from .grid import cell
from .sections import collective_sections, rank_rows, sections, trace_notes

WORD = {"confirmed": "yes", "partial": "some", "none": "no", "n/a": "n/a"}
"""Verdict levels in the words of the summary table (:mod:`.table`, which imports rich: not imported here)."""

FRACTIONS = ("fraction", "concurrency", "utilization", "overlap", "vs_best", "share", "value")
"""Column names (or their ends) holding a 0..1 fraction, shown as a percentage."""


def _is_fraction(name: str, s: pd.Series) -> bool:
    return s.dtype.kind == "f" and (name in FRACTIONS or name.startswith("fraction") or name.endswith(tuple("_" + f for f in FRACTIONS)))


def human(df: pd.DataFrame, origin_ns: int | None = None) -> dict[str, list]:
    """``df`` for a person, as column name: cells (plain Python values; :func:`table` lays them out): ``*_ns``
    columns as durations with their unit (the column renamed without ``_ns``; a float ``*_ns`` figure rounded
    to the ns first, as :func:`.sections.integer_ns` does for JSON and CSV), fraction columns as percentages,
    text escaped onto one line; other columns as they are. With ``origin_ns`` (the trace window's start),
    ``*_start_ns``/``*_end_ns`` times read as offsets from it (``+12.3 ms``), not as clock readings.

    Column by column on lists: converting each small table to nullable integers first (``integer_ns``)
    took about half of the Markdown's time."""
    out = {}
    for c in df.columns:
        name, s = str(c), df[c]
        is_ns = name.endswith("_ns") or "_ns_" in name
        if is_ns and s.dtype.kind in "fiuO":
            vs = s.tolist()
            if name.endswith("_ns") and s.dtype.kind == "f":
                vs = [v if units.missing(v) else round(v) for v in vs]
            if origin_ns is not None and name.endswith(("start_ns", "end_ns")):
                out[name.replace("_ns", "")] = ["-" if units.missing(v) else ("+" if v >= origin_ns else "") + units.duration(v - origin_ns)
                                                 for v in vs]
            else:
                out[name.replace("_ns", "")] = [units.duration(v) for v in vs]
        elif _is_fraction(name, s):
            out[name] = [units.percent(v, 1) for v in s.tolist()]
        elif s.dtype.kind == "O":
            out[name] = ["-" if units.missing(v) else v if isinstance(v, (int, float)) else cell(v).plain for v in s.tolist()]
        elif s.dtype.kind in "fiu" and s.isna().any():  # (an integer column with a gap, e.g. no rank: '-', not 'nan')
            whole = all(units.missing(v) or float(v).is_integer() for v in s.tolist())
            out[name] = ["-" if units.missing(v) else (f"{int(v)}" if whole else f"{v:g}") for v in s.tolist()]
        else:
            out[name] = s.tolist()
    return out


def table(cols: dict[str, list]) -> str:
    """A pipe table of ``cols`` (column name: cells), as ``pd.DataFrame(cols).to_markdown(index=False)`` writes it.

    Where a cell is text, the frame's values are Python objects, the cells as they are: tabulate reads them
    without a frame (building one per small table was a third of the Markdown's time). A table of numbers
    only goes through the frame, whose values are of one type (an integer next to a float column is a float)."""
    if any(isinstance(v, str) for cells in cols.values() for v in cells):
        return tabulate(cols, headers="keys", tablefmt="pipe", showindex=False)
    return pd.DataFrame(cols).to_markdown(index=False)


SECTION_NOTES = {"breakdown": "times over the whole trace window; per step: breakdown_steps",
                 "devices": "times over the whole trace window", "streams": "times over the whole trace window"}
"""What a section's times are, where they are window totals (the unit rule: per step first, totals labelled)."""


def per_step_first(cols: dict[str, list]) -> dict[str, list]:
    """The findings' columns with ``per step`` (``374.9 µs/step``; ``-`` without steps) before the headroom, labelled
    ``headroom in the window``."""
    if "per_step" not in cols or "headroom" not in cols:
        return cols
    per = [v if v == "-" or v.startswith("-") else f"{v}/step" for v in cols["per_step"]]
    out: dict[str, list] = {}
    for k, v in cols.items():
        if k == "headroom":
            out["per step"] = per
            out["headroom in the window"] = v
        elif k != "per_step":
            out[k] = v
    return out


def _rank_rows(df: pd.DataFrame) -> pd.DataFrame:
    """The across-rank figures by name, each row's values in its own unit (:func:`.job_text.value`), per step first,
    then shares, then the window's totals, labelled (the unit rule: :mod:`.job_text`'s order)."""
    from .job_text import FIGURES, figure_label, value

    order = {key: i for i, (key, _, _) in enumerate(FIGURES)}
    df = df.assign(_group=pd.factorize(df["run"].astype(str) + "\0" + df["window"].astype(str))[0],
                   _order=[order.get(str(f), len(order)) for f in df["figure"]])
    df = df.sort_values(["_group", "_order"], kind="stable").drop(columns=["_group", "_order"])
    out = df.copy().astype({c: object for c in ("min", "median", "max")})
    labels = [figure_label(str(f)) for f in df["figure"]]
    for c in ("min", "median", "max"):
        out[c] = [value(kind, v) for (_, kind), v in zip(labels, df[c])]
    out["figure"] = [name for name, _ in labels]
    return out.rename(columns={"busiest_rank": "most work (rank)", "most_comm_rank": "most comm (rank)"})


def to_markdown(summary: Summary) -> str:
    """Markdown: a heading, the verdicts and the tables for each trace; across ranks, the clocks where there is an
    offset to report (:mod:`.clock_notes`), stopwatch, failures."""
    out = []
    tops = tops_by_path(summary)
    for r in summary.reports:
        name = ".".join(x for x in (r.info.get("workload"), r.info.get("variant")) if x) or r.path
        out.append(f"## {name}\n\n`{r.path}`")
        if r.info.get("wall_s") is not None:
            out.append(f"Wall clock (one timed run): {r.info['wall_s'] * 1e3:,.1f} ms")
        out.append("\n".join([f"- **{WORD.get(v.level, v.level)}**: {cell(v.text).plain}" for v in r.verdicts]
                             + [f"- note: {cell(n).plain}" for n in trace_notes(r)]) or "- no figure to judge")
        top = tops.get(r.path)
        if top is not None:
            out.append(f"Top finding: {cell(top.label).plain}" + (f"; do: {top.do}" if top.do else ""))
        for name_, df in sections(r).items():
            if name_ != "verdicts" and not df.empty:
                cols = human(df, r.window_ns[0])
                if name_ == "findings":
                    cols = per_step_first(cols)
                head = f"### {name_}" + (f" ({SECTION_NOTES[name_]})" if name_ in SECTION_NOTES else "")
                out.append(f"{head}\n\n" + table(cols))
    if not summary.rank_summary.empty:
        out.append("## Across ranks\n\n" + _rank_rows(rank_rows(summary.rank_summary)).to_markdown(index=False))
    for c in summary.collectives:
        head = (f"## Collectives across ranks: {c.run}, {c.window}\n\n{c.matched} matched across ranks "
                f"{', '.join(map(str, c.ranks))}; straggler: {'rank ' + str(c.straggler_rank) if c.straggler_rank is not None else 'none'}; "
                f"clocks: {c.clock}")
        notes = [f"- {m}" for m in c.mismatched]
        if c.implausible:
            notes.append(f"- {c.implausible} collective(s) end on one rank before they start on another: the clocks disagree by at least "
                         f"{units.duration(c.max_offset_ns)}")
        out.append("\n\n".join([head, *(["\n".join(notes)] if notes else []),
                                  *(table(human(df)) for df in collective_sections(c).values() if not df.empty)]))
    clocks = reported(summary)
    if clocks:
        out.append("## Clocks across ranks\n\n" + "\n\n".join(
            f"### {c.run}, {c.window}\n\n{clock_head(c)}" + ("\n\n" + clock_rows(c).to_markdown(index=False) if c.supported else "")
            for c in clocks))
    variants = summary.variants
    if (variants["agreement"] != "baseline").any():
        out.append("## Stopwatch against evidence\n\n" + table(human(variants)))
    if summary.failures:
        out.append("## Failures\n\n" + "\n".join(f"- `{f.path}`: {f.error}" for f in summary.failures))
    return "\n\n".join(out) + "\n"
