"""``overlap-report --format markdown``: a page per trace, then the across-trace tables."""

from __future__ import annotations

from ..analysis.summary import Summary
from .sections import sections


def to_markdown(summary: Summary) -> str:
    """Markdown: a heading, the verdicts and the tables for each trace; across ranks, stopwatch, failures."""
    out = []
    for r in summary.reports:
        name = ".".join(x for x in (r.info.get("workload"), r.info.get("variant")) if x) or r.path
        out.append(f"## {name}\n\n`{r.path}`")
        if r.info.get("wall_s") is not None:
            out.append(f"Wall clock (one timed run): {r.info['wall_s'] * 1e3:,.1f} ms")
        out.append("\n".join(f"- **{v.level}**: {v.text}" for v in r.verdicts) or "- no figure to judge")
        for name_, df in sections(r).items():
            if name_ != "verdicts" and not df.empty:
                out.append(f"### {name_}\n\n" + df.to_markdown(index=False))
    if not summary.rank_summary.empty:
        out.append("## Across ranks\n\n" + summary.rank_summary.to_markdown(index=False))
    variants = summary.variants
    if (variants["agreement"] != "baseline").any():
        out.append("## Stopwatch against evidence\n\n" + variants.to_markdown(index=False))
    if summary.failures:
        out.append("## Failures\n\n" + "\n".join(f"- `{f.path}`: {f.error}" for f in summary.failures))
    return "\n\n".join(out) + "\n"
