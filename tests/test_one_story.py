"""Every view tells one story: the straggler sentence, the what-if and the critical path of a window name the same rank
where the window was replayed (recorded samples: sample_traces/matrix, 4x H200, what was built into each in its
injected.jsonl); the straggler's choice itself on SYNTHETIC what-ifs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from traceprobe.analysis.job.causes import straggler_of
from traceprobe.cli import app

MATRIX = Path(__file__).resolve().parent.parent / "sample_traces" / "matrix"
INJECTED = {f["folder"]: f for f in map(json.loads, (MATRIX / "injected.jsonl").read_text().splitlines())}


def _job_lines(folder: Path) -> list[str]:
    res = CliRunner().invoke(app, ["job", str(folder), "--jobs", "1"])
    assert res.exit_code == 0, res.output
    return res.stdout.splitlines()


def test_the_straggler_is_the_rank_the_replay_names():
    """mesh-compute: extra compute built into rank 0 (21.4 ms/step). Rank 1 arrived last more often (it waited for rank 0
    at an earlier collective of another group), but the straggler is rank 0, as the what-if and the critical path say."""
    lines = _job_lines(MATRIX / "mesh-compute")
    straggler = next(ln for ln in lines if ln.strip().startswith("straggler:"))
    what_if = next(ln for ln in lines if "if removed" in ln)
    path = next(ln for ln in lines if ln.strip().startswith("critical path:"))
    assert "rank 0 arrived last" in straggler and "gives back" in straggler, straggler
    assert what_if.strip().startswith("rank 0:"), what_if
    assert re.search(r"\d+% compute on rank 0 ", path), path


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(n for n, f in INJECTED.items() if (MATRIX / n).is_dir()))
def test_the_straggler_and_the_top_rank_what_if_agree(name):
    """Every recorded matrix scenario: where the job output names a straggler by its replayed cause, the first what-if
    of one rank names the same rank."""
    lines = _job_lines(MATRIX / name)
    straggler = next((ln for ln in lines if ln.strip().startswith("straggler:") and "gives back" in ln), None)
    ranked = [ln for ln in lines if re.match(r"\s+rank \d+: .* if removed", ln)]
    if straggler is None or not ranked:
        pytest.skip("no replayed straggler or no one-rank what-if")
    late = re.search(r"rank (\d+) arrived last", straggler)
    first = re.match(r"\s+rank (\d+):", ranked[0])
    assert late and first and late.group(1) == first.group(1), (straggler, ranked[0])


class _WhatIf:
    """SYNTHETIC stand-in for a replayed window: each rank's top what-if gain (ns), or none."""

    def __init__(self, gains: dict[int, int]) -> None:
        self.gains = gains

    def rank_top(self, rank: int) -> dict | None:
        g = self.gains.get(rank)
        return None if g is None else {"rank": rank, "cause": "imbalance", "gain_ns": g}


def test_the_straggler_choice():
    """SYNTHETIC: ranks 1 and 3 made others wait (1 the most); rank 3's own cause gives back more when removed: the
    replay names rank 3. Without a replay, or where no late rank has a cause of its own, the most wait caused names it."""
    caused = pd.Series({1: 9_000_000, 3: 5_000_000})
    assert straggler_of(caused, _WhatIf({1: 1_000_000, 3: 20_000_000}))[0] == 3  # type: ignore[arg-type]
    assert straggler_of(caused, _WhatIf({1: 4_000_000, 3: 4_000_000}))[0] == 1  # type: ignore[arg-type]  (a tie: most wait caused)
    assert straggler_of(caused, _WhatIf({0: 50_000_000}))[0] == 1  # type: ignore[arg-type]  (no late rank has a cause)
    assert straggler_of(caused, None) == (1, None)
