"""``overlap-report``'s first screen printed as it comes: each run's windows as soon as its traces are analysed.

:func:`traceprobe.collect.analyze_paths` hands out each run's summary (``on_part``) in the first screen's order; the
lines of its windows (:class:`traceprobe.report.first_screen.FirstScreen`) are written at once. On a pipe the folder
summary, notes and legend come last; on a terminal, a live region under the lines (rich ``Live``) shows how many traces
are done and the folder summary so far, repainted in place, and gives way to the last lines at the end.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.text import Text

from ..analysis.summary import Summary
from ..console import write_stdout
from ..report.first_screen import FirstScreen, claims_lines, stream_base
from ..report.table import to_text


class Stream:
    """The first screen written part by part (module doc).

    Args:
        width: the columns to fit.
        console: a rich Console on a terminal (the live region), None on a pipe (plain lines on stdout).
        ranks, every: ``--ranks`` and ``--all`` (:class:`~traceprobe.report.first_screen.FirstScreen`).
    """

    def __init__(self, width: int, console: Console | None = None, ranks: bool = False, every: bool = False) -> None:
        self.width, self.console, self.ranks, self.every = width, console, ranks, every
        self.screen: FirstScreen | None = None
        self.live: Live | None = None
        self.total = self.done = 0

    def __enter__(self) -> Stream:
        if self.console is not None:
            self.live = Live(Text(""), console=self.console, transient=True, refresh_per_second=8)
            self.live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.live is not None:
            self.live.__exit__(*exc)
            self.live = None

    def files(self, files: list[str]) -> None:
        """The traces about to be analysed (``on_files``): how many, and the folder they share."""
        self.total = len(files)
        self.screen = FirstScreen(self.width, len(files), stream_base(files), self.ranks, self.every)
        self._repaint()

    def one_done(self, _: Any) -> None:
        """A trace finished (``on_done``)."""
        self.done += 1
        self._repaint()

    def part(self, summary: Summary) -> None:
        """A run's summary (``on_part``): its lines, now."""
        assert self.screen is not None
        self._write(self.screen.part(summary))
        self._repaint()

    def end(self, summary: Summary) -> None:
        """The whole summary: what comes after the windows."""
        if self.screen is None:  # (nothing was found to analyse)
            self.files([])
        assert self.screen is not None
        self.__exit__(None, None, None)
        self._write(self.screen.end(summary))

    def _write(self, lines: list[Text]) -> None:
        if not lines:
            return
        if self.console is None:
            write_stdout(to_text(lines, False))
            return
        for t in lines:
            self.console.print(t, soft_wrap=True, highlight=False, crop=False)

    def _repaint(self) -> None:
        if self.live is None or self.screen is None:
            return
        n = len(self.screen.views)
        head = Text(f"{self.done}/{self.total} traces analysed, {n} window{'' if n == 1 else 's'} so far", style="dim")
        self.live.update(Group(head, *claims_lines(self.screen.views, self.width)), refresh=True)
