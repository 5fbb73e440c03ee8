"""SIGTERM as the command line takes it (``kill``, torchrun stopping the surviving ranks, a scheduler's limit)."""

from __future__ import annotations

import os
from typing import Any

TERMINATED_EXIT = 143
"""The exit status after SIGTERM: 128 + 15, as a shell reports a process SIGTERM ended."""
_TERMINATED: list[int] = []


def sigterm_as_ctrl_c() -> None:
    """SIGTERM (``kill``, torchrun stopping the surviving ranks, a scheduler's limit) unwinds as Ctrl-C does: every
    ``with`` block closes, so no write leaves its temporary file (:mod:`traceprobe.fileio`); then exit
    :data:`TERMINATED_EXIT`. A process forked from it (a worker, a decoding helper) unwinds as SystemExit, once, which
    ``multiprocessing`` ends quietly (a timeout's signal to the process group, then the command's own, printed tracebacks)."""
    import signal

    command = os.getpid()

    def on_term(signum: int, frame: Any) -> None:
        _TERMINATED.append(signum)
        if os.getpid() != command:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            raise SystemExit(TERMINATED_EXIT)
        raise KeyboardInterrupt(f"signal {signum}")

    try:
        signal.signal(signal.SIGTERM, on_term)
    except ValueError:  # not the main thread (an embedding program): its signals are its own
        pass
