"""The commands that draw or convert traces for a person to look at: ``plot``, ``export``, ``view``.

Each trace is loaded and analysed once, in a worker (``collect.analyze_paths``
with ``then=``): an export is made there; for a picture, what it draws comes back
(:mod:`traceprobe.analysis.device.picture`) and the picture is drawn in this process. A
trace that cannot be read is one line on stderr and the others go on (exit 2 at the end).
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

import typer

from ..console import check_outputs, fail, library_warnings, print_line, say, write_files

PATHS_HELP = "Trace files (.json, .json.gz) or folders of them."


def plot_cmd(
    paths: list[str] = typer.Argument(..., metavar="PATHS...", help=PATHS_HELP),
    output: Path = typer.Option(..., "--output", "-o", metavar="PNG", help="Picture to write (several traces without --compare: <stem>.<trace>.png)."),
    compare: bool = typer.Option(False, "--compare", help="Stack the traces on one time axis: the ranks of a window on their shared clock "
                                 "(clock offsets applied where estimated), from the window's first device event; other traces each from its own."),
    title: str | None = typer.Option(None, help="Title of the --compare figure."),
    jobs: int | None = typer.Option(None, "--jobs", "-j", help="Worker processes (default: CPU count); one large trace is decoded by as many."),
) -> None:
    """Draw traces: one lane per device and stream, copies, kernels and communication, overlap shaded, verdicts on top.

    A rank of a job gets a band of its own where it waited for the last rank at a collective, and each trace its
    window's top finding and action under its title."""
    check_outputs(paths, {"--output": output})
    from ..collect import analyze_paths, timeline_lanes  # (no pandas yet: a single trace is decoded ahead)
    from ..report import image_format

    drawn: dict[str, Any] = {}  # report path -> what its picture draws, computed where the trace was analysed
    summary = analyze_paths(paths, jobs=jobs, then=timeline_lanes, on_then=lambda r, lanes: drawn.__setitem__(r.path, lanes))
    from ..report import plot as pl

    fmt = image_format(output)
    with library_warnings():  # (matplotlib's glyph warnings quote a name's characters: escaped, once each)
        if compare:  # the ranks of a window on their shared clock (analysis.picture.shared_clock_groups)
            from ..analysis.device.picture import shared_clock_groups

            groups = [pl.with_findings([pl.item_of(r, lanes) for r, lanes in g], summary) for g in shared_clock_groups(summary, drawn)]
            pictures = [(output, pl.compare(groups, title, fmt))] if groups else []
        else:
            reports = [r for r in summary.reports if r.path in drawn]
            names = pl.per_trace_paths(output, [pl.label_of(r.path, r.info, r.rank) for r in reports])
            items = pl.with_findings([pl.item_of(r, drawn[r.path]) for r in reports], summary)
            pictures = [(name, pl.timeline(item, fmt)) for name, item in zip(names, items)]
    errors = [f"{f.path}: {f.error}" for f in summary.failures] + write_files(pictures)
    for e in errors:
        say(e, "red")
    if errors:
        raise typer.Exit(2)


def export_one(trace: Any, report: Any, out_dir: str, stems: dict[str, str], perfetto: bool, json_: bool) -> list[tuple[bool, str]]:
    """``export``'s work on one loaded trace, where it was analysed: ``(ok, line)`` per file."""
    from ..fileio import WriteError
    from ..report import chrome
    from ..report import perfetto as pf

    stem = stems[str(trace.path)]
    out: list[tuple[bool, str]] = []
    try:
        if perfetto:
            out.append((True, pf.write_perfetto(trace, Path(out_dir) / f"{stem}.pftrace", report).describe()))
        if json_:
            out.append((True, chrome.write_chrome_json(trace, Path(out_dir) / f"{stem}.perfetto.json.gz").describe()))
    except WriteError as e:
        out.append((False, str(e)))
    return out


def export_files(paths: list[Any], out_dir: Path, perfetto: bool, json_: bool, jobs: int | None, scheduler: str | None = None) -> list[str]:
    """Export each trace under ``paths`` into ``out_dir`` (one ``wrote`` line each, on stdout); the errors, one line each."""
    from ..collect import analyze_paths, discover
    from ..report.chrome import unique_stems

    files, _ = discover(paths)
    stems = dict(zip(map(str, files), unique_stems(files)))
    lines: list[tuple[bool, str]] = []
    summary = analyze_paths(paths, jobs=jobs, then=partial(export_one, out_dir=str(out_dir), stems=stems, perfetto=perfetto, json_=json_),
                            on_then=lambda _, done: lines.extend(done), scheduler=scheduler)
    if perfetto:  # (each window's claims, known now that every trace is analysed: a track of their own)
        lines += _claims(summary, out_dir, stems, {line for ok, line in lines if ok})
    for ok, line in lines:
        if ok:
            print_line(line)
    return [f"{f.path}: {f.error}" for f in summary.failures] + [line for ok, line in lines if not ok]


def _claims(summary: Any, out_dir: Path, stems: dict[str, str], wrote: set[str]) -> list[tuple[bool, str]]:
    """The claims' track (:mod:`traceprobe.report.perfetto_claims`) added to each ``.pftrace`` written now (``wrote``:
    the lines that say so): ``(False, why)`` where one could not be."""
    from ..fileio import WriteError
    from ..report.actions import tops_by_path
    from ..report.perfetto_claims import add_claims

    out: list[tuple[bool, str]] = []
    tops = tops_by_path(summary)
    for rep in summary.reports:
        path = out_dir / f"{stems.get(str(rep.path), '')}.pftrace"
        if rep.path in tops and str(rep.path) in stems and any(w.startswith(f"wrote {path}:") for w in wrote):
            try:
                add_claims(path, [tops[rep.path]], rep.window_ns)
            except (WriteError, OSError) as e:
                out.append((False, str(e)))
    return out


def _trace_of(trace: Any, report: Any) -> Any:
    return trace


def merge_runs(paths: list[Any], out_dir: Path, align_clocks: bool = False) -> list[str]:
    """``export --merge-ranks``: one ``<run>[.<window>].pftrace`` per window with two or more ranks; the errors, one line each.

    The run's name keeps its folders below the one all traces share (``rec-ddp-train_gpt.pftrace`` and
    ``rec-fsdp-train_gpt.pftrace``, never ``train_gpt.pftrace`` twice), the window is added where the run
    has several, and a name left taken gets ``.2``, ``.3``...: no file of this command replaces another.
    Windows of one rank are skipped, all of them said in one line (their traces named where there are three or
    fewer). With ``align_clocks``, a window
    whose clocks differ (:mod:`traceprobe.analysis.job.clocks`) is written on its reference rank's clock.
    """
    from ..collect import analyze_paths
    from ..fileio import WriteError
    from ..report.actions import tops_by_path
    from ..report.perfetto_ranks import write_perfetto_ranks
    from ..report.table import base_folder, relative

    traces: dict[str, Any] = {}  # by report path (the summary may hold its own copies of the reports)
    summary = analyze_paths(paths, jobs=1, then=_trace_of, on_then=lambda r, t: traces.__setitem__(r.path, t), align_clocks=align_clocks)
    errors = [f"{f.path}: {f.error}" for f in summary.failures]
    clocks = {(c.run, c.window): c.clock for c in getattr(summary, "collectives", ())}
    estimates = {(c.run, c.window): c for c in summary.clocks} if align_clocks else {}
    paths_by_window = {(w.run, w.window): w.critical_path for w in summary.what_ifs if not w.path}
    tops = tops_by_path(summary)  # (each rank's claim: the JSON document's top_claims)
    base = base_folder(summary)
    used: dict[str, int] = {}
    written = 0
    skipped: list[str] = []
    for run in summary.runs:
        label = relative(run.name, base).replace("/", "-")
        for w in run.windows:
            if w.rank_count < 2:
                skipped += [r.path for r in w.reports]
                continue
            name = label + (f".{w.label.replace(' ', '')}" if len(run.windows) > 1 else "")
            used[name] = used.get(name, 0) + 1
            name = name if used[name] == 1 else f"{name}.{used[name]}"
            items = [(rank, traces[r.path], r) for rank, r in zip(w.ranks, w.reports) if rank is not None]
            try:
                print_line(write_perfetto_ranks(items, out_dir / f"{name}.pftrace", clocks.get((run.name, w.label), ""),
                                                clocks=estimates.get((run.name, w.label)),
                                                critical=paths_by_window.get((run.name, w.label)),
                                                claims=[(rank, tops[r.path]) for rank, r in zip(w.ranks, w.reports)
                                                        if rank is not None and r.path in tops]).describe())
                written += 1
            except WriteError as e:
                errors.append(str(e))
    if skipped:
        which = f" ({', '.join(skipped)})" if len(skipped) <= 3 else ""
        say(f"skipped {len(skipped)} single-rank trace{'s' if len(skipped) > 1 else ''}{which}: --merge-ranks needs two or "
            "more ranks in a window (export them without --merge-ranks)")
    if not written and not errors:
        errors.append(f"no window of two or more ranks in {' '.join(map(str, paths))}: nothing to merge")
    return errors


def export(
    paths: list[str] = typer.Argument(..., metavar="PATHS...", help=PATHS_HELP),
    perfetto: bool = typer.Option(False, "--perfetto", help="Write a native Perfetto trace <name>.pftrace with overlap tracks, counters, flows and verdicts."),
    json_: bool = typer.Option(False, "--json", help="Write Chrome JSON <name>.perfetto.json.gz whose slices nest on every track, so Perfetto draws all of them."),
    merge_ranks: bool = typer.Option(False, "--merge-ranks", help="With --perfetto: one .pftrace per window of a multi-rank run, a process per rank."),
    align_clocks: bool = typer.Option(False, "--align-clocks", help="With --merge-ranks: where the ranks' clocks differ beyond the uncertainty "
                                      "of their estimate from collectives, put every rank on one clock."),
    out_dir: Path = typer.Option(Path("."), "--out-dir", "-o", help="Folder for the files written."),
    jobs: int | None = typer.Option(None, "--jobs", "-j", help="Worker processes (default: CPU count); one large trace is decoded by as many."),
    scheduler: str | None = typer.Option(None, "--scheduler", metavar="ADDRESS",
                                         help="Dask distributed scheduler (tcp://host:8786): each trace is read, analysed and written "
                                              "on its workers (--out-dir must be a folder they share)."),
) -> None:
    """Rewrite traces for ui.perfetto.dev: a native .pftrace (--perfetto) and/or corrected Chrome JSON (--json)."""
    if not (perfetto or json_):
        fail("choose --perfetto, --json or both")
    if merge_ranks and (json_ or not perfetto):
        fail("--merge-ranks writes .pftrace files: use it with --perfetto alone")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        fail(f"cannot write to {out_dir}: {e.strerror or e}")
    errors = merge_runs(paths, out_dir, align_clocks) if merge_ranks else export_files(paths, out_dir, perfetto, json_, jobs, scheduler)
    for e in errors:
        say(e, "red")
    if errors:
        raise typer.Exit(2)


def view(
    path: Path = typer.Argument(..., help="A trace (.json, .json.gz) or a .pftrace to open."),
    browser: bool = typer.Option(True, "--browser/--no-browser", help="Open the Perfetto UI in the browser (else print its URL)."),
    port: int = typer.Option(9001, "--port", help="Port on 127.0.0.1 (0: any free one)."),
) -> None:
    """Open a trace in ui.perfetto.dev: serve it on 127.0.0.1 until Ctrl-C (reloading the page fetches it again).

    Without a browser here (over SSH, say), it prints the link and the ssh -L command that forwards the port."""
    from .serve import OneFileServer

    if not path.is_file():
        fail(f"{path}: no such file")
    try:
        server = OneFileServer(path, port)
    except OSError as e:
        fail(f"cannot listen on 127.0.0.1:{port}: {e.strerror or e} (try --port 0)")
    opened = False
    if browser:
        import webbrowser

        opened = webbrowser.open(server.ui_url)
    say(f"{'opened' if opened else 'open'} {server.ui_url}  (serving {path} until Ctrl-C)")
    if not opened:
        import socket

        p = server.server_address[1]
        say(f"on another machine (this one over SSH)? forward the port first: ssh -L {p}:127.0.0.1:{p} {socket.gethostname()}, "
            "then open the link there")
    try:
        server.serve_until_stopped()
    except KeyboardInterrupt:
        if not server.fetches:
            say("stopped before the trace was fetched")
            raise typer.Exit(130) from None
    say(f"stopped: sent {path} {server.fetches} time(s)")


def register(app: typer.Typer) -> None:
    """Add this module's commands to ``app``."""
    from .help import PlainUsage

    app.command("plot", cls=PlainUsage)(plot_cmd)
    app.command("export", cls=PlainUsage)(export)
    app.command("view")(view)
