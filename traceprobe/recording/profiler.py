"""Profile your own code: ``traceprobe.capture()`` and ``traceprobe.step()``.

::

    import traceprobe
    with traceprobe.capture("runs/mine") as cap:   # or @traceprobe.capture("runs/mine")
        for batch in loader:
            train_step(batch)
            cap.step()                              # or traceprobe.step()
    print(cap.report())                             # OverlapReport of cap.trace_path

``traceprobe record --script/--module`` (:mod:`traceprobe.recording.runner`) runs a whole program inside one
capture.

Windows
    Code that never calls :meth:`Capture.step` (or :func:`step`) is profiled whole: one trace, variant ``run``. Code
    that calls it is profiled in windows of steps, one trace each: see :mod:`traceprobe.recording.windows` (by
    default steps 2-4, one trace). A run profiled whole has no size bound: a trace over :data:`LARGE_TRACE_BYTES` of
    JSON gets a warning.

Files
    Traces go to ``out`` (default ``runs/<name>-<YYYYmmdd-HHMMSS>``), each with its summary
    (``<stem>.summary.json``, written off the profiled thread as :func:`traceprobe.on_trace_ready` writes them),
    written atomically (:mod:`traceprobe.fileio`), never over an existing file: a taken name gets ``-2``, ``-3``...
    after its variant. A window cut short by the end of the run or a failure is written as ``steps6-8-partial`` when
    one of its steps ended, else dropped; a whole run is written however it ended (status ``partial`` unless
    complete). ``manifest.json`` (:mod:`traceprobe.manifest`) lists the command line, the machine, each process
    (rank, target, options, exit code) and each trace, rewritten under its lock after every trace, so several ranks
    share one folder (a built-in ``record`` run cannot: :mod:`traceprobe.recording.folder_lock`).

Ranks
    Under torchrun (``RANK``/``LOCAL_RANK``/``WORLD_SIZE`` set) trace names include ``.rank<R>``, the default
    folder's time is the launcher's start time (the parent process), so every rank of a node picks the same folder,
    and a trace that lacks ``distributedInfo`` (the profiler started before ``init_process_group``, as in a
    whole-run trace) gets one with the rank, so ``overlap-report`` can summarize across ranks.

Importing this module does not import torch; starting a capture does. ``traceprobe.capture``, ``traceprobe.Capture``
and ``traceprobe.step`` are this module's :func:`capture`, :class:`Capture` and :func:`step`.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import manifest as mf
from .environment import dist_env, import_torch, process_record
from .folder_lock import FolderLock
from .quiet import KinetoFilter
from .teardown import hold_gloo_group
from .trace_files import check_writable, default_name, default_out, dist_info, write_trace
from .windows import Windows

if TYPE_CHECKING:
    from ..analysis import OverlapReport

LARGE_TRACE_BYTES = 256 * 2**20
"""JSON size above which a trace gets a warning: Perfetto UI may fail to open it."""


_ACTIVE: Capture | None = None

def step() -> None:
    """End the current step of the running capture (a no-op when none runs).

    A script run by ``traceprobe record --script`` calls this once per training
    iteration, at its end, as it would call ``torch.profiler.profile.step()``;
    run without traceprobe, the call does nothing and costs next to nothing.
    """
    if _ACTIVE is not None:
        _ACTIVE.step()


def current() -> Capture | None:
    """The running capture of this process, if any."""
    return _ACTIVE


class Capture(contextlib.ContextDecorator):
    """Profile the code between :meth:`start` and :meth:`stop` (a ``with`` block, a decorated call).

    See the module documentation for windows, files and ranks.

    Args:
        out: output folder (default ``runs/<name>-<YYYYmmdd-HHMMSS>``); may exist
            (ranks share one), no file in it is ever replaced.
        name: first part of trace names (default: the main script's name, else
            ``capture``).
        wait, warmup, active, repeat: the ``torch.profiler.schedule`` applied
            when steps are used (``repeat=0``: every cycle until the end).
        record_shapes, with_stack, profile_memory: passed to ``torch.profiler.profile``.
        cuda: record CUDA activity (default: where torch sees a CUDA device).
        target: what is run (for the manifest), e.g. ``{"script": "train.py", "args": [...]}``.
        command: the command line for the manifest (default ``sys.argv`` at start).
        echo: print what is written and any problem to stderr, ``traceprobe:`` first.
        summaries: write each trace's summary beside it, as :func:`traceprobe.on_trace_ready` does (:meth:`wait`).

    Attributes:
        out: the output folder (resolved at the first start).
        trace_paths: every trace written, in order.
        entries: their manifest entries (``status`` ``ok`` or ``partial``,
            ``steps`` [first, last] or None for a whole run, ``trace`` file name).
        steps: ``step()`` calls since the current (or last) start.
        notes: the messages about the run (also printed when ``echo``).
    """

    def __init__(
        self,
        out: str | Path | None = None,
        *,
        name: str | None = None,
        wait: int = Windows.wait,
        warmup: int = Windows.warmup,
        active: int = Windows.active,
        repeat: int = Windows.repeat,
        record_shapes: bool = False,
        with_stack: bool = False,
        profile_memory: bool = False,
        cuda: bool | None = None,
        target: dict[str, Any] | None = None,
        command: list[str] | None = None,
        echo: bool = True,
        summaries: bool = True,
    ) -> None:
        self.windows = Windows(wait, warmup, active, repeat)
        self.name = name or default_name()
        if "/" in self.name or "\\" in self.name or self.name.startswith("."):
            raise ValueError(f"name must be a plain file-name part, not {self.name!r}")
        self.out: Path | None = Path(out) if out is not None else None
        self.record_shapes, self.with_stack, self.profile_memory = record_shapes, with_stack, profile_memory
        self.cuda = cuda
        self.target = dict(target or {})
        self.command = list(command) if command is not None else None
        self.echo = echo
        self.rank, self.local_rank, self.world_size = dist_env()
        self.trace_paths: list[Path] = []
        self.entries: list[mf.Entry] = []
        self.notes: list[str] = []
        self.steps = 0
        self._prof: Any = None
        self._mode: str | None = None  # "run" (no step yet) or "steps"
        self._stepping = False
        self._starts = 0
        self._lock: FolderLock | None = None
        self._quiet: KinetoFilter
        self._group_held = False
        self._process: dict[str, Any] = {}
        self._summaries: Any = summaries  # then the handler writing them (recording.handler.TraceReady)

    # -- public -------------------------------------------------------------

    @property
    def trace_path(self) -> Path | None:
        """The latest trace written (open it in https://ui.perfetto.dev), or None."""
        return self.trace_paths[-1] if self.trace_paths else None

    @property
    def running(self) -> bool:
        return self._prof is not None

    def start(self) -> Capture:
        """Start profiling (whole-run mode until the first :meth:`step`).

        Raises:
            RuntimeError: another capture is running in this process, or this one is; ImportError: no torch.
            ValueError: ``cuda=True`` and torch sees no CUDA device.
            OSError: the output folder cannot be created or written.
        """
        global _ACTIVE
        if _ACTIVE is not None:
            raise RuntimeError(
                "a traceprobe capture is already running in this process (torch.profiler allows one at a time); "
                "a script run by 'traceprobe record' should call traceprobe.step(), not start its own capture"
            )
        torch = import_torch()  # (without it: one line that says what to do)
        ProfilerActivity = torch.profiler.ProfilerActivity  # noqa: N806 - torch's class

        has_cuda = torch.cuda.is_available()
        if self.cuda and not has_cuda:
            raise ValueError("CUDA activity was asked for, but torch sees no CUDA device")
        use_cuda = has_cuda if self.cuda is None else bool(self.cuda)
        self._activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if use_cuda else [])
        self._use_cuda = use_cuda
        if self.out is None:
            self.out = default_out(self.name)
        check_writable(self.out)
        if self._summaries is True:
            from .handler import on_trace_ready

            self._summaries = on_trace_ready(self.out)
        self._lock = FolderLock(self.out, shared=True)  # ranks share a folder; a built-in record run does not
        self._starts += 1
        self.steps = 0
        options = {**self.windows.options(), "record_shapes": self.record_shapes, "with_stack": self.with_stack,
                   "profile_memory": self.profile_memory, "cuda": use_cuda}
        self._process = process_record(self.command if self.command is not None else list(sys.argv), self.target or None, options)
        self._update_manifest()
        # torch warns, once per process, that each cycle drops the last one's events: one trace per window is the intent
        warnings.filterwarnings("ignore", message="Warning: Profiler clears events at the end of each cycle", category=UserWarning)
        self._mode = "run"
        self._quiet = KinetoFilter()
        self._prof = self._profile()
        with self._quiet.around():
            self._prof.__enter__()
        _ACTIVE = self
        return self

    def step(self) -> None:
        """End the current step (call at the end of each iteration); a no-op when not running.

        Exceptions while writing a finished window's trace are reported, never raised.
        """
        if self._prof is None:
            return
        self.steps += 1
        if not self._group_held:
            self._group_held = hold_gloo_group()
        if self._mode == "run":
            self._to_steps()
            return
        self._stepping = True
        try:
            with self._quiet.around():
                self._prof.step()
        finally:
            self._stepping = False

    def stop(self, *, exit_code: int | None = 0, error: str | None = None) -> None:
        """Stop profiling, write the trace of the whole run or of the window in progress, and the manifest.

        Args:
            exit_code: the code the profiled code ended with (0: normal end).
            error: a one-line description of an exception it ended with.
        """
        global _ACTIVE
        prof, mode = self._prof, self._mode
        if prof is None:
            return
        self._prof = None
        final = exit_code == 0 and error is None
        try:
            with self._quiet.around():
                prof.__exit__(None, None, None)  # a window in progress reaches _on_trace_ready (partial)
            if mode == "run":
                self._write(prof, "run", None, "ok" if final else "partial")
        except Exception as e:  # noqa: BLE001 - the run's own outcome matters more
            self._note(f"could not stop the profiler or write the trace: {type(e).__name__}: {e}")
        finally:
            _ACTIVE = None
            self._quiet.close()
        if mode == "steps" and not [e for e in self.entries if e.extra.get("start") == self._starts]:
            first = self.windows.first()
            self._note(
                f"no trace written: the run ended after {self.steps} step(s), before a step of the first window "
                f"(steps {first[0]}-{first[1]}) ended; lower --wait/--warmup/--active"
                if first else f"no trace written after {self.steps} step(s)"
            )
        self._process.update(
            {
                "finished": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                "status": "ok" if final else "failed",
                "exit_code": exit_code,
                "error": error,
                "steps": self.steps,
            }
        )
        self._update_manifest()
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def report(self, path: str | Path | None = None) -> OverlapReport:
        """The :class:`~traceprobe.analysis.OverlapReport` of ``path`` (default: :attr:`trace_path`).

        Raises:
            RuntimeError: no trace was written.
            TraceFormatError: the trace cannot be read.
        """
        p = Path(path) if path is not None else self.trace_path
        if p is None:
            raise RuntimeError("no trace written yet" + (f": {self.notes[-1]}" if self.notes else ""))
        from ..reading import load_trace
        from ..report.text import overlap_report  # (print(report): the text overlap-report prints)

        return overlap_report(load_trace(p), mf.info_for(p))

    def reports(self) -> list[OverlapReport]:
        """The overlap report of every trace written, in order."""
        return [self.report(p) for p in self.trace_paths]

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the summaries of the traces written so far are written (at most ``timeout`` s; interpreter exit
        waits up to 10 minutes); True when none is left."""
        return not self._summaries or self._summaries.wait(timeout)

    def __enter__(self) -> Capture:
        return self.start()

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        if exc_type is None:
            self.stop()
        elif issubclass(exc_type, SystemExit):
            code = exc.code if isinstance(exc, SystemExit) else None
            self.stop(exit_code=code if isinstance(code, int) else (0 if code is None else 1))
        else:
            self.stop(exit_code=1, error=f"{exc_type.__name__}: {exc}")
        return False

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"<traceprobe.Capture {self.name!r} out={str(self.out)!r} {state}, {len(self.trace_paths)} trace(s)>"

    # -- internals ----------------------------------------------------------

    def _note(self, msg: str) -> None:
        self.notes.append(msg)
        if self.echo:
            sys.stdout.flush()
            print(f"traceprobe: {msg}", file=sys.stderr, flush=True)

    def _profile(self, **kw: Any) -> Any:
        from torch.profiler import profile

        return profile(
            activities=self._activities,
            record_shapes=self.record_shapes,
            with_stack=self.with_stack,
            profile_memory=self.profile_memory,
            **kw,
        )

    def _to_steps(self) -> None:
        """First step() call: drop the whole-run recording, continue under the schedule at step 1."""
        with self._quiet.around():
            self._prof.__exit__(None, None, None)
            self._prof = None
            prof = self._profile(schedule=self.windows.schedule, on_trace_ready=self._on_trace_ready)
            prof.__enter__()  # step 0: the schedule says NONE, nothing recorded
            prof.step()  # now at step 1, as this capture's count says
        self._prof = prof
        self._mode = "steps"

    def _on_trace_ready(self, prof: Any) -> None:
        try:
            complete = self._stepping  # from step(): the window's last step ended
            first, last = self.windows.ending(prof.step_num, complete)
            if complete:
                self._write(prof, f"steps{first}-{last}", [first, last], "ok")
            elif last > first:  # cut short, but at least one step of it ended
                self._write(prof, f"steps{first}-{last}-partial", [first, last], "partial")
            else:
                self._note(f"the window from step {first} was cut short before its first step ended: not written")
        except Exception as e:  # noqa: BLE001 - never break the profiled loop
            self._note(f"could not write a trace: {type(e).__name__}: {e}")

    def _write(self, prof: Any, variant: str, steps: list[int] | None, status: str) -> None:
        out = self.out
        assert out is not None
        dest, size = write_trace(prof, out, lambda i: mf.trace_name(self.name, variant if i == 1 else f"{variant}-{i}", self.rank),
                                 dist_info=dist_info(self.rank, self.world_size))
        entry = mf.Entry(
            workload=self.name, variant=variant, status=status, traces=[dest.name],
            description="whole run" if steps is None else f"steps {steps[0]}-{steps[1]}",
            reason="the run ended or failed before this window's last step ended" if status == "partial" else None,
            device="cuda" if self._use_cuda else "cpu", rank=self.rank, steps=steps,
            extra={"start": self._starts, "pid": os.getpid(), "json_bytes": size},
        )
        self.trace_paths.append(dest)
        self.entries.append(entry)
        self._update_manifest()
        if self._summaries:  # <stem>.summary.json beside it, written off this thread; never raises
            self._summaries.summarize(dest)
        if size > LARGE_TRACE_BYTES:
            self._note(
                f"{dest.name} holds {size / 2**20:,.0f} MB of JSON: Perfetto UI may not open it; "
                + ("call traceprobe.step() once per iteration to profile windows of steps" if steps is None else "lower --active")
            )

    def _update_manifest(self) -> None:
        """Merge this process and its traces into ``manifest.json`` under the folder's lock."""
        assert self.out is not None
        proc, mine = self._process, list(self.entries)
        mf.update(self.out, lambda m: m.put_process(proc, mine))


def capture(out: str | Path | Callable[..., Any] | None = None, **options: Any) -> Any:
    """A :class:`Capture`: use as ``with traceprobe.capture(out) as cap:`` or as a decorator.

    ``@traceprobe.capture`` without parentheses decorates with the defaults.
    Options are :class:`Capture`'s keyword arguments.
    """
    if callable(out) and not isinstance(out, (str, os.PathLike)):
        return Capture(**options)(out)
    return Capture(out if out is None or isinstance(out, Path) else Path(out), **options)
