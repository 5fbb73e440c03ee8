"""``overlap-report --format markdown``: a page per trace, then the across-trace tables."""

from __future__ import annotations

from ..analysis.summary import Summary
from .sections import collective_sections, integer_ns, rank_rows, sections


def to_markdown(summary: Summary) -> str:
    """Markdown: a heading, the verdicts and the tables for each trace; across ranks, stopwatch, failures."""
    out = []
    for r in summary.reports:
        name = ".".join(x for x in (r.info.get("workload"), r.info.get("variant")) if x) or r.path
        out.append(f"## {name}\n\n`{r.path}`")
        if r.info.get("wall_s") is not None:
            out.append(f"Wall clock (one timed run): {r.info['wall_s'] * 1e3:,.1f} ms")
        out.append("\n".join([f"- **{v.level}**: {v.text}" for v in r.verdicts] + [f"- note: {n}" for n in r.notes]) or "- no figure to judge")
        for name_, df in sections(r).items():
            if name_ != "verdicts" and not df.empty:
                out.append(f"### {name_}\n\n" + integer_ns(df).to_markdown(index=False))
    if not summary.rank_summary.empty:
        out.append("## Across ranks\n\n" + rank_rows(summary.rank_summary).to_markdown(index=False))
    for c in summary.collectives:
        head = (f"## Collectives across ranks: {c.run}, {c.window}\n\n{c.matched} matched across ranks "
                f"{', '.join(map(str, c.ranks))}; straggler: {'rank ' + str(c.straggler_rank) if c.straggler_rank is not None else 'none'}; "
                f"clocks: {c.clock}")
        notes = [f"- {m}" for m in c.mismatched]
        if c.implausible:
            notes.append(f"- {c.implausible} collective(s) end on one rank before they start on another: the clocks disagree by at least {c.max_offset_ns:,} ns")
        out.append("\n\n".join([head, *(["\n".join(notes)] if notes else []),
                                  *(integer_ns(df).to_markdown(index=False) for df in collective_sections(c).values() if not df.empty)]))
    variants = summary.variants
    if (variants["agreement"] != "baseline").any():
        out.append("## Stopwatch against evidence\n\n" + variants.to_markdown(index=False))
    if summary.failures:
        out.append("## Failures\n\n" + "\n".join(f"- `{f.path}`: {f.error}" for f in summary.failures))
    return "\n\n".join(out) + "\n"
