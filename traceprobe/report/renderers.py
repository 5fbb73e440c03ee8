"""One contract for every output of ``overlap-report``: a :class:`Renderer`, picked by ``--format``.

A renderer has a format ``name`` and ``render(summary) -> str | bytes``. It takes the
finished :class:`~traceprobe.analysis.summary.Summary` and only lays it out: it computes
no figure, reads no file and writes none (the CLI writes what it returns, atomically,
through :func:`traceprobe.console.emit`). Every renderer runs in the command's own
process, after the analysis, so each output has exactly one route.

Adding a format: a module with a class having ``name`` and ``render``, and one entry in
:data:`FORMATS` and :func:`renderer`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from ..analysis.summary import Summary

FORMATS = ("table", "tsv", "json", "csv", "markdown")
"""The names ``--format`` takes, in the order the help lists them."""


@runtime_checkable
class Renderer(Protocol):
    """An output format: ``name`` (what ``--format`` calls it) and ``render``."""

    @property
    def name(self) -> str:
        """The format's name, as ``--format`` takes it."""
        ...

    def render(self, summary: Summary) -> str | bytes:
        """The whole output for ``summary``: text (or bytes for a binary format). Never writes a file."""
        ...


class _Function:
    """A plain ``summary -> str`` function behind the contract."""

    def __init__(self, name: str, fn: Any) -> None:
        self.name = name
        self._fn = fn

    def render(self, summary: Summary) -> str:
        """``fn(summary)``."""
        return self._fn(summary)


def renderer(name: str, *, width: int | None = None, color: bool = False, detail: bool = False, ranks: bool = False,
             every: bool = False) -> Renderer:
    """The renderer of format ``name`` (one of :data:`FORMATS`).

    Args:
        name: the format.
        width: columns a human format fits (``table``; None: natural width, as for a pipe or a file).
        color: ANSI colours (``table``, for a terminal).
        detail: ``table`` only: every table of every trace (:mod:`.panels`) instead of the first screen
            (:mod:`.first_screen`).
        ranks, every: ``table`` only: every rank's row, every window's block (:mod:`.first_screen`).

    Raises:
        ValueError: an unknown format.
    """
    if name == "table":
        if detail:
            from .panels import DetailRenderer

            return DetailRenderer(width=width, color=color)
        from .first_screen import FirstScreenRenderer

        return FirstScreenRenderer(width=width, color=color, ranks=ranks, every=every)
    if name == "tsv":
        from .tsv import TsvRenderer

        return TsvRenderer()
    if name == "json":
        from .json_document import to_json

        return _Function("json", to_json)
    if name == "csv":
        from .csv_long import to_csv

        return _Function("csv", to_csv)
    if name == "markdown":
        from .markdown import to_markdown

        return _Function("markdown", to_markdown)
    raise ValueError(f"unknown format {name!r}: one of {', '.join(FORMATS)}")
