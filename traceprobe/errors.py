"""traceprobe's one exception type, and :class:`Failure`, a file that could not be analysed."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


class TraceFormatError(Exception):
    """A trace file could not be read or is not a usable Chrome/Kineto trace.

    Attributes:
        path: the file that was being read.
        reason: one line saying what is wrong, for a person.

    ``str(err)`` is ``"<path>: <reason>"``, the single line the CLI prints.
    """

    def __init__(self, path: str | Path, reason: str) -> None:
        self.path = str(path)
        self.reason = reason
        super().__init__(f"{self.path}: {reason}")

    def __reduce__(self) -> tuple[type, tuple[str, str]]:  # pickled across processes with its two fields
        return (TraceFormatError, (self.path, self.reason))


@dataclass(frozen=True)
class Failure:
    """A file that could not be analysed: ``path`` and a one-line ``error`` (for a person)."""

    path: str
    error: str
