"""Run a child job (torchrun and its ranks) so that it never outlives ``record``.

The child starts in its own session (a new process group, which its own
children join), so the whole job can be signalled at once. If ``record`` ends
while the job runs (Ctrl-C, SIGTERM, an exception, the time limit), the group
gets SIGTERM, then SIGKILL after :data:`GRACE_S`. If ``record`` itself is killed
outright (``kill -9``), Linux sends the child SIGTERM (``PR_SET_PDEATHSIG``);
torchrun then stops its ranks.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
from collections.abc import Callable

GRACE_S = 10.0
"""Seconds between SIGTERM and SIGKILL when a job is stopped."""


def _die_with_parent() -> Callable[[], None] | None:
    if not sys.platform.startswith("linux"):
        return None

    def preexec() -> None:  # runs in the child between fork and exec
        try:
            ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass

    return preexec


def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):  # the group is gone already
        pass


def stop_group(proc: subprocess.Popen[str]) -> None:
    """SIGTERM ``proc``'s process group, SIGKILL what is left of it after :data:`GRACE_S`, and reap ``proc``."""
    _killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=GRACE_S)
    except subprocess.TimeoutExpired:
        pass
    _killpg(proc.pid, signal.SIGKILL)  # ranks that ignored SIGTERM or outlived torchrun
    proc.wait()


def run_job(cmd: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    """Run ``cmd`` in its own process group, capturing its output as text; the group is stopped if we stop.

    Raises:
        subprocess.TimeoutExpired: ``timeout`` seconds passed (the group is stopped first).
        KeyboardInterrupt and every other exception: after the group is stopped.
    """
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=_die_with_parent())
    try:
        out, err = proc.communicate(timeout=timeout)
    except BaseException:
        stop_group(proc)
        raise
    _killpg(proc.pid, signal.SIGKILL)  # ranks left behind by a torchrun that has ended
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)
