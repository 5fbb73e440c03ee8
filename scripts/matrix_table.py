"""Print the markdown table of a folder of recorded scenarios (sample_traces/matrix, sample_traces/heldout/*): each
scenario's built-in cause as its injected.jsonl says (measured in the run), the top what-if ``overlap-report`` gives
(the table's top finding), and the gain against the built-in time.

Usage: python scripts/matrix_table.py FOLDER [FOLDER...]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from traceprobe.collect import analyze_paths


def table(folder: Path) -> list[str]:
    """The table's lines for one folder of scenarios (one subfolder each, facts in ``injected.jsonl``)."""
    facts = {f["folder"]: f for f in map(json.loads, (folder / "injected.jsonl").read_text().splitlines())}
    lines = ["| run | parallelism | ranks | built in | top what-if | gain against built in |", "| --- | --- | --- | --- | --- | --- |"]
    for name, f in sorted(facts.items()):
        summary = analyze_paths([str(folder / name)], jobs=1)
        label = next((w.label() for w in summary.what_ifs), "") or "no what-if above the noise floor"
        top = next((w.top for w in summary.what_ifs if w.top is not None), None)
        built = f["injected_ms_per_step"]
        who = "every rank" if f["late_rank"] is None and f["cause_kind"] != "none" else f"rank {f['late_rank']}" if f["late_rank"] is not None else "-"
        off = f"{(top['per_step_ns'] / 1e6 - built) / built:+.0%}" if top is not None and built > 0 else ""
        lines.append(f"| `{name}` | {f['parallelism']} | {f.get('world_size', '')} | {who}: {f['cause']} ({built:.1f} ms/step) | "
                     f"{label} | {off} |")
    return lines


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        print(f"\n{arg}\n")
        print("\n".join(table(Path(arg))))
