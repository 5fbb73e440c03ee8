"""What the command line prints and writes, in one place.

- Messages go to stderr one per line, literally: a name from a trace or a path is
  never read as rich markup (``[/red]`` in a kernel name prints as it is), control
  characters and newlines are escaped (``\\n``, ``\\x1b``) so that a name can neither
  split nor forge a message line, and lines never wrap, terminal or not.
- An output that is one of the inputs, or whose folder is missing, is refused
  before any work; every file goes through :mod:`traceprobe.fileio`'s atomic
  writer, and a failed write is one line (the old file is left intact).
- rich is imported only when something is printed through it: the JSON, CSV and
  Markdown paths never load it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from .reading.files import is_url

if TYPE_CHECKING:
    from rich.console import Console

_ESCAPES = {c: f"\\x{c:02x}" for c in [*range(32), 127]} | {ord("\n"): "\\n", ord("\r"): "\\r", ord("\t"): "\\t"}


class _Stderr:
    """rich's Console on stderr, built on first use."""

    _console: Console | None = None

    def console(self) -> Console:
        """The Console itself (for rich's Progress)."""
        if _Stderr._console is None:
            from rich.console import Console

            _Stderr._console = Console(stderr=True)
        return _Stderr._console

    def __getattr__(self, name: str) -> Any:
        return getattr(self.console(), name)


err = _Stderr()
"""The stderr Console (lazy)."""


def one_line(text: object) -> str:
    """``text`` with newlines and other control characters escaped (module doc)."""
    return str(text).translate(_ESCAPES)


def say(msg: object, style: str = "") -> None:
    """Print ``msg`` on stderr as one literal line (module doc), in ``style``."""
    from rich.text import Text

    err.print(Text(one_line(msg), style=style), soft_wrap=True, highlight=False)


def fail(msg: object, code: int = 2) -> NoReturn:
    """Print ``error: msg`` (one literal line) and end the command with ``code``."""
    import typer
    from rich.text import Text

    err.print(Text("error: ", style="bold red") + Text(one_line(msg)), soft_wrap=True, highlight=False)
    raise typer.Exit(code)


def check_outputs(paths: Iterable[Any], outputs: dict[str, Path | None]) -> None:
    """Refuse (``fail``) an output that is one of the input traces or whose folder does not exist.

    Args:
        paths: the command's trace arguments (files, folders, URLs).
        outputs: option name -> the path it names, or None when not given.
    """
    from .collect import discover

    given = {o: p for o, p in outputs.items() if p is not None}
    if not given:
        return
    paths = list(paths)
    inputs = {Path(p).resolve() for p in paths if not is_url(p)}
    inputs |= {Path(f).resolve() for f in discover(paths)[0] if not is_url(f)}
    for option, path in given.items():
        if path.resolve() in inputs:
            fail(f"{option} {path} is one of the input traces: refusing to overwrite it")
        if not path.parent.is_dir():
            fail(f"cannot write {path}: no folder {path.parent}")
        if path.is_dir():
            fail(f"cannot write {path}: it is a folder")
        if path.exists() and (not os.access(path, os.W_OK) or not path.stat().st_mode & 0o222):  # (root may write anything)
            fail(f"{option} {path} is read-only: refusing to replace it")


PIPE_CLOSED = 141
"""Exit code when the reader of stdout went away (``| head -1``): 128 + SIGPIPE, as a shell reports it."""


def layout(output: Path | None) -> tuple[int | None, bool]:
    """(width, colour) for a human format going to ``output`` (None: stdout).

    The width is ``$COLUMNS`` when set, else the terminal's when stdout is one, else None
    (a pipe or a file: natural width, nothing shortened); colours only on a terminal, and
    not with ``$NO_COLOR``.
    """
    if output is not None:
        return None, False
    tty = sys.stdout.isatty()
    cols = os.environ.get("COLUMNS", "")
    width = int(cols) if cols.isdigit() and int(cols) > 0 else (os.get_terminal_size(sys.stdout.fileno()).columns if tty else None)
    return width, tty and not os.environ.get("NO_COLOR")


def _stdout(text: str | bytes) -> None:
    """Write to stdout; a closed pipe ends the command quietly with :data:`PIPE_CLOSED`."""
    try:
        if isinstance(text, bytes):
            sys.stdout.flush()
            sys.stdout.buffer.write(text)
        else:
            sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # (so that the interpreter's last flush does not fail again)
        os.close(devnull)
        import typer

        raise typer.Exit(PIPE_CLOSED) from None


def emit(text: str | bytes, output: Path | None) -> list[str]:
    """Write ``text`` to ``output`` atomically, or to stdout without one; the error, if any, as one line.

    A reader of stdout that went away (``| head -1``) ends the command with :data:`PIPE_CLOSED`,
    not with a gate's or an error's code.
    """
    from .fileio import WriteError, atomic_write

    if output is None:
        _stdout(text)
        return []
    try:
        atomic_write(output, text, compress=False)
    except WriteError as e:
        return [str(e)]
    return []


def write_files(files: Iterable[tuple[Path, bytes]]) -> list[str]:
    """Write ``(path, bytes)`` pairs atomically, saying ``wrote PATH`` for each; the errors, one line each."""
    errors = []
    for path, data in files:
        e = emit(data, path)
        if not e:
            say(f"wrote {path}")
        errors += e
    return errors


def _path_of(result: Any) -> str:
    """The trace path of one of ``analyze_paths``' results (a report, a failure, or a report with its ``then``)."""
    r = result[0] if isinstance(result, tuple) and result else result
    return str(getattr(r, "path", ""))


class Counter:
    """What :func:`progress_counter` hands the analysis: ``start(files)`` then ``done(result)`` per file."""

    def __init__(self, show: Any = None) -> None:
        self._show = show
        self.total = 0
        self.count = 0
        self._base = ""

    def start(self, files: list[str]) -> None:
        """The files about to be analysed: the total, and the folder their names are shown from."""
        import os.path

        self.total = len(files)
        try:
            self._base = os.path.commonpath([os.path.dirname(f) for f in files]) if len(files) > 1 else ""
        except ValueError:
            self._base = ""
        if self._show:
            self._show(self.line(""))

    def done(self, result: Any) -> None:
        """One file finished (in whatever order the workers finish them)."""
        self.count += 1
        if self._show:
            self._show(self.line(_path_of(result)))

    def line(self, path: str) -> str:
        """``12/52 traces, resnet/rank0.pt.trace.json.gz`` (escaped onto one line)."""
        import os.path

        name = os.path.relpath(path, self._base) if self._base and path.startswith(self._base) else path
        return one_line(f"{self.count}/{self.total} traces" + (f", {name}" if name else ""))


class progress_counter:  # noqa: N801 - used as a context manager, like open()
    """Progress on stderr while traces are analysed: ``12/52 traces, NAME`` on one line that
    is rewritten in place, on a terminal only (nothing on a pipe), gone when done."""

    def __enter__(self) -> Counter:
        if not sys.stderr.isatty():
            self._live = None
            return Counter()
        from rich.live import Live
        from rich.text import Text

        self._live = Live(Text(""), console=err.console(), transient=True, refresh_per_second=8)
        self._live.__enter__()
        live = self._live
        return Counter(lambda line: live.update(Text(line, style="dim"), refresh=False))

    def __exit__(self, *exc: Any) -> None:
        if self._live is not None:
            self._live.__exit__(*exc)
