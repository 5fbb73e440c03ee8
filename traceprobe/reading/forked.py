"""What a process that traceprobe forks does first: end when its parent does (the workers of
:mod:`traceprobe.collect.execution`, the decoding helpers of :mod:`.shares`)."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time


def die_with_parent(parent: int) -> None:
    """End this (forked) process when its parent ``parent`` dies, however it dies (SIGKILL included):
    on Linux the kernel sends it SIGKILL (``prctl(PR_SET_PDEATHSIG)``); elsewhere a daemon thread
    checks the parent id every second. A worker blocked on its pipe would otherwise wait forever,
    holding the caller's stdout and stderr open."""
    if sys.platform.startswith("linux"):
        import ctypes

        try:
            if ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0) == 0:  # 1: PR_SET_PDEATHSIG
                if os.getppid() != parent:  # it died before the prctl
                    os._exit(1)
                return
        except (OSError, AttributeError):
            pass

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(1)

    threading.Thread(target=watch, daemon=True).start()
