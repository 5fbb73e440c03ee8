"""How the table names a trace: its run relative to the folder every trace shares, and its window."""

from __future__ import annotations

import os
from pathlib import Path

from ..analysis.per_trace import OverlapReport
from ..analysis.summary import Summary


def _stem(path: str) -> str:
    name = Path(path).name
    for suffix in (".gz", ".json", ".trace", ".pt"):
        name = name[: -len(suffix)] if name.endswith(suffix) else name
    return name


def base_folder(summary: Summary) -> str:
    """The folder every trace of ``summary`` lies under (names are shown relative to it); empty when none."""
    folders = [str(Path(r.path).parent) for r in summary.reports]
    try:
        return os.path.commonpath(folders) if folders else ""
    except ValueError:  # absolute and relative paths mixed
        return ""


def relative(name: str, base: str) -> str:
    """``name`` relative to ``base`` (the folder every trace shares); the folder's own name for the folder itself."""
    rel = os.path.relpath(name, base) if base and not name.startswith(("s3:", "gs:")) else name
    if rel == ".":
        return Path(name).name or name
    return name if rel.startswith("..") else rel


def _places(summary: Summary) -> list[tuple[OverlapReport, str, str, int | None]]:
    """(report, run label, window label, rank) in run order. A trace with neither a workload
    nor a rank is labelled by its own file, unless it is alone in a folder of its own (below the
    folder every trace shares): then by that folder (``causes/startup``, not ``causes/sta…ace.1795669660981854245``:
    ``tensorboard_trace_handler`` names files by worker and time); its window (steps) is shown all the same."""
    base = base_folder(summary)
    out = []
    for run in summary.runs:
        alone = len(run.windows) == 1 and len(run.windows[0].reports) == 1 and Path(run.name) != Path(base)
        for w in run.windows:
            for rank, r in zip(w.ranks, w.reports):
                named = r.info.get("workload") or rank is not None or alone
                label = relative(run.name, base) if named else relative(str(Path(r.path).parent / _stem(r.path)), base)
                out.append((r, label, w.label, rank))
    return out
