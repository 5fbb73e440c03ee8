"""Recorded multi-rank runs in sample_traces (a folder of scenarios, one subfolder each, what was built in one JSON
line each in ``injected.jsonl``): each window replayed, and the scenarios as test parameters."""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping
from pathlib import Path

import pytest

from traceprobe import load_trace
from traceprobe.analysis.causal.dependency_graph import rank_graph
from traceprobe.analysis.causal.what_if_windows import WindowWhatIf, window_instances, window_what_if
from traceprobe.analysis.job.collectives import WindowCollectives, collective_table, match_window


def replayed(folder: Path) -> tuple[WindowCollectives, WindowWhatIf]:
    """The one window of a scenario's rank traces: its matched collectives and its what-ifs (its ranks replayed)."""
    traces = [load_trace(p) for p in sorted(folder.glob("*.pt.trace.json.gz"))]
    w = match_window({t.rank: collective_table(t) for t in traces})
    return w, window_what_if(folder.name, "", "", [rank_graph(t) for t in traces], window_instances(w))


def scenarios(root: Path, misses: Mapping[str, str], fast: Collection[str], keep: Callable[[dict], bool] = lambda f: True) -> list:
    """``(folder, facts)`` parameters of every scenario under ``root``'s ``*/injected.jsonl`` that ``keep`` keeps, with
    id ``<run>/<scenario>``: skipped with its reason where in ``misses``, marked slow unless in ``fast``."""
    out = []
    for facts_file in sorted(root.glob("*/injected.jsonl")):
        for facts in map(json.loads, facts_file.read_text().splitlines()):
            if not keep(facts):
                continue
            key = f"{facts_file.parent.name}/{facts['folder']}"
            marks = [pytest.mark.skip(reason=misses[key])] if key in misses else [] if key in fast else [pytest.mark.slow]
            out.append(pytest.param(facts_file.parent / facts["folder"], facts, id=key, marks=marks))
    return out
