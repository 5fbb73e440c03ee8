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

import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

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


def is_url(p: object) -> bool:
    """An fsspec URL (``s3://...``) rather than a local path."""
    return "://" in str(p)


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


def emit(text: str | bytes, output: Path | None) -> list[str]:
    """Write ``text`` to ``output`` atomically, or to stdout without one; the error, if any, as one line."""
    from .fileio import WriteError, atomic_write

    if output is None:
        sys.stdout.write(text if isinstance(text, str) else text.decode())
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


def render_rich(render: Any, summary: Any, output: Path | None) -> str | None:
    """``render(console, summary)`` to the terminal (None), or to text for ``output`` (140 columns, no colour)."""
    from rich.console import Console

    if output is None:
        render(Console(), summary)
        return None
    import io

    buf = io.StringIO()
    render(Console(file=buf, width=140, no_color=True), summary)
    return buf.getvalue()
