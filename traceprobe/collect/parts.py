"""Each run summarised as soon as its traces are analysed: the parts of :func:`traceprobe.collect.analyze_paths`'s
``on_part``, merged at the end into the summary of every trace (:func:`traceprobe.analysis.summary.merge`)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..manifest import info_for as manifest_info
from ..reading.files import is_url

if TYPE_CHECKING:
    from ..analysis.summary import Summary


class Parts:
    """:func:`analyze_paths`' parts (its ``on_part``): the files in the order of their runs on the first screen, and
    each run summarised as soon as its last trace comes back, in that order."""

    def __init__(self, files: list[str | Path], on_part: Callable[[Summary], None], align_clocks: bool) -> None:
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

    def add(self, i: int, result: Any) -> None:
        """Item ``i`` of :attr:`work` came back: summarise every run now complete, in order."""
        from ..analysis.per_trace import OverlapReport
        from ..analysis.summary import summarize

        self._got[i] = result
        self._left[self._part[i]] -= 1
        while self._next < len(self._left) and self._left[self._next] == 0:
            items = [self._got.pop(j) for j in self._items[self._next]]
            reports = [r[0] if isinstance(r, tuple) else r for r in items]
            reports = [r for r in reports if isinstance(r, OverlapReport)]
            self._next += 1
            if reports:
                part = summarize(reports, align_clocks=self._align)
                self.parts.append(part)
                self._on_part(part)

    def in_file_order(self, results: list) -> list:
        """``results`` of :attr:`work` put back in the order of the files."""
        out: list[Any] = [None] * len(results)
        for k, i in enumerate(self._where):
            out[i] = results[k]
        return out
