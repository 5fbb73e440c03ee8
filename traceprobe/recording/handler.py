"""``traceprobe.on_trace_ready``: a ``torch.profiler`` handler that writes each window's trace and summary off the training thread.

::

    import torch, traceprobe
    with torch.profiler.profile(schedule=torch.profiler.schedule(wait=5, warmup=1, active=3, repeat=4),
                                on_trace_ready=traceprobe.on_trace_ready("runs/job")) as prof:
        for batch in loader:
            train_step(batch)
            prof.step()

For each rank and profiler window it writes, in ``folder``:

- ``rank<R>.steps<A>-<B>.summary.json``: the window's summary (:mod:`traceprobe.summary_file`), which
  ``overlap-report``, ``diff`` and the gates read like the trace (``rank<R>.window<N>`` where the window has no
  ``ProfilerStep``);
- ``rank<R>.steps<A>-<B>.pt.trace.json.gz``: the trace, unless ``trace=False``;
- with ``log``, one line per window through ``log(line)`` (a callable such as ``print`` or ``logger.info``), in
  the spirit of torchtitan's overlap line: step time, busy, hidden communication, exposed communication and idle
  per step, and the top finding.

How it stays out of the way of training:

- the call torch makes at the end of a window only takes a reference to that window's results and queues
  it: torch starts the next window with a new results object, so the old one stays whole;
- one background thread per handler has each window's events written to a temporary file (Kineto's ``save``)
  by a child forked for it (``save="fork"``, the default where ``os.fork`` exists): the training process stops
  only while the kernel copies its page tables (14-24 ms per window measured on 2 GPUs), where writing them
  from the thread itself (``save="thread"``, the default elsewhere) holds the interpreter's lock for the whole
  save (a loop of Python ops on the training thread stood still for 696 ms of the 704 ms save of a 77 MB trace of
  60,000 CPU ops, torch 2.13), so that the training thread issues no work meanwhile. The thread then hands the file to a separate
  Python process (at a lower CPU priority, :mod:`.summary_process`) that reads, analyses and writes the summary,
  gzips the trace into place and prints the log line;
  the training process never imports pandas for it;
- nothing raises into the training loop: any error (a read-only folder, a full disk, a trace that cannot be
  analysed) is logged once per handler on the ``traceprobe`` logger (each later one at debug level) and the
  window is skipped; a summary that cannot be written costs the summary, not the trace, and neither costs
  the job. Files are written whole or not at all (:mod:`traceprobe.fileio`);
- at interpreter exit the handler waits up to :data:`EXIT_WAIT_S` for the windows still queued
  (:meth:`TraceReady.wait` waits where you choose).

Rank: ``torch.distributed.get_rank()`` when initialised, else ``RANK``, else 0. Job (written in each summary,
so that summaries of another job in the folder are named when read): ``job``, else ``TORCHELASTIC_RUN_ID``,
``SLURM_JOB_ID``, else the folder's name.

Importing this module imports neither torch nor pandas.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..fileio import remove_leftovers_of, scratch_path
from .summary_process import remove_quietly

EXIT_WAIT_S = 600.0
"""How long interpreter exit waits for the windows still being written."""

_logger = logging.getLogger("traceprobe")


def _rank() -> int:
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return int(dist.get_rank())
    except Exception:  # noqa: BLE001 - a rank is never worth an exception in the training loop
        pass
    try:
        return int(os.environ.get("RANK", "0"))
    except ValueError:
        return 0


class TraceReady:
    """The handler :func:`on_trace_ready` returns: call it with the profiler at the end of each window (torch does).

    Attributes:
        folder: where the files go.
        written: one dict per window finished (``summary``, ``trace``: paths or None; ``line``; ``error``: str or None).
        errors: the errors met, one line each (the first was logged as a warning).
        fork_pauses_s: with ``save="fork"``, how long each fork held this process's calling thread, in s.
    """

    def __init__(self, folder: str | Path, trace: bool = True, log: Callable[[str], Any] | None = None, job: str | None = None,
                 save: str = "fork") -> None:
        self.folder = Path(folder)
        self.save = "fork" if save == "fork" and hasattr(os, "fork") else "thread"
        self.trace = trace
        self.log = log
        self.job = job
        self.written: list[dict[str, Any]] = []
        self.errors: list[str] = []
        self.fork_pauses_s: list[float] = []
        self._queue: queue.Queue[tuple[Any, int, int] | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._windows = 0
        atexit.register(self.wait, EXIT_WAIT_S)

    def __call__(self, prof: Any) -> None:
        """torch.profiler's ``on_trace_ready``: queue this window's results; never raises, returns at once."""
        try:
            inner = getattr(prof, "profiler", None)
            if inner is None or getattr(inner, "kineto_results", None) is None:
                self._error("the profiler holds no results for this window (was it stopped before its first step?)")
                return
            self._windows += 1
            self._queue.put((inner, _rank(), self._windows))
            self._start()
        except Exception as e:  # noqa: BLE001 - never into the training loop
            self._error(f"cannot queue the window: {type(e).__name__}: {e}")

    def summarize(self, trace: str | Path) -> None:
        """Queue the summary of a trace already written (``<stem>.pt.trace.json[.gz]``): ``<stem>.summary.json`` is
        written beside it by the same process as a window's (:func:`.summary_process.summarize_trace`); how :func:`traceprobe.capture`
        and ``traceprobe record --script`` write theirs. Never raises, returns at once."""
        try:
            self._windows += 1
            self._queue.put((Path(trace), _rank(), self._windows))
            self._start()
        except Exception as e:  # noqa: BLE001 - never into the profiled code
            self._error(f"cannot queue the summary of {trace}: {type(e).__name__}: {e}")

    def _start(self) -> None:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._work, name="traceprobe-on-trace-ready", daemon=True)
                self._thread.start()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until every window queued so far is written (or ``timeout`` s); True when none is left."""
        self._queue.join() if timeout is None else _join(self._queue, timeout)
        return self._queue.unfinished_tasks == 0

    def _error(self, line: str) -> None:
        self.errors.append(line)
        try:
            if len(self.errors) == 1:
                _logger.warning("traceprobe.on_trace_ready (%s): %s; training goes on, later errors at debug level", self.folder, line)
            else:
                _logger.debug("traceprobe.on_trace_ready (%s): %s", self.folder, line)
        except Exception:  # noqa: BLE001
            pass

    def _work(self) -> None:
        while True:
            try:
                item = self._queue.get(timeout=5.0)
            except queue.Empty:
                return
            try:
                if item is not None:
                    inner, rank, n = item
                    item = None
                    if isinstance(inner, Path):  # a trace already in place (summarize)
                        self._summarize(inner, rank, n, written=True)
                        continue
                    tmp = self._export(inner, rank, n)
                    del inner  # the window's events leave this process before its analysis starts
                    if tmp is not None:
                        self._summarize(tmp, rank, n)
            except Exception as e:  # noqa: BLE001 - a window lost, never the thread
                self._error(f"{type(e).__name__}: {e}")
            finally:
                self._queue.task_done()

    def _export(self, inner: Any, rank: int, n: int) -> Path | None:
        """The window's events in a temporary file of the folder (None, the error logged, where they cannot be written)."""
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            self._error(f"cannot create {self.folder}: {e.strerror or e}")
            return None
        try:  # (named by fileio's pattern; what a killed process of this rank left before this one started goes)
            remove_leftovers_of(self.folder / f"rank{rank}.pt.trace.json")
            tmp = scratch_path(self.folder, f"rank{rank}.pt.trace.json")
        except OSError as e:
            self._error(f"cannot write the trace of window {n} of rank {rank}: {_with_cause(str(e), self.folder)}")
            return None
        try:
            if self.save == "fork":
                self.fork_pauses_s.append(_forked_export(inner, tmp))
            else:
                inner.export_chrome_trace(str(tmp))
        except Exception as e:  # noqa: BLE001 - a full disk, a read-only folder, ...
            _remove_export(tmp)
            self._error(f"cannot write the trace of window {n} of rank {rank}: {_with_cause(str(e), self.folder)}")
            return None
        try:
            size = tmp.stat().st_size
        except OSError:
            size = 0
        if size == 0:  # torch's exporter says nothing where the disk filled up under it: name the cause, not the empty file
            _remove_export(tmp)
            self._error(f"cannot write the trace of window {n} of rank {rank}: "
                        f"{_with_cause('the profiler exported an empty file', self.folder)}")
            return None
        return tmp

    def _summarize(self, tmp: Path, rank: int, n: int, written: bool = False) -> None:
        """Run the summary's process on the temporary trace (or, ``written``, on a trace in place, which is kept
        whatever happens); keep its result, log its line."""
        from ..summary_file import default_job  # (msgspec only: no pandas in the training process)

        job = self.job if self.job is not None else default_job(self.folder)
        args = ["--trace", str(tmp), job] if written else [str(tmp), str(self.folder), str(rank), str(n), job, "1" if self.trace else "0"]
        cmd = [sys.executable, "-m", "traceprobe.recording.summary_process", *args]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, check=False, env={**os.environ, "PYTHONWARNINGS": "ignore"})
        except OSError as e:
            if not written:
                remove_quietly(tmp)
            self._error(f"cannot start the summary's process: {e}")
            return
        out = _last_json(done.stdout)
        if out is None:
            if not written:
                remove_quietly(tmp)
            self._error(f"the summary's process of window {n} of rank {rank} failed (exit {done.returncode}): "
                        f"{(done.stderr.strip().splitlines() or ['no message'])[-1]}")
            return
        self.written.append(out)
        if out.get("error"):
            self._error(_with_cause(out["error"], self.folder))
        if self.log is not None and out.get("line"):
            try:
                self.log(out["line"])
            except Exception as e:  # noqa: BLE001
                self._error(f"the log callback raised {type(e).__name__}: {e}")


def _remove_export(tmp: Path) -> None:
    """Remove a lost window's files: the scratch name and the file torch's exporter writes beside it (``<name>.tmp``,
    renamed over the scratch name only when the export ends well: a full disk leaves it)."""
    remove_quietly(tmp)
    remove_quietly(tmp.with_name(tmp.name + ".tmp"))


FULL_BELOW = 1 << 20
"""A folder whose file system has less free than this (1 MiB) is taken as full."""


def _with_cause(error: str, folder: Path) -> str:
    """``error`` led by its likely cause where the folder's file system is full (a trace cut short, an empty
    file, a summary that could not be read back are what a full disk looks like from the files), else as it is."""
    import shutil

    try:
        free = shutil.disk_usage(folder).free
    except OSError:
        return error
    if free >= FULL_BELOW or "No space left" in error:
        return error
    return f"no space left on the device of {folder} ({free:,} bytes free): {error}"


def _forked_export(inner: Any, tmp: Path, timeout_s: float = EXIT_WAIT_S) -> float:
    """Write the window's events from a forked child (``save="fork"``): the child holds a copy of them and writes
    with its own interpreter lock, so the training thread runs at full speed; the fork itself stops every thread
    of the process for as long as the kernel takes to copy its page tables. The child touches no device.

    Raises:
        OSError: the fork failed, or the child did not write the file (exit status) within ``timeout_s``.
    """
    import signal
    import time

    t = time.perf_counter()
    pid = os.fork()
    if pid == 0:  # the child: write and leave at once, running no exit handler of the parent
        code = 1
        try:
            inner.export_chrome_trace(str(tmp))
            code = 0
        finally:
            os._exit(code)
    pause = time.perf_counter() - t
    end = time.monotonic() + timeout_s
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > end:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise OSError(f"the process writing the events took over {timeout_s:.0f} s: killed")
        time.sleep(0.02)
    if os.waitstatus_to_exitcode(status) != 0:
        raise OSError(f"the process writing the events failed (exit {os.waitstatus_to_exitcode(status)})")
    return pause


def _join(q: queue.Queue, timeout: float) -> None:
    import time

    end = time.monotonic() + timeout
    while q.unfinished_tasks and time.monotonic() < end:
        time.sleep(0.05)


def _last_json(text: str) -> dict[str, Any] | None:
    for line in reversed(text.strip().splitlines()):
        try:
            out = json.loads(line)
        except ValueError:
            continue
        if isinstance(out, dict):
            return out
    return None


def on_trace_ready(folder: str | Path, trace: bool = True, log: Callable[[str], Any] | None = None, job: str | None = None,
                   save: str = "fork") -> TraceReady:
    """A ``torch.profiler.profile(on_trace_ready=...)`` handler writing each window's summary and trace (module docstring).

    Args:
        folder: where every rank writes (created if missing).
        trace: also keep the trace (gzipped); False writes the summary alone.
        log: called with one line per window (``print``, ``logger.info``), from a background thread.
        job: the job written in each summary (default: ``TORCHELASTIC_RUN_ID``, ``SLURM_JOB_ID``, the folder's name).
        save: how the window's events are written: ``fork`` (the default: by a forked child, one pause of the
            whole process while it forks, then nothing; POSIX only, else ``thread``) or ``thread`` (by a background
            thread, which holds the interpreter's lock for the whole save). What a window costs a training loop
            either way is measured by ``scripts/handler_run.py --paired --probe`` (``docs/jobs.md``).

    Returns:
        a :class:`TraceReady` (callable with the profiler; ``wait()`` waits for the windows queued).
    """
    return TraceReady(folder, trace, log, job, save)
