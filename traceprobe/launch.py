"""The process entry point (the ``traceprobe`` script, ``python -m traceprobe``), before the command line is parsed.

:func:`entry` runs the CLI (:mod:`traceprobe.cli`) made cheap, and does two things
before it imports typer and parses the options:

- every command but ``record`` (which runs torch, and your program) gets
  :func:`traceprobe.tuning.tune`'s settings (BLAS single-threaded, malloc keeping
  freed memory, the garbage collector paused while the analysis is imported);
- ``overlap-report`` of one local trace file forks that trace's decoding processes
  at once (:func:`traceprobe.prefetch.start_early`), about 20 ms before the command
  would (typer's import and the parsing), while this process imports the rest.
  The command takes them over when it asks for the same file with the same
  limit (:func:`traceprobe.prefetch.start`), and stops them otherwise; a command
  line this module cannot read with certainty (:func:`trace_named`) starts
  nothing early. The report is the same either way: only when the decoding
  starts differs. HTA's 216k-event trace on 2 CPUs: 0.295 -> 0.272 s (medians of 15).

Every command ends with ``os._exit`` once its output is flushed, skipping the
interpreter's teardown (freeing every object of the loaded traces).
"""

from __future__ import annotations

import os
import sys

EARLY_COMMAND = "overlap-report"
"""The command whose trace is decoded from the start of the process."""
VALUE_OPTIONS = frozenset({"--engine", "--format", "-f", "--jobs", "-j", "--max-bytes", "--max-exposed-comm", "--max-idle",
                           "--min-copy-overlap", "--min-device-concurrency", "--output", "-o", "--plot", "--scheduler",
                           "--trace-processor"})
"""``overlap-report``'s options that take a value (``tests/test_launch.py`` keeps this equal to the command's own)."""
FLAG_OPTIONS = frozenset({"--all-device-work", "--debug", "--detail", "-v"})
"""``overlap-report``'s options that take none."""
NOT_EARLY = frozenset({"--scheduler", "--max-bytes", "-h", "--help"})
"""Options after which nothing is decoded early: the work runs elsewhere, under another limit, or not at all."""


def trace_named(argv: list[str]) -> str | None:
    """The trace file that ``argv`` (``sys.argv[1:]``) has ``overlap-report`` decode ahead, or None.

    None unless the command is :data:`EARLY_COMMAND` with exactly one positional
    argument, which is a local regular file, every option is one of the command's
    own (:data:`VALUE_OPTIONS`, :data:`FLAG_OPTIONS`; ``--opt=value`` too), none is in
    :data:`NOT_EARLY`, and ``--engine`` (if given) is ``native``. Any other command
    line (a folder, several traces, a URL, an unknown option, a cluster of short
    options) starts nothing early.
    """
    if argv[:1] != [EARLY_COMMAND]:
        return None
    positional: list[str] = []
    args = iter(argv[1:])
    for arg in args:
        if arg == "--":
            positional += args
            break
        if not arg.startswith("-") or arg == "-":
            positional.append(arg)
            continue
        name, eq, value = arg.partition("=")
        if name in NOT_EARLY:
            return None
        if name in VALUE_OPTIONS:
            value = value if eq else next(args, "")
            if name == "--engine" and value != "native":
                return None
        elif name not in FLAG_OPTIONS or eq:
            return None
    if len(positional) != 1 or "://" in positional[0] or not os.path.isfile(positional[0]):
        return None
    return positional[0]


def entry() -> None:
    """Run the command line (:func:`traceprobe.cli.main`) as the module docstring says; exit with its code."""
    if sys.argv[1:2] == ["record"]:
        from .cli import main

        main()
        return
    from .tuning import tune

    tune()
    code: int | str | None = 0
    try:
        path = trace_named(sys.argv[1:])
        if path is not None:
            from . import prefetch

            prefetch.start_early(path)
        from .cli import main

        main()
    except SystemExit as e:
        code = e.code
    finally:
        prefetch = sys.modules.get("traceprobe.prefetch")
        if prefetch is not None:
            prefetch.drop_early()  # (decoding processes started early that the command did not take over)
    if isinstance(code, str):
        sys.stderr.write(code + "\n")
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code or 0)
