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
import re
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from .reading.files import is_url

if TYPE_CHECKING:
    from rich.console import Console

BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
"""The characters that reorder text on a terminal or in an editor (bidirectional marks, embeddings, overrides and
isolates): a name holding U+202E could show its end first. Always escaped, as ``\\u202e``."""
_UNSEEN = {c: f"\\u{c:04x}" for c in [*range(0x80, 0xA0), *map(ord, BIDI)]} | {0xDC00 + b: f"\\x{b:02x}" for b in range(0x80, 0x100)}
# C1 controls and bidi as \uXXXX; a byte of a file name that is not UTF-8 (Python's surrogate escape) as \xNN
_ESCAPES = {c: f"\\x{c:02x}" for c in [*range(32), 127]} | {ord("\n"): "\\n", ord("\r"): "\\r", ord("\t"): "\\t"} | _UNSEEN
_IN_DOCUMENT = {c: f"\\x{c:02x}" for c in [*range(32), 127] if c not in (9, 10, 13)} | _UNSEEN
_JSON_ESCAPES = {c: e if e.startswith("\\u") else "\\" + e for c, e in _UNSEEN.items()}
# (in JSON, \u202e is the character's own escape; a byte that is not UTF-8 is the text \xff, its backslash escaped)
_LONE_CR = re.compile("\r(?!\n)")


def _escaper(table: dict[int, str]) -> Any:
    """``text.translate(table)`` as one regex substitution over the characters ``table`` maps (each one a character
    class's member, replaced by its entry): the same text, but C code scans for them (about 2 ns a character against
    translate's 47 on a JSON report of 100 rank traces, 2.8 MB: 133 -> 6 ms) and only what matches is rewritten."""
    pattern = re.compile("[" + "".join(re.escape(chr(c)) for c in sorted(table)) + "]")
    return lambda text: pattern.sub(lambda m: table[ord(m.group())], text)


_shown_json = _escaper(_JSON_ESCAPES)
_shown_text = _escaper(_IN_DOCUMENT)


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
    """``text`` with newlines and other control characters escaped (module doc): C0 and C1 controls, DEL, the
    bidirectional characters (:data:`BIDI`), and the bytes of a file name that are not UTF-8 (``\\xff``).

    The one escaping path of every name printed: messages, progress, the table's cells.
    """
    return str(text).translate(_ESCAPES)


def shown_document(text: str, kind: str = "text") -> str:
    """A whole output document (lines, a table, CSV, Markdown, JSON) with what no reader should get raw escaped,
    as :func:`one_line` does in a name but keeping the document's own line breaks and tabs.

    ``kind``: ``"text"``: control characters (a lone CR too), C1, bidi and non-UTF-8 bytes escaped; ``"json"``: only
    C1 and bidi, as JSON's own ``\\u202e`` escapes (the document parses to the same names), and non-UTF-8 bytes, as
    the text ``\\xff`` (a name that was not UTF-8 reads ``lat\\xff.json``; a JSON encoder escaped the C0 controls
    already); ``"raw"``: as it is
    (the table, whose cells :func:`one_line` escaped and whose colours are escape sequences).
    """
    if kind == "raw":
        return text
    if kind == "json":
        return _shown_json(text)
    return _shown_text(_LONE_CR.sub("\\\\r", text))


def shown_names(value: Any) -> Any:
    """``value`` (dicts, lists, strings: a JSON document before encoding) with every string's non-UTF-8 bytes of a
    file name written ``\\xNN``: what an encoder that refuses lone surrogates can write."""
    if isinstance(value, str):
        return value.translate(_SURROGATES)
    if isinstance(value, dict):
        return {shown_names(k): shown_names(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [shown_names(v) for v in value]
    return value


_SURROGATES = {0xDC00 + b: f"\\x{b:02x}" for b in range(0x80, 0x100)}


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


def _encoded(text: str | bytes) -> bytes:
    return text if isinstance(text, bytes) else text.encode("utf-8", "backslashreplace")  # (no lone surrogate is left)


def write_stdout(data: str | bytes) -> None:
    """Write all of ``data`` (``str`` as UTF-8) to stdout, or end the command: the one checked write of every output.

    Every byte is written, a short write continued, and the stream flushed; an ``OSError`` (``EFBIG`` under
    ``ulimit -f``, ``ENOSPC`` on a full disk under a redirect, ``EIO``...) or a write that makes no progress is one
    line on stderr and exit 2, never a cut file and exit 0. A reader of stdout that went away (``| head -1``) ends
    the command quietly with :data:`PIPE_CLOSED`.
    """
    import typer

    raw = _encoded(data)
    done = 0
    try:
        sys.stdout.flush()
        try:
            fd = sys.stdout.fileno()
        except (OSError, ValueError, AttributeError):  # not a file (a test's captured stdout): its buffer, checked
            fd = -1
        if fd < 0:
            buf = getattr(sys.stdout, "buffer", None)
            if buf is None:
                sys.stdout.write(raw.decode("utf-8"))
            else:
                buf.write(raw)
            sys.stdout.flush()
            return
        view = memoryview(raw)
        while done < len(raw):
            try:
                n = os.write(fd, view[done:done + (1 << 20)])
            except BlockingIOError:  # (a non-blocking stdout that is full: wait until it takes more)
                import select

                select.select([], [fd], [])
                continue
            if n <= 0:
                raise OSError(0, "the write made no progress")
            done += n
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # (so that the interpreter's last flush does not fail again)
        os.close(devnull)
        raise typer.Exit(PIPE_CLOSED) from None
    except OSError as e:
        say(f"error: cannot write the output to stdout: {e.strerror or e} (wrote {done:,} of {len(raw):,} bytes)", "red")
        raise typer.Exit(2) from None


def print_line(text: object) -> None:
    """One line of a command's output on stdout (``wrote ...``), escaped as :func:`one_line` and written by
    :func:`write_stdout`."""
    write_stdout(one_line(text) + "\n")


def emit(text: str | bytes, output: Path | None, kind: str = "text") -> list[str]:
    """Write ``text`` to ``output`` atomically, or to stdout without one; the error, if any, as one line.

    A ``str`` is first escaped as :func:`shown_document` does for its ``kind`` (``text``, ``json`` or ``raw``);
    stdout is written by :func:`write_stdout` (a failed or short write ends the command with exit 2), a file by
    :mod:`traceprobe.fileio`'s atomic writer (a failed write is the line returned, the old file intact).
    A reader of stdout that went away (``| head -1``) ends the command with :data:`PIPE_CLOSED`,
    not with a gate's or an error's code.
    """
    from .fileio import WriteError, atomic_write

    data = _encoded(shown_document(text, kind) if isinstance(text, str) else text)
    if output is None:
        write_stdout(data)
        return []
    try:
        atomic_write(output, data, compress=False)
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


class library_warnings:  # noqa: N801 - used as a context manager, like open()
    """What libraries warn while a block runs (``warnings.warn``, and the records of the ``matplotlib`` logger, whose
    glyph warnings quote a name's characters), each said once on stderr through :func:`one_line`: a name's ESC, CR
    or BEL never reaches the terminal raw."""

    def __enter__(self) -> library_warnings:
        import logging
        import warnings

        self._catch = warnings.catch_warnings(record=True)
        self._caught = self._catch.__enter__()
        warnings.simplefilter("always")
        self._records: list[str] = []
        outer = self

        class _Keep(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                outer._records.append(record.getMessage())

        self._handler = _Keep(logging.WARNING)
        self._logger = logging.getLogger("matplotlib")
        self._propagate = self._logger.propagate
        self._logger.addHandler(self._handler)
        self._logger.propagate = False
        return self

    def __exit__(self, *exc: Any) -> None:
        self._catch.__exit__(*exc)
        self._logger.removeHandler(self._handler)
        self._logger.propagate = self._propagate
        seen: set[str] = set()
        for msg in [f"warning: {w.category.__name__}: {w.message}" for w in self._caught] + [f"warning: {m}" for m in self._records]:
            if msg not in seen:
                seen.add(msg)
                say(msg, "yellow")


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
