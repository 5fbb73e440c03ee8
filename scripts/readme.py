"""Write every figure and command output that README.md, sample_traces/README.md and tests/data/heldout/README.md
quote, from the tool itself, and draw the pictures under docs/ with the commands the README gives for them.

A quoted part sits between two markers in the Markdown:

- ``<!-- figures: NAME -->`` ... ``<!-- end -->`` (each marker a line of its own): a table or sentence of figures read off the reports of the samples
  and the recordings' own files (:data:`FIGURES`, NAME -> a function of :func:`samples_summary`; those of
  sample_traces/README.md in scripts/sample_figures.py); ``table FOLDER...``: scripts/matrix_table.py's table of
  folders of recorded scenarios (``matrix``, ``heldout/w4-late2``, ``sync-log/w4 sync-log/w2``...); ``fixes FOLDER``:
  scripts/fix_table.py's; ``finding FOLDER``: the top what-if of a scenario's window and its critical path, in the
  tool's words. Those of folders outside :data:`WHOLE` are read off the samples' summary (:func:`of_samples`);
- ``<!-- output: ARGS -->`` ... ``<!-- end -->``: a fenced block holding what ``traceprobe ARGS`` prints on an
  80-column terminal (``COLUMNS=80``, no colours); ``ARGS; lines 1-12,20-24`` quotes those lines only and
  ``ARGS; match REGEX`` the lines that match (an indented one with the lines under it: its sentence wrapped under its
  label), with ``...`` where lines are left out.

The pictures (:data:`PICTURES`) are drawn by the command quoted beside them. tests/test_table.py
(``test_readme_figures_are_the_tools``) and tests/test_readme.py check every part against what the tool gives now;
``TRACEPROBE_UPDATE_GOLDEN=1`` makes them rewrite it, as this script does.

Usage: python scripts/readme.py [--check] [--jobs N] [--only REGEX]
  --check   write nothing; exit 1 naming each quoted part that is not what the tool gives now
  --only    rewrite only the parts whose NAME or arguments match REGEX (and draw no picture)
"""

from __future__ import annotations

import argparse
import csv
import glob
import os
import re
import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "sample_traces"
HELDOUT = ROOT / "tests" / "data" / "heldout"
DOCS = (ROOT / "README.md", SAMPLES / "README.md", HELDOUT / "README.md")
"""The Markdown files whose quoted parts this script writes."""
WHOLE = ("matrix", "heldout")
"""Folders the figures' tables leave out (they have tables of their own, scripts/matrix_table.py): sample_traces/matrix,
and the held-out runs of tests/data/heldout (:func:`where`)."""


def where(rel: str) -> Path:
    """The folder a part names (``matrix/ddp-sleep``, ``heldout/w4-late2``): under sample_traces/, the held-out runs'
    (``heldout/...``) under tests/data/, where the tests that read them are."""
    return HELDOUT.parent / rel if Path(rel).parts[0] == "heldout" else SAMPLES / rel
WIDTH = 80

PICTURES = {"docs/compute-copy.png": "plot sample_traces/compute-copy.*.pt.trace.json.gz --compare --output docs/compute-copy.png"}
"""Each picture under docs/ and the ``traceprobe`` arguments that draw it (as the README quotes them)."""

MARK = re.compile(r"^<!-- (figures|output): ([^\n]+?) -->\n(.*?)^<!-- end -->$", re.S | re.M)
"""A quoted part: its markers each a line of their own (a marker quoted inside a sentence is no part)."""


@dataclass(frozen=True)
class Part:
    """One quoted part of a Markdown file: its ``kind`` (``figures``, ``output``), ``spec`` (the NAME, or the
    ``traceprobe`` arguments with their ``; lines`` choice), the span of its text between the markers and the text."""

    kind: str
    spec: str
    start: int
    end: int
    text: str


def parts(text: str) -> list[Part]:
    """The quoted parts of ``text``, in order."""
    return [Part(m.group(1), m.group(2), m.start(3), m.end(3), m.group(3)) for m in MARK.finditer(text)]


def samples_summary(jobs: int | None = None):
    """Every sample but those of :data:`WHOLE`, analysed (what the figures are read off)."""
    from traceprobe.collect import analyze_paths

    return analyze_paths([p for p in sorted(SAMPLES.iterdir()) if p.name not in WHOLE and (p.is_dir() or p.name.endswith(".json.gz"))],
                         jobs=jobs)


# --- figures -------------------------------------------------------------------------------------------------------

def _report(summary, rel: str):
    return next(r for r in summary.reports if Path(r.path).resolve() == (SAMPLES / rel).resolve())


def _verdict(r, figure: str):
    """The verdict the table shows for ``figure``: the highest value among those judged (None: none)."""
    vs = [v for v in r.verdicts if v.figure == figure and v.level != "n/a"]
    return max(vs, key=lambda v: v.value) if vs else None


WORDS = {"confirmed": "confirmed", "partial": "partial", "none": "no overlap", None: "-"}

SAMPLE_ROWS = (  # (label, trace names, figure words, figure key, the levels expected, a note)
    ("`multi-gpu.sequential` / `concurrent`", ["multi-gpu.sequential", "multi-gpu.concurrent"], "two GPUs busy at once",
     "device_concurrency", ["none", "confirmed"], ""),
    ("`cpu-gpu.sequential` / `concurrent`", ["cpu-gpu.sequential", "cpu-gpu.concurrent"], "host compute under GPU work", "cpu_gpu",
     ["none", "confirmed"], ""),
    ("`compute-copy.sequential`", ["compute-copy.sequential"], "DtoH copies under compute", "copy", ["none"], "pageable, blocking"),
    ("`compute-copy.nonblocking`", ["compute-copy.nonblocking"], "DtoH copies under compute", "copy", ["none"],
     "the copies queue on the compute stream"),
    ("`compute-copy.overlapped`", ["compute-copy.overlapped"], "DtoH copies under compute", "copy", ["confirmed"], ""),
    ("`streams.one-stream` / `multi-stream`", ["streams.one-stream", "streams.multi-stream"], "two or more of 4 streams busy",
     "stream_concurrency", [None, "confirmed"], ""),
    ("`small-ops.one-stream` / `multi-stream`", ["small-ops.one-stream", "small-ops.multi-stream"], "two or more of 4 streams busy",
     "stream_concurrency", [None, "none"], "launch-bound"),
    ("`small-ops.cpu-serial` / `cpu-threads`", ["small-ops.cpu-serial", "small-ops.cpu-threads"], "host threads busy at once (CPU only)",
     "host_threads", [None, "confirmed"], "yet slower: see the wall clock"),
    ("`branches.synchronized` / `independent`", ["branches.synchronized", "branches.independent"], "two GPUs busy at once",
     "device_concurrency", ["none", "partial"], ""),
    ("`data-parallel.dataparallel`", ["data-parallel.dataparallel"], "NCCL under compute", "comm_overlap", ["none"],
     "scatter/gather between steps"),
    ("`data-parallel.ddp` rank 0 / rank 1", ["data-parallel.ddp.rank0", "data-parallel.ddp.rank1"],
     "NCCL all-reduce under backward compute, in the profiled steps", "comm_overlap", ["confirmed", "confirmed"], ""),
    ("`model-parallel.naive` / `pipelined`", ["model-parallel.naive", "model-parallel.pipelined"], "two GPUs busy at once",
     "device_concurrency", ["none", "partial"], ""),
    ("`tile-parallel.single` / `tiled`", ["tile-parallel.single", "tile-parallel.tiled"], "two GPUs busy at once",
     "device_concurrency", [None, "confirmed"], ""),
)
"""The rows of sample_traces/README.md's table of what the top-level samples show: each value read off its report, each
level checked (a note cannot outlive the figure it explains)."""

RUN_ROWS = (  # (label, folder, figure words, the levels allowed)
    ("`training/tb-ddp` (GPT, 2 ranks x 2 windows)", "training/tb-ddp", "all-reduce under compute, steps 2-4 / 7-9", {"partial"}),
    ("`training/tb-fsdp` (2 ranks x 2 windows)", "training/tb-fsdp", "all-gather/reduce-scatter under compute, steps 2-4 / 7-9",
     {"partial", "none"}),
)


def _value(r, key: str) -> tuple[str, str | None]:
    """(the value as the table gives it, its level) of figure ``key`` in ``r``: DtoH copies with their time."""
    from traceprobe.report.units import duration

    if key == "copy":
        v = _verdict(r, "copy_overlap")
        row = r.copy_overlap[r.copy_overlap["direction"] == "DtoH"].iloc[0]
        return f"{row['fraction']:.1%} of {duration(row['copy_ns'])}", v.level if v else None
    v = _verdict(r, key)
    return (f"{v.value:.1%}", v.level) if v else ("-", None)


def samples_table(summary) -> list[str]:
    """sample_traces/README.md's table: each top-level sample's wall clock (the manifest's, one timed run outside the
    profiler), its figure and verdict; then the two training runs, rank by rank.

    Raises:
        AssertionError: a verdict's level is not the one its row's words say.
    """
    out = ["| trace | wall ms | figure | value | verdict |", "| --- | ---: | --- | --- | --- |"]
    for label, names, figure, key, levels, note in SAMPLE_ROWS:
        reports = [_report(summary, f"{n}.pt.trace.json.gz") for n in names]
        values = [_value(r, key) for r in reports]
        assert [lv for _, lv in values] == levels, (label, [lv for _, lv in values])
        wall = list(dict.fromkeys(f"{r.info['wall_s'] * 1e3:.1f}" for r in reports if r.info.get("wall_s")))  # (a DDP pair's one)
        words = " / ".join(WORDS[lv] for lv in levels) + (f" ({note})" if note else "")
        out.append(f"| {label} | {' / '.join(wall)} | {figure} | {' / '.join(v for v, _ in values)} | {words} |")
    for label, folder, figure, allowed in RUN_ROWS:
        per_rank, seen = [], set()
        for rank in (0, 1):
            rs = sorted((r for r in summary.reports if Path(r.path).parent.resolve() == (SAMPLES / folder).resolve() and r.rank == rank),
                        key=lambda r: r.path)
            vs = [_verdict(r, "comm_overlap") for r in rs]
            seen |= {v.level for v in vs if v}
            per_rank.append(f"rank {rank}: " + " / ".join(f"{v.value:.1%}" for v in vs if v))
        assert seen <= allowed, (label, seen)
        out.append(f"| {label} | | {figure} | {', '.join(per_rank)} | {' / '.join(WORDS[lv] for lv in sorted(seen, key=list(WORDS).index))} |")
    return out


def causes_table(summary) -> list[str]:
    """Each scenario of ``sample_traces/causes/``: what was built in (``injected.csv``, measured in the same run) and
    the first screen's top finding and action for its first rank."""
    from traceprobe.report.actions import top_findings

    tops = top_findings(summary)
    out = ["| scenario | built in | the first screen's top finding | do |", "| --- | --- | --- | --- |"]
    with open(SAMPLES / "causes" / "injected.csv") as f:
        for row in csv.DictReader(f):
            name = row["scenario"]
            rs = sorted((r for r in summary.reports if Path(r.path).parent.resolve() == (SAMPLES / "causes" / name).resolve()),
                        key=lambda r: (r.rank or 0, r.path))
            top = tops.get(id(rs[0])) if rs else None
            per = row["injected_ms_per_step"] or ""
            built = row["cause"] or ("a pipeline of 2 stages x 8 microbatches" if row["stages"] else
                                     ("input copies " + ("prefetched on a side stream" if row["prefetch"] == "True" else "not prefetched"))
                                     if row["prefetch"] else "nothing (a baseline)")
            if per:
                built += f": {float(per):,.1f} ms/step"
            elif row["injected_ms"]:
                built += f": {float(row['injected_ms']):,.0f} ms"
            if row["late_rank"] and f"rank {row['late_rank']}" not in built:
                built += f" on rank {row['late_rank']}"
            out.append(f"| `{name}` | {built} | {top.label if top else '-'} | {top.do if top else '-'} |")
    return out


def stopwatch(summary) -> list[str]:
    """The stopwatch against the evidence, in two variants (:mod:`traceprobe.analysis.variants`)."""
    v = summary.variants
    here = v[v["run"].map(lambda p: Path(p).resolve() == SAMPLES.resolve())]

    def row(workload: str, variant: str):
        return here[(here["workload"] == workload) & (here["variant"] == variant)].iloc[0]

    nb, dp = row("compute-copy", "nonblocking"), row("data-parallel", "dataparallel")
    assert nb["agreement"] == "disagrees" and dp["agreement"] == "disagrees"
    busy_verdict = _verdict(_report(summary, "data-parallel.dataparallel.pt.trace.json.gz"), "device_concurrency")
    assert busy_verdict is not None
    busy = busy_verdict.value
    return [f"On the H200s `compute-copy.nonblocking` is {nb['speedup']:.1f}x faster than `sequential` yet *disagrees*: its",
            "copies overlap nothing, they are faster because they land in pinned memory; `data-parallel.dataparallel`",
            f"keeps two GPUs busy {busy:.0%} of the time but gains nothing ({dp['speedup']:.2f}x) over one GPU."]


def four_gpus(summary) -> list[str]:
    """What ``h200-4gpu/`` shows on four GPUs: the tiled variant's GPUs busy at once and its wall clock against one
    GPU's, and the DDP ranks' all-reduce under backward compute."""
    tiled, single = (_report(summary, f"h200-4gpu/tile-parallel.{v}.pt.trace.json.gz") for v in ("tiled", "single"))
    busy = _verdict(tiled, "device_concurrency")
    ddp = [_verdict(r, "comm_overlap") for r in summary.reports
           if Path(r.path).parent.name == "h200-4gpu" and Path(r.path).name.startswith("data-parallel.ddp.")]
    assert busy is not None and len(ddp) == 4 and all(v is not None for v in ddp)
    low, high = min(v.value for v in ddp if v), max(v.value for v in ddp if v)
    return [f"`tile-parallel.tiled` runs its strips on the four GPUs ({busy.value:.0%} of the time two or more busy at once;",
            f"{tiled.info['wall_s'] * 1e3:.1f} ms against {single.info['wall_s'] * 1e3:.1f} ms on one), DDP runs four ranks "
            f"(all-reduce under backward compute {low:.0%}-{high:.0%})."]


sys.path.insert(0, str(ROOT / "scripts"))
import sample_figures  # noqa: E402  (scripts/sample_figures.py)

FIGURES: dict[str, Callable[..., list[str]]] = {"samples": samples_table, "causes": causes_table, "stopwatch": stopwatch,
                                                 "four-gpus": four_gpus, "manifests": sample_figures.manifests,
                                                 "pageable": sample_figures.pageable, "stream-wait": sample_figures.stream_wait,
                                                 "efficiency": sample_figures.efficiency,
                                                 "record-shapes": sample_figures.record_shapes}
"""Each ``figures`` part's lines, by NAME, from the samples' summary."""


def of_samples(spec: str) -> bool:
    """Whether the ``figures`` part ``spec`` is read off the samples' summary (:func:`samples_summary`, what
    tests/test_table.py checks in the default run): a NAME of :data:`FIGURES`, or a ``table`` or ``finding`` of folders
    outside :data:`WHOLE` (the others analyse their folders: tests/test_readme.py, slow)."""
    kind, _, rest = spec.partition(" ")
    if spec in FIGURES:
        return True
    return kind in ("table", "finding") and bool(rest.split()) and all(Path(f).parts[0] not in WHOLE for f in rest.split())


def folder_table(folders: str, summary=None) -> list[str]:
    """``python scripts/matrix_table.py FOLDER``'s table (the folder as :func:`where` finds it): each recorded scenario's
    built-in cause (its ``injected.jsonl``), the top what-if and the gain against what was built in and what was
    measured (each scenario's ranks analysed, or read off ``summary`` where given). Several folders (``heldout/w1-logged heldout/w1-short``) make
    one table, each scenario named by its folder's last part and its own (```w1-short/ddp-sleep```)."""
    import matrix_table  # (scripts/matrix_table.py)

    analysed = (lambda p: sample_figures.under(summary, p)) if summary is not None else None
    names = folders.split()
    if len(names) == 1:
        return matrix_table.table(where(names[0]), analysed)
    out: list[str] = []
    for name in names:
        lines = matrix_table.table(where(name), analysed)
        out = out or lines[:2]
        out += [line.replace("| `", f"| `{Path(name).name}/", 1) for line in lines[2:]]
    return out


def fixes_table(rel: str) -> list[str]:
    """``python scripts/fix_table.py FOLDER``'s table (the folder as :func:`where` finds it): each loop's top what-if,
    and each fix's gain against the what-if of the cause it removes (a slow one)."""
    import fix_table  # (scripts/fix_table.py)

    return fix_table.table(where(rel))


def finding(rel: str, summary=None) -> list[str]:
    """The top what-if of ``FOLDER``'s window as the tool says it, and where its critical path ran: a fenced block, each
    sentence wrapped at :data:`WIDTH` under its start (the folder analysed, or read off ``summary`` where given)."""
    from traceprobe.collect import analyze_paths
    from traceprobe.report.grid import para

    found = sample_figures.under(summary, where(rel)) if summary is not None else analyze_paths([str(where(rel))], jobs=1)
    w = next((w for w in found.what_ifs if w.top is not None), None)
    if w is None:
        return ["```", "no what-if above the noise floor", "```"]
    return ["```", *(t.plain for x in (w.finding(), w.path_line()) if x for t in para(x, WIDTH)), "```"]


def figures(spec: str, summary, every: bool = False) -> str:
    """The text of the ``figures`` part ``spec``: ``table FOLDER...`` (:func:`folder_table`), ``fixes FOLDER``
    (:func:`fixes_table`), ``finding FOLDER`` (:func:`finding`) or a name of :data:`FIGURES` (``summary``: the samples'
    summary, or a function returning it, called only where it is needed: :func:`of_samples`; ``every``: a summary of
    every sample, :data:`WHOLE` too, read for every table and finding)."""
    kind, _, rest = spec.partition(" ")
    samples = (summary() if callable(summary) else summary) if of_samples(spec) or (every and kind in ("table", "finding")) else None
    if kind == "table":
        return "\n".join(folder_table(rest.strip(), samples)) + "\n"
    if kind == "fixes":
        return "\n".join(fixes_table(rest.strip())) + "\n"
    if kind == "finding":
        return "\n".join(finding(rest.strip(), samples)) + "\n"
    return "\n".join(FIGURES[spec](samples)) + "\n"


# --- command outputs -----------------------------------------------------------------------------------------------

def _lines(spec: str) -> list[tuple[int, int]]:
    """``1-12,20-24`` as 1-based inclusive ranges."""
    out = []
    for piece in spec.split(","):
        a, _, b = piece.strip().partition("-")
        out.append((int(a), int(b or a)))
    return out


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def under(keep: list[int], lines: list[str]) -> list[int]:
    """``keep`` (1-based line numbers) with the lines under each indented one: those after it indented deeper, up to the
    next line at its indent or less (a sentence wrapped under its label, a name's values under it, a list's items)."""
    out: list[int] = []
    for i in keep:
        out.append(i)
        if _indent(lines[i - 1]) == 0:
            continue
        j = i
        while j < len(lines) and lines[j].strip() and _indent(lines[j]) > _indent(lines[i - 1]):
            j += 1
            out.append(j)
    return sorted(set(out))


def command_argv(args: str, root: Path = ROOT) -> list[str]:
    """The arguments of an ``output`` part (its spec before ``;``) as the shell gives them in ``root``: words split,
    globs expanded (sorted)."""
    argv = []
    for a in shlex.split(args):
        argv += sorted(glob.glob(a, root_dir=root)) if any(c in a for c in "*?[") else [a]
    return argv


def command_output(spec: str) -> str:
    """The fenced block of ``output`` part ``spec`` (module doc): the command run in this process, as on an 80-column
    terminal, from the repository's root (its paths are relative to it); shell globs expanded there.

    Raises:
        RuntimeError: the command ended in an error (exit 2 or more), its stderr's end in the message.
    """
    from typer.testing import CliRunner

    from traceprobe.cli import app

    args, _, chosen = spec.partition(";")
    argv = command_argv(args)
    here = os.getcwd()
    os.chdir(ROOT)
    try:
        res = CliRunner().invoke(app, argv, env={"COLUMNS": str(WIDTH), "NO_COLOR": "1"}, catch_exceptions=False)
    finally:
        os.chdir(here)
    if res.exit_code not in (0, 1):  # (1: a gate not met, still an output to quote)
        raise RuntimeError(f"traceprobe {args.strip()} exited {res.exit_code}: {res.stderr.strip()[-500:]}")
    return quoted(res.stdout, chosen)


def quoted(stdout: str, chosen: str = "") -> str:
    """The fenced block quoting ``stdout``, a command's output: every line, or those ``chosen`` (an ``output`` part's
    spec after ``;``: ``lines 1-12,20-24`` or ``match REGEX``) with ``...`` where lines are left out."""
    lines = stdout.rstrip("\n").splitlines()
    chosen = chosen.strip()
    if chosen:
        if chosen.startswith("match "):
            keep = under([i + 1 for i, x in enumerate(lines) if re.search(chosen.removeprefix("match "), x)], lines)
        else:
            keep = [i for a, b in _lines(chosen.removeprefix("lines").strip()) for i in range(a, min(b, len(lines)) + 1)]
        picked, last = [], 0
        for i in keep:
            if i > last + 1:
                picked.append("...")
            picked.append(lines[i - 1])
            last = i
        if last < len(lines):
            picked.append("...")
        lines = picked
    return "```\n" + "\n".join(lines) + "\n```\n"


# --- the files -----------------------------------------------------------------------------------------------------

def rewrite(path: Path, want: Callable[[Part], str]) -> tuple[str, list[str]]:
    """``path``'s text with every quoted part as ``want`` gives it, and the specs of the parts that changed."""
    text = path.read_text()
    changed = []
    for p in reversed(parts(text)):
        new = want(p)
        if text[p.start:p.end] != new:
            changed.append(f"{path.relative_to(ROOT)}: {p.kind}: {p.spec}")
            text = text[:p.start] + new + text[p.end:]
    return text, changed[::-1]


def draw(picture: str, out: Path) -> None:
    """Draw ``picture`` (:data:`PICTURES`) to ``out`` with the command the README quotes."""
    args = PICTURES[picture].replace(f"--output {picture}", f"--output {out}")
    command_output(args)


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 naming each part that differs")
    ap.add_argument("--jobs", type=int, default=None, help="worker processes for the samples' analysis")
    ap.add_argument("--only", metavar="REGEX", help="only the parts whose NAME or arguments match (and no pictures)")
    opts = ap.parse_args()
    outputs: dict[str, str] = {}
    summaries: list = []

    def the_summary():
        if not summaries:  # (once, and only where a figure of the samples is asked for)
            summaries.append(samples_summary(opts.jobs))
        return summaries[0]

    def want(p: Part) -> str:
        if opts.only and not re.search(opts.only, p.spec):
            return p.text
        if p.kind == "figures":
            return figures(p.spec, the_summary)
        if p.spec not in outputs:
            outputs[p.spec] = command_output(p.spec)
        return outputs[p.spec]

    stale = []
    for path in DOCS:
        text, changed = rewrite(path, want)
        stale += changed
        if changed and not opts.check:
            path.write_text(text)
    if not opts.check and not opts.only:
        for picture in PICTURES:
            draw(picture, ROOT / picture)
    for s in stale:
        print(("stale: " if opts.check else "rewrote: ") + s)
    return 1 if opts.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
