"""Keep Kineto's start/stop chatter off the terminal while traceprobe drives the profiler.

torch 2.13's Kineto writes a line to the process's stderr (file descriptor 2, from
C++) each time a profiler starts or stops, e.g.::

    USDT:2026-11-23 06:58:27 9734:9734 SyncActivityProfilerHandler.cpp:52] profiler_start

(and ``STAGE:`` lines when ``KINETO_LOG_LEVEL`` is lowered). ``record --device
cpu`` printed 42 of them. ``KINETO_LOG_LEVEL=6`` hides them, but also every
Kineto warning and error (their levels are below ``USDT``'s 5), such as CUPTI
refusing to trace. So :class:`KinetoFilter` instead points descriptor 2 at a
scratch file only while the profiler starts, steps or stops, and then copies
every line but those two kinds to the real stderr, in order.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
from collections.abc import Iterator

NOISE = re.compile(rb"^(USDT|STAGE):\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \d+:\d+ [\w.]+:\d+\] ")
"""Kineto's own progress lines (``LoggerOutputType`` USDT and STAGE): dropped."""


class KinetoFilter:
    """A reusable filter; ``with kf.around():`` wraps one profiler start, step or stop."""

    def __init__(self) -> None:
        self._buf = tempfile.TemporaryFile()

    @contextlib.contextmanager
    def around(self) -> Iterator[None]:
        """Descriptor 2 goes to a scratch file while the block runs; the lines that are not :data:`NOISE` are copied on."""
        try:
            sys.stderr.flush()
            saved = os.dup(2)
        except (OSError, ValueError, AttributeError):  # no descriptor 2 (some embedded interpreters)
            yield
            return
        os.dup2(self._buf.fileno(), 2)
        try:
            yield
        finally:
            with contextlib.suppress(OSError, ValueError, AttributeError):
                sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            self._forward()

    def _forward(self) -> None:
        self._buf.seek(0)
        keep = b"".join(line for line in self._buf if not NOISE.match(line))
        self._buf.seek(0)
        self._buf.truncate()
        with contextlib.suppress(OSError):
            while keep:
                keep = keep[os.write(2, keep):]

    def close(self) -> None:
        self._buf.close()


@contextlib.contextmanager
def kineto_quiet() -> Iterator[None]:
    """One-shot :meth:`KinetoFilter.around`."""
    kf = KinetoFilter()
    try:
        with kf.around():
            yield
    finally:
        kf.close()
