"""``traceprobe mcp``: the Model Context Protocol server, asked by the SDK's own client in memory (real sample traces).

Each answer is small JSON (a few KB); the top claim of ``sample_traces/causes/ddp-compute`` is rank 1's extra device
work (``injected.csv``: 21.3 ms/step of extra compute on rank 1).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest

pytest.importorskip("mcp.server.mcpserver")

from mcp import Client  # noqa: E402

from traceprobe.agent.server import build_server  # noqa: E402
from traceprobe.collect import analyze_paths  # noqa: E402

SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"
DDP = str(SAMPLES / "causes" / "ddp-compute")
SMALL = 8_000
"""Bytes an answer stays under (a window's claims with their evidence are the largest: about 5 KB)."""

TOOLS = {"folder_summary", "window_claims", "critical_path", "top_kernels", "diff", "explain_figure"}


SERVER = build_server(jobs=1)
"""One server for the module's tests, as one client process would keep it: each path is analysed once."""


def _ask(calls: list[tuple[str, dict]]) -> tuple[list[str], list, list[float]]:
    """The server's tool names, then each call's result and its seconds, through one in-memory client session."""
    server = SERVER
    out: list = []
    seconds: list[float] = []

    async def main() -> list[str]:
        async with Client(server) as client:
            names = [t.name for t in (await client.list_tools()).tools]
            for name, args in calls:
                t = time.perf_counter()
                out.append(await client.call_tool(name, args))
                seconds.append(time.perf_counter() - t)
            return names

    names = anyio.run(main)
    return names, out, seconds


def _json(result) -> dict:
    assert not result.is_error, result.content
    text = result.content[0].text
    assert len(text.encode()) < SMALL, len(text)
    return json.loads(text)


def test_lists_its_tools_and_names_ddp_computes_straggler_quickly(monkeypatch):
    """The tools are listed; the first question about ddp-compute (analysed then) answers rank 1, extra device work, in
    about 1.2 s on an idle 2-core machine (the bound is loose: 60 s, for a loaded one); the next questions about the
    same folder read the analysis of the first (analysed once)."""
    import traceprobe.agent.server as server

    analysed = []
    monkeypatch.setattr(server, "analyze_paths", lambda paths, **kw: analysed.append(paths) or analyze_paths(paths, **kw))
    names, (first, again, summary), seconds = _ask([("window_claims", {"path": DDP}), ("window_claims", {"path": DDP, "top": 2}),
                                                   ("folder_summary", {"path": DDP})])
    assert analysed in ([[DDP]], [])  # (once, here or by a test before)
    assert TOOLS <= set(names)
    top = _json(first)["claims"][0]
    assert (top["rank"], top["cause"]) == (1, "imbalance") and "extra device work" in top["label"]
    assert top["replayed"] and top["gain_per_step_ns"] > 10_000_000 and top["do"]
    assert "sm80_xmma_gemm" in top["evidence"]["holds_most"]  # (the kernel rank 1 ran longer)
    assert seconds[0] < 60, seconds
    assert len(_json(again)["claims"]) == 2
    s = _json(summary)
    assert (s["traces"], s["runs"], s["windows"]) == (2, 1, 1)
    assert s["largest_claims"][0]["label"] == top["label"]


def test_critical_path_kernels_diff_and_a_figure():
    """A step's critical path is rank 1's GEMMs; rank 1's top kernel is that GEMM; a diff of prefetch-off against
    prefetch-on (two single-trace folders whose file names differ) pairs them and names each side's top claim; a
    figure is explained by the docstring of the function computing it."""
    off, on = str(SAMPLES / "causes" / "prefetch-off"), str(SAMPLES / "causes" / "prefetch-on")
    _, results, _ = _ask([
        ("critical_path", {"path": DDP, "step": 3}),
        ("top_kernels", {"path": DDP, "rank": 1, "top": 3}),
        ("diff", {"before": off, "after": on}),
        ("explain_figure", {"name": "copy_overlap"}),
        ("critical_path", {"path": DDP, "step": 99}),
        ("top_kernels", {"path": DDP}),
    ])
    path, kernels, diff, figure = (_json(r) for r in results[:4])
    part = path["parts"][0]
    assert path["step"] == 3 and (part["rank"], part["cause"]) == (1, "compute") and part["share"] > 0.5
    assert path["path_ns"] > 0 and len(path["longest_segments"]) <= 8
    (rows,) = kernels["devices"].values()
    assert kernels["rank"] == 1 and len(rows) == 3 and rows[0]["name"].startswith("sm80_xmma_gemm")
    assert diff["pair_count"] == 1 and "HtoD copy" in diff["pairs"][0]["a_top"]["label"]
    assert figure["source"] == "traceprobe.analysis.device.overlap.copy_overlap" and "overlapped_ns" in figure["definition"]
    assert results[4].is_error and "its steps: [2, 3, 4]" in results[4].content[0].text
    assert results[5].is_error and "rank 1" in results[5].content[0].text  # (two traces: which one)


def test_command_without_the_sdk_says_what_to_install():
    """Where the ``mcp`` package cannot be imported, ``traceprobe mcp`` is one line naming the extra, exit 2."""
    hide = ("import sys\nclass _No:\n    def find_spec(self, name, path=None, target=None):\n"
            "        if name == 'mcp' or name.startswith('mcp.'):\n"
            "            raise ModuleNotFoundError(name)\n"
            "sys.meta_path.insert(0, _No())\n"
            "from traceprobe.cli import main\nsys.argv = ['traceprobe', 'mcp']\nmain()\n")
    res = subprocess.run([sys.executable, "-c", hide], capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and res.stdout == ""
    assert "pip install 'traceprobe[mcp]'" in res.stderr and len(res.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_each_windows_first_claim_is_the_first_screens():
    """Over every scenario of sample_traces/causes/, each window's first claim is the finding the first screen gives
    its first rank (one ranked list, not a second model)."""
    from traceprobe.agent import answers
    from traceprobe.report.actions import top_findings

    summary = analyze_paths([str(SAMPLES / "causes")], jobs=1)
    tops = top_findings(summary)
    wins = answers.windows(summary)
    assert len(wins) == 14
    for win in wins:
        first = answers.claims(win)[0]
        assert first["label"] == tops[id(win.reports[0])].label, win.run
