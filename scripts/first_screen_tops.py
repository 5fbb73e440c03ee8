"""Each trace's first-screen finding and action, as JSON lines: to compare two versions of traceprobe over the same
traces (samples, public traces).

    python scripts/first_screen_tops.py sample_traces /path/to/public/traces > tops.jsonl

Each line: ``{"path": ..., "top": ..., "do": ...}`` for every trace found under the given paths (a trace without a
finding has ``top`` ""). Files that fail to load are listed with ``error``.
"""

from __future__ import annotations

import json
import sys

from traceprobe.analysis.summary import summarize
from traceprobe.collect import analyze_paths
from traceprobe.report.actions import top_findings


def main(paths: list[str]) -> None:
    s = analyze_paths(paths, jobs=1)
    summary = summarize(list(s.reports)) if not s.runs else s
    tops = top_findings(summary)
    for run in summary.runs:
        for win in run.windows:
            for rep in win.reports:
                t = tops.get(id(rep))
                print(json.dumps({"path": rep.path, "top": t.label if t else "", "do": t.do if t else ""}))
    for f in getattr(s, "failures", ()) or ():
        print(json.dumps({"path": str(getattr(f, "path", f)), "error": str(getattr(f, "message", ""))}))


if __name__ == "__main__":
    main(sys.argv[1:])
