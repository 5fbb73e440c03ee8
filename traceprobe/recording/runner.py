"""Run a Python script or module under a :class:`~traceprobe.recording.profiler.Capture`, as ``python`` would.

``traceprobe record --script train.py -- ARGS`` and ``--module pkg.train -- ARGS``
call :func:`run`. The target runs in this process through :mod:`runpy`, as
``__main__``, with ``sys.argv`` set to ``[target, *ARGS]`` and ``sys.path[0]``
set as ``python`` sets it (the script's folder; the current folder for a
module). Its exit code is passed through: ``sys.exit(n)`` gives ``n``,
``sys.exit("message")`` prints the message and gives 1, an uncaught exception
prints its traceback (from the target's first frame on, as ``python`` prints
it) and gives 1, Ctrl-C gives 130. Whatever the outcome, the traces of the
windows that ended are on disk with their summaries, a window cut short is written as ``partial``,
and the manifest records the exit code. (A process killed outright, or ended
by ``os._exit``, keeps the traces already written; its manifest entry stays
``running``.)

Steps: the target calls ``traceprobe.step()`` once per iteration to be
profiled in windows (see :mod:`traceprobe.recording.windows`); without such calls the
whole run is one trace. Under torchrun, run one ``traceprobe record`` per rank::

    torchrun --nproc-per-node 8 -m traceprobe record --script train.py -- --epochs 1

Every rank writes ``<name>...rank<R>.pt.trace.json.gz`` into the same folder
(the default folder is named after torchrun's start time, so the ranks of a
node agree on it; give ``--out`` on a shared file system across nodes, or
under a launcher that does not start the ranks itself).

The target's module globals are kept alive until the interpreter exits, as
``python`` keeps ``__main__``'s (freed earlier, a gloo DDP rank could hang after
writing its trace: see :mod:`traceprobe.recording.teardown`).
"""

from __future__ import annotations

import importlib.util
import os
import runpy
import sys
from pathlib import Path
from typing import Any

from .profiler import Capture
from .teardown import keep
from .trace_files import default_out


class TargetNotFound(Exception):
    """The script or module does not exist; ``code`` is what ``python`` would exit with."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def _exit_code(code: Any) -> tuple[int, str | None]:
    """``SystemExit.code`` -> (exit status, message to print), as the interpreter does."""
    if code is None:
        return 0, None
    if isinstance(code, int):
        return code, None
    return 1, str(code)


_INTERNAL = {os.path.abspath(__file__), "<frozen runpy>", os.path.abspath(runpy.__file__)}


def _print_exception(e: BaseException) -> None:
    """Print ``e`` through ``sys.excepthook`` without this module's and runpy's frames."""
    tb = e.__traceback__
    while tb is not None and (tb.tb_frame.f_code.co_filename in _INTERNAL or os.path.abspath(tb.tb_frame.f_code.co_filename) in _INTERNAL):
        tb = tb.tb_next
    sys.stdout.flush()
    sys.excepthook(type(e), e.with_traceback(tb), tb)
    sys.stderr.flush()


def _keep_target_globals(e: BaseException) -> None:
    """Keep the globals of the target's outermost frame in ``e``'s traceback (its ``__main__`` dict)."""
    tb = e.__traceback__
    while tb is not None:
        if tb.tb_frame.f_globals.get("__name__") == "__main__" and os.path.abspath(tb.tb_frame.f_code.co_filename) not in _INTERNAL:
            keep(tb.tb_frame.f_globals)
            return
        tb = tb.tb_next


def resolve(script: str | Path | None = None, module: str | None = None) -> tuple[str, str, str]:
    """Check the target exists before anything is started.

    Returns:
        ``(kind, target, label)``: ``script`` or ``module``, the path or module
        name, and the label for the default folder (``train.py``, ``pkg.train``).

    Raises:
        ValueError: neither or both given.
        TargetNotFound: no such file or module (with python's message and exit code).
    """
    if (script is None) == (module is None):
        raise ValueError("give one of --script and --module")
    if script is not None:
        p = Path(script)
        if not p.is_file():
            why = "Is a directory" if p.is_dir() else "No such file or directory"
            raise TargetNotFound(f"can't open file {str(p.absolute())!r}: [Errno 2] {why}", 2)
        return "script", str(script), p.name
    assert module is not None
    saved = sys.path[0] if sys.path else None
    try:
        if sys.path:
            sys.path[0] = os.getcwd()
        else:
            sys.path.insert(0, os.getcwd())
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError) as e:
        raise TargetNotFound(f"Error while finding module specification for {module!r} ({type(e).__name__}: {e})", 1) from None
    finally:
        if saved is not None:
            sys.path[0] = saved
    if spec is None:
        raise TargetNotFound(f"No module named {module}", 1)
    return "module", module, module


def run(
    script: str | Path | None = None,
    module: str | None = None,
    args: list[str] | tuple[str, ...] = (),
    out: str | Path | None = None,
    **options: Any,
) -> tuple[int, Capture]:
    """Run a script or module under a capture.

    Args:
        script, module: the target (exactly one).
        args: the target's arguments (its ``sys.argv[1:]``).
        out: output folder (default ``runs/<script-or-module>-<YYYYmmdd-HHMMSS>``).
        options: :class:`~traceprobe.recording.profiler.Capture` options (``wait``,
            ``warmup``, ``active``, ``repeat``, ``record_shapes``,
            ``with_stack``, ``profile_memory``, ``cuda``, ``echo``).

    Returns:
        ``(exit_code, capture)``: the target's exit status and the capture
        (``capture.trace_paths``, ``capture.out``).

    Raises:
        ValueError: neither or both targets, or a bad option.
        TargetNotFound: no such script or module (nothing was started).
        OSError: the output folder cannot be created or written (nothing was started).
    """
    kind, target, label = resolve(script, module)
    name = Path(target).stem if kind == "script" else target
    args = [str(a) for a in args]
    cap = Capture(
        out if out is not None else default_out(label),
        name=name,
        target={kind: target, "args": args},
        command=list(sys.argv),
        **options,
    )
    saved_argv, saved_path = sys.argv, list(sys.path)
    first = os.path.dirname(os.path.realpath(target)) if kind == "script" else os.getcwd()
    code, error = 0, None
    cap.start()
    try:
        sys.argv = [target, *args]
        if sys.path:
            sys.path[0] = first
        else:
            sys.path.insert(0, first)
        if kind == "script":
            keep(runpy.run_path(target, run_name="__main__"))
        else:
            keep(runpy.run_module(target, run_name="__main__", alter_sys=True))
    except SystemExit as e:
        _keep_target_globals(e)
        code, msg = _exit_code(e.code)
        if msg is not None:
            sys.stdout.flush()
            print(msg, file=sys.stderr, flush=True)
    except KeyboardInterrupt as e:
        _keep_target_globals(e)
        _print_exception(e)
        code, error = 130, "KeyboardInterrupt"
    except BaseException as e:  # noqa: BLE001 - the target's failure becomes its exit code, as in python
        _keep_target_globals(e)
        _print_exception(e)
        first_line = str(e).strip().splitlines()[0] if str(e).strip() else ""
        code, error = 1, f"{type(e).__name__}: {first_line}" if first_line else type(e).__name__
    finally:
        sys.argv = saved_argv
        sys.path[:] = saved_path
        try:
            sys.stdout.flush()
        except Exception:  # noqa: BLE001 - a closed stdout must not lose the traces
            pass
        cap.stop(exit_code=code, error=error)
        cap.wait()  # the traces' summaries (the target has ended: nothing left to slow down)
    return code, cap
