"""Each run summarised as soon as its traces are analysed: the parts of :func:`traceprobe.collect.analyze_paths`'s
``on_part``, merged at the end into the summary of every trace (:func:`traceprobe.analysis.summary.merge`)."""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..manifest import info_for as manifest_info
from ..reading.files import is_url

if TYPE_CHECKING:
    from ..analysis.summary import Summary


WORKER_NICE = 10
"""Niceness added to the worker processes while this process summarises runs beside them (:func:`map_items`'
``nice``): the summary of the runs so far takes a CPU first (``sample_traces/`` on 2 CPUs, 541 traces, CPU-bound:
the runs summarised beside the workers at their own priority, the summaries ended 7.7 s after the last trace; at
niceness 3, 62.2 s of wall; at 10, 60.5 s against 67.2 s)."""


class Parts:
    """:func:`analyze_paths`' parts (its ``on_part``): the files in the order of their runs on the first screen, and
    each run summarised as soon as its last trace comes back, in that order.

    With ``beside`` (local worker processes analyse the files), the runs are summarised in a thread of this process,
    so that the thread that hands the files to the workers and takes their reports never waits for a summary: done in
    that thread, a run's summary (up to 0.8 s in ``sample_traces/``) left both workers idle once they had sent the
    reports they held (``overlap-report sample_traces/`` on 2 CPUs: 117 s of CPU in 67 s of wall). :attr:`forks` is
    held while a run is summarised: a worker process forked meanwhile would copy the locks the summary holds
    (:func:`~traceprobe.collect.execution.map_items`' ``forks``), and the workers run at :data:`WORKER_NICE`.
    :meth:`finish` (:meth:`finished`) waits for the last
    summary and raises what summarising raised."""

    def __init__(self, files: list[str | Path], on_part: Callable[[Summary], None], align_clocks: bool,
                 beside: bool = False) -> None:
        from ..analysis.run import _folder, run_name
        from ..analysis.summary import display_key

        try:
            base = os.path.commonpath([_folder(str(f)) for f in files]) if files else ""
        except ValueError:  # (absolute and relative paths mixed)
            base = ""

        infos = [manifest_info(f) if not is_url(f) else {} for f in files]
        folders = [_folder(str(f)) for f in files]
        keys = [display_key(run_name(str(f), info), d, base) for f, info, d in zip(files, infos, folders)]
        # a trace its folder's manifest lacks, beside traces it names, may join one of their runs by its own rank and
        # steps, known once read (analysis.run): that folder's runs are one part, under the first of their keys
        named = {d for d, info in zip(folders, infos) if info.get("workload")}
        lacking = {d for d, info in zip(folders, infos) if d in named and not info.get("workload")}
        first = {d: min(k for k, e in zip(keys, folders) if e == d) for d in lacking}
        keys = [first.get(d, k) for k, d in zip(keys, folders)]
        self._where = sorted(range(len(files)), key=lambda i: (keys[i], i))
        self.work = [files[i] for i in self._where]
        self._part: list[int] = []  # the part of each item of work
        self._items: list[list[int]] = []  # the items of each part
        for n, i in enumerate(self._where):
            if n == 0 or keys[i] != keys[self._where[n - 1]]:
                self._items.append([])
            self._part.append(len(self._items) - 1)
            self._items[-1].append(n)
        self._left = [len(x) for x in self._items]
        self._got: dict[int, Any] = {}
        self._next = 0
        self._on_part, self._align = on_part, align_clocks
        self.parts: list[Summary] = []
        self.forks = threading.Lock()
        self.nice = WORKER_NICE if beside else 0
        self._runs: queue.SimpleQueue[list[Any] | None] | None = queue.SimpleQueue() if beside else None
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def add(self, i: int, result: Any) -> None:
        """Item ``i`` of :attr:`work` came back: summarise every run now complete, in order (in the thread, where
        there is one). Raises what summarising an earlier run raised."""
        from ..analysis.per_trace import OverlapReport

        self._raise()
        self._got[i] = result
        self._left[self._part[i]] -= 1
        while self._next < len(self._left) and self._left[self._next] == 0:
            items = [self._got.pop(j) for j in self._items[self._next]]
            reports = [r[0] if isinstance(r, tuple) else r for r in items]
            reports = [r for r in reports if isinstance(r, OverlapReport)]
            self._next += 1
            if not reports:
                continue
            if self._runs is None:
                self._summarise(reports)
                continue
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, daemon=True)
                self._thread.start()
            self._runs.put(reports)

    def options(self) -> dict[str, Any]:
        """:func:`~traceprobe.collect.execution.map_items`' arguments for these parts: ``on_index``, ``forks``, ``nice``."""
        return {"on_index": self.add, "forks": self.forks, "nice": self.nice}

    def finish(self) -> None:
        """Wait for every run handed to the thread to be summarised; raise what summarising raised."""
        if self._thread is not None and self._runs is not None:
            self._runs.put(None)
            self._thread.join()
            self._thread = None
        self._raise()

    def _summarise(self, reports: list[Any]) -> None:
        from ..analysis.summary import summarize

        part = summarize(reports, align_clocks=self._align)
        self.parts.append(part)
        self._on_part(part)

    def _serve(self) -> None:
        assert self._runs is not None
        while (reports := self._runs.get()) is not None:
            if self._error is not None:
                continue  # (the error is raised in the caller's thread; nothing more is summarised)
            with self.forks:
                try:
                    self._summarise(reports)
                except BaseException as e:  # noqa: BLE001 - raised in the caller's thread (add, finish)
                    self._error = e

    def _raise(self) -> None:
        if self._error is not None:
            raise self._error

    def finished(self, results: list) -> list:
        """``results`` of :attr:`work` put back in the order of the files, once every run is summarised
        (:meth:`finish`)."""
        self.finish()
        out: list[Any] = [None] * len(results)
        for k, i in enumerate(self._where):
            out[i] = results[k]
        return out
