"""``traceprobe mcp``: a Model Context Protocol server (the official ``mcp`` SDK's :class:`MCPServer`) whose tools
answer narrow questions over a folder or trace with small JSON answers (:mod:`.answers`, :mod:`.explain`).

Each path is analysed once per server process (:class:`Analyses`: again only where its files changed), so the
questions after the first about a folder cost milliseconds. The tools are thin: each finds its summary and window,
then returns an answer of :mod:`.answers`. A question with no answer (no such window, step or trace, a path with no
trace) is the tool's error, one sentence naming what exists.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from ..analysis.diff import diff as diff_summaries
from ..analysis.summary import Summary
from ..collect import analyze_paths, discover
from ..version import __version__
from . import answers
from .explain import explain, figures

INSTRUCTIONS = """traceprobe reads PyTorch profiler (Kineto) traces and says what slowed each profiler window: its
claims, each a cause with what removing it gives back (replayed on the job's dependency graph) and the action it calls
for. Start with folder_summary(path) on a folder or trace file; then window_claims(path, run, window) for a window's
ranked claims with their evidence; critical_path for where a step's time went; top_kernels for a device's kernels;
diff(before, after) for two runs; explain_figure(name) for what a figure or cause means. Times are integer
nanoseconds (*_ns), fractions 0..1; each claim's label gives its figure in words."""


class Analyses:
    """Summaries by path, each analysed once per process (:func:`traceprobe.collect.analyze_paths`) and analysed again
    only where its trace files changed (their names, sizes and modification times). Thread-safe: one analysis at a
    time.

    Args:
        jobs: worker processes per analysis (None: the CPU count, at most one per file; 1: in this process).
    """

    def __init__(self, jobs: int | None = None) -> None:
        self.jobs = jobs
        self._lock = threading.Lock()
        self._cache: dict[str, tuple[tuple[Any, ...], Summary]] = {}

    @staticmethod
    def _signature(files: list[Any]) -> tuple[Any, ...]:
        out = []
        for f in files:
            try:
                st = os.stat(f)
                out.append((str(f), st.st_size, st.st_mtime_ns))
            except (OSError, TypeError, ValueError):  # (an fsspec URL: its name alone)
                out.append((str(f),))
        return tuple(out)

    def get(self, path: str) -> Summary:
        """The summary of ``path`` (a trace, a summary or a folder of them).

        Raises:
            LookupError: no trace could be read there, the message giving the first reasons.
        """
        key = str(Path(path).expanduser().resolve()) if "://" not in path else path
        with self._lock:
            files, failures = discover([key])
            sig = self._signature(files)
            hit = self._cache.get(key)
            if hit is not None and hit[0] == sig:
                return hit[1]
            summary = analyze_paths([path], jobs=self.jobs) if files else None  # (names as the client gave them)
            if summary is None or not summary.reports:
                why = [f"{f.path}: {f.error}" for f in (summary.failures if summary is not None else failures)][:3]
                raise LookupError(f"no trace could be read at {path}" + (": " + "; ".join(why) if why else ""))
            self._cache[key] = (sig, summary)
            return summary


@contextmanager
def _answerable() -> Iterator[None]:
    """A question with no answer (:class:`LookupError`) as the tool's error, its sentence sent to the client (the SDK
    keeps any other exception's text on the server: a crash)."""
    try:
        yield
    except LookupError as e:
        raise ToolError(str(e.args[0] if e.args else e)) from e


def build_server(jobs: int | None = None) -> MCPServer:
    """The server and its tools, over one :class:`Analyses` cache (``jobs``: its worker processes)."""
    cache = Analyses(jobs)
    server = MCPServer("traceprobe", instructions=INSTRUCTIONS, version=__version__)

    @server.tool()
    def folder_summary(path: str, top: int = 5) -> dict[str, Any]:
        """What a folder of traces (or one trace) holds: how many traces, runs and windows, the largest claims across it
        and where they are, and its windows by the gain of their top claim, with each window's run and window label to
        ask window_claims about.

        Args:
            path: a trace file (.json, .json.gz), a summary, or a folder of them (searched recursively).
            top: how many of the largest claims to give.
        """
        with _answerable():
            return answers.folder_summary(cache.get(path), path, top=top)

    @server.tool()
    def window_claims(path: str, run: str | None = None, window: str | None = None, top: int = 5) -> dict[str, Any]:
        """A window's ranked claims: each cause of lost time with its rank, what removing it gives back in total and per
        step (and its share of a step), its evidence (the op or kernel holding most of it, its gain step by step, where
        the critical path ran on its rank) and the one action it calls for (do), then the straggler where ranks waited.

        Args:
            path: as folder_summary's.
            run: the run's name, or its end (a folder name); left out: any.
            window: the window's label (steps 2-4); left out: the window whose top claim gives back the most.
            top: how many claims to give.
        """
        with _answerable():
            return answers.window_answer(answers.find_window(cache.get(path), run, window), top=top)

    @server.tool()
    def critical_path(path: str, run: str | None = None, window: str | None = None, step: int | None = None,
                      top: int = 8) -> dict[str, Any]:
        """Where a step's time went: the critical path of the window (the chain of work that ended last, across host,
        streams and ranks), its parts by rank, lane and cause with their share and the kernel or op holding most of
        each, and its longest segments.

        Args:
            path, run, window: as window_claims'.
            step: the ProfilerStep number; left out: the whole window.
            top: how many parts and segments to give.
        """
        with _answerable():
            return answers.critical_path_answer(answers.find_window(cache.get(path), run, window), step=step, top=top)

    @server.tool()
    def top_kernels(path: str, trace: str | None = None, rank: int | None = None, device: int | None = None,
                    top: int = 5) -> dict[str, Any]:
        """The kernels, copies and memsets with the most device time on each device of one trace: count, total, mean,
        longest and share of the device's time.

        Args:
            path: as folder_summary's.
            trace: part of the trace's file path, to pick one trace of several.
            rank: the rank whose trace to read.
            device: the device index (0 for cuda:0); left out: every device.
            top: how many kernels per device.
        """
        with _answerable():
            return answers.kernels_answer(answers.pick_report(cache.get(path), trace, rank), device=device, top=top)

    @server.tool()
    def diff(before: str, after: str, top: int = 10) -> dict[str, Any]:
        """Two runs compared (before and after a change): each pair of traces with its top claim before and after, the
        figures that changed most and the kernels whose time changed most. Traces pair one to one, by file name inside
        the folders, or by rank and window.

        Args:
            before, after: traces or folders, as folder_summary's path.
            top: how many figures and kernels to give.
        """
        with _answerable():
            a, b = cache.get(before), cache.get(after)
            d = diff_summaries(a, b, before if Path(before).is_dir() else "", after if Path(after).is_dir() else "")
            return answers.diff_answer(d, a, b, top=top)

    @server.tool()
    def explain_figure(name: str | None = None) -> dict[str, Any]:
        """What a figure of the report (a key of a trace's JSON object: copy_overlap, breakdown, idle_causes...) or a
        what-if cause (imbalance, sync, data_loading...) means: its definition, where it is computed and its fields.

        Args:
            name: the figure or cause; left out: the list of figures.
        """
        with _answerable():
            return {"figures": figures()} if not name else explain(name)

    return server


def serve(jobs: int | None = None) -> None:
    """Run the server on stdin and stdout until the client closes them."""
    build_server(jobs).run("stdio")
