"""The ``traceprobe`` command: a thin typer layer over the library.

It parses options, calls :mod:`traceprobe.record`, :mod:`traceprobe.collect` and
the renderers in :mod:`traceprobe.report`, and prints. It computes no figure.

Exit codes of ``overlap-report``: 0 all good; 1 a ``--min-*`` gate was not met;
2 a file could not be read (the others are still reported) or bad usage.
"""

from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Prove whether parallelism actually happened on GPUs: record torch.profiler traces and measure overlap.",
)
err = Console(stderr=True)


class Format(str, Enum):
    table = "table"
    json = "json"
    csv = "csv"
    markdown = "markdown"


def _fail(msg: str, code: int = 2) -> None:
    err.print(f"[bold red]error:[/bold red] {msg}", highlight=False)
    raise typer.Exit(code)


@app.command()
def record(
    workloads: Optional[List[str]] = typer.Argument(None, help="Workloads to run (default: all). See --list."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Output folder (default: runs/<date-time>)."),
    device: str = typer.Option("auto", help="auto (CUDA if available), cuda or cpu."),
    size: Optional[int] = typer.Option(None, help="Matrix size override (elements per side)."),
    repeat: Optional[int] = typer.Option(None, help="Repetitions override (products per batch, steps...)."),
    force: bool = typer.Option(False, help="Record everything again, overwriting existing traces."),
    resume: bool = typer.Option(False, help="Complete an earlier recording in --out: run only what is missing."),
    list_: bool = typer.Option(False, "--list", help="List the workloads and exit."),
) -> None:
    """Run experiments under torch.profiler; write one gzipped Chrome trace per variant and manifest.json."""
    from .workloads import WORKLOADS

    if list_:
        for w in WORKLOADS.values():
            typer.echo(f"{w.name:16} {w.description}")
        return
    import datetime as dt

    from . import record as rec

    outp = out or Path("runs") / dt.datetime.now().strftime("%Y%m%d-%H%M%S")

    def show(e: dict) -> None:
        style = {"ok": "green", "kept": "cyan", "skipped": "yellow", "failed": "red"}[e["status"]]
        wall = f"  {e['wall_s'] * 1e3:,.1f} ms" if e.get("wall_s") is not None else ""
        why = f"  ({e['reason']})" if e.get("reason") else ""
        err.print(f"[{style}]{e['status']:8}[/{style}] {e['workload']}.{e['variant']}{wall}{why}", highlight=False)

    try:
        manifest = rec.record(outp, workloads, device=device, size=size, repeat=repeat, force=force, resume=resume, on_entry=show)
    except (ValueError, FileExistsError) as e:
        _fail(str(e))
    except KeyboardInterrupt:
        _fail(f"interrupted: the traces written so far are whole and listed in {outp / 'manifest.json'}; "
              f"finish with: traceprobe record --out {outp} --resume", code=130)
    except OSError as e:
        _fail(f"cannot write to {outp}: {e.strerror or e}")
    failed = [e for e in manifest["variants"] if e["status"] == "failed"]
    err.print(f"traces and manifest in {outp}; next: traceprobe overlap-report {outp}", highlight=False)
    if failed:
        raise typer.Exit(1)


@app.command("overlap-report")
def overlap_report(
    paths: List[Path] = typer.Argument(..., help="Trace files (.json, .json.gz) or folders of them."),
    fmt: Format = typer.Option(Format.table, "--format", "-f", help="Output format."),
    output: Optional[Path] = typer.Option(None, "--output", help="Write the report to this file instead of stdout."),
    min_copy_overlap: Optional[float] = typer.Option(None, help="Exit 1 if a trace's copy/compute overlap (all directions, per device) is below this fraction."),
    min_device_concurrency: Optional[float] = typer.Option(None, help="Exit 1 if a multi-device trace's cross-device concurrency is below this fraction."),
    jobs: Optional[int] = typer.Option(None, "--jobs", "-j", help="Worker processes (default: CPU count)."),
    debug: bool = typer.Option(False, help="Show tracebacks."),
) -> None:
    """Per-stream busy time, copy/compute, cross-device, stream, comm and CPU/GPU overlap, with verdicts."""
    from rich.progress import Progress

    from .collect import analyze_paths
    from .report import flat, serialize, table

    try:
        with Progress(console=err, transient=True, disable=not err.is_terminal) as progress:
            task = progress.add_task("analysing traces", total=None)
            reports, failures = analyze_paths(paths, jobs=jobs, on_done=lambda _: progress.advance(task))
    except Exception as e:  # noqa: BLE001 - last-resort guard, one line unless --debug
        if debug:
            raise
        _fail(f"{type(e).__name__}: {e}")

    if fmt is Format.table:
        console = Console(file=open(output, "w") if output else None, width=140 if output else None)
        table.render(console, reports, failures)
    else:
        text = {Format.json: serialize.to_json, Format.csv: flat.to_csv, Format.markdown: flat.to_markdown}[fmt](reports, failures)
        if output:
            output.write_text(text)
        else:
            sys.stdout.write(text)
    for f in failures:
        err.print(f"[red]{f.path}: {f.error}[/red]", highlight=False)

    short = []
    for r in reports:
        if min_copy_overlap is not None:
            for row in r.copy_overlap[r.copy_overlap["direction"] == "all"].itertuples() if not r.copy_overlap.empty else []:
                if row.fraction < min_copy_overlap:
                    short.append(f"{r.path}: cuda:{row.device} copy/compute overlap {row.fraction:.1%} < {min_copy_overlap:.1%}")
        if min_device_concurrency is not None and r.devices.device_count >= 2 and r.devices.concurrency < min_device_concurrency:
            short.append(f"{r.path}: cross-device concurrency {r.devices.concurrency:.1%} < {min_device_concurrency:.1%}")
    for s in short:
        err.print(f"[yellow]below threshold: {s}[/yellow]", highlight=False)
    if failures:
        raise typer.Exit(2)
    if short:
        raise typer.Exit(1)


def main() -> None:
    """Console-script entry point."""
    app()
