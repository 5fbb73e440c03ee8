"""Child processes of ``scripts/bench.py``: each measured whole (interpreter start, imports, exit).

- :func:`measure` runs one command and reads its wall time, its CPU time (user +
  system, its children's included once they are waited for) and its peak
  resident memory: the larger of ``wait4``'s ``ru_maxrss`` (what
  ``/usr/bin/time -v`` prints as "Maximum resident set size": the largest single
  process among it and its waited-for children) and the largest sum of the
  resident memory of the process and all its descendants alive together,
  sampled from 2 ms after the start at doubling intervals up to 25 ms
  (:data:`SAMPLE_MAX_S`), so that decoding in child processes is counted in full.
  The sampling runs in a thread beside a blocking ``wait4``, so the wall time ends
  when the process does (it used to end at the next sample: up to 25 ms late).
- :data:`FLOOR_CODE`: the parse floor. It reads the file, inflates it (with isal
  when installed, as traceprobe does; zlib otherwise), and decodes every event into
  msgspec structs holding only the fields traceprobe reads, then exits at once.
  Nothing can load a trace with less work than this.
- :data:`HTA_CODE`: HolisticTraceAnalysis, its imports counted:
  ``TraceAnalysis(trace_dir=...)`` then ``get_comm_comp_overlap()``.
- :data:`TRACELENS_CODE`: AMD's TraceLens, its imports counted:
  ``TreePerfAnalyzer.from_file(path)`` then ``get_df_gpu_timeline()`` (its GPU timeline:
  computation, communication, memcpy and idle time, exposed communication).

The peers run under ``--peer-python`` (a virtual environment where they are installed);
one that is not installed there is reported as such, never measured in its place.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MARK = "BENCH_RESULT "

FLOOR_CODE = r'''
import os, sys, time, zlib
t0 = time.perf_counter()
from typing import Union
import msgspec
try:
    from isal import isal_zlib as inflater
except ImportError:
    inflater = zlib

class Args(msgspec.Struct, gc=False):
    device: Union[int, None] = None
    stream: Union[int, None] = None
    correlation: Union[int, None] = None
    bytes: Union[int, None] = None
    external_id: Union[int, None] = msgspec.field(default=None, name="External id")

class Event(msgspec.Struct, gc=False):
    ph: str = ""
    cat: Union[str, None] = None
    name: Union[str, None] = None
    pid: Union[int, str, None] = None
    tid: Union[int, str, None] = None
    ts: Union[float, None] = None
    dur: Union[float, None] = None
    args: Union[Args, None] = None

class Doc(msgspec.Struct):
    traceEvents: list[Event]

t1 = time.perf_counter()
with open(sys.argv[1], "rb") as f:
    raw = f.read()
if raw[:2] == b"\x1f\x8b":
    raw = inflater.decompress(raw, 31)
size = len(raw)
try:
    doc = msgspec.json.Decoder(Doc).decode(raw)
    typed = True
except msgspec.ValidationError:  # a field of an unexpected type: untyped decode of the same fields
    from typing import Any
    class Args(msgspec.Struct, gc=False):
        device: Any = None
        stream: Any = None
        correlation: Any = None
        bytes: Any = None
        external_id: Any = msgspec.field(default=None, name="External id")
    class Event(msgspec.Struct, gc=False):
        ph: Any = ""
        cat: Any = None
        name: Any = None
        pid: Any = None
        tid: Any = None
        ts: Any = None
        dur: Any = None
        args: Union[Args, None] = None
    class Doc(msgspec.Struct):
        traceEvents: list[Event]
    doc = msgspec.json.Decoder(Doc).decode(raw)
    typed = False
t2 = time.perf_counter()
sys.stdout.write("BENCH_RESULT " + msgspec.json.encode({"import_s": t1 - t0, "parse_s": t2 - t1, "events": len(doc.traceEvents),
                                                      "json_bytes": size, "typed": typed,
                                                      "inflater": inflater.__name__}).decode() + "\n")
sys.stdout.flush()
os._exit(0)
'''

HTA_CODE = r'''
import time
t0 = time.perf_counter()
import json, logging, sys, warnings
warnings.filterwarnings("ignore")
logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis
t1 = time.perf_counter()
analyzer = TraceAnalysis(trace_dir=sys.argv[1])
t2 = time.perf_counter()
overlap = analyzer.get_comm_comp_overlap(visualize=False)
t3 = time.perf_counter()
print("BENCH_RESULT " + json.dumps({"import_s": t1 - t0, "load_s": t2 - t1, "overlap_s": t3 - t2,
                                  "overlap": overlap.to_dict(orient="records")}, default=str))
'''


TRACELENS_CODE = r'''
import time
t0 = time.perf_counter()
import json, logging, sys, warnings
warnings.filterwarnings("ignore")
logging.disable(logging.WARNING)
from TraceLens import TreePerfAnalyzer
t1 = time.perf_counter()
analyzer = TreePerfAnalyzer.from_file(sys.argv[1])
t2 = time.perf_counter()
timeline = analyzer.get_df_gpu_timeline()
t3 = time.perf_counter()
print("BENCH_RESULT " + json.dumps({"import_s": t1 - t0, "load_s": t2 - t1, "overlap_s": t3 - t2,
                                  "timeline": timeline.to_dict(orient="records")}, default=str))
'''

TRACELENS_BATCH_CODE = r'''
import time
t0 = time.perf_counter()
import json, logging, sys, warnings
from pathlib import Path
warnings.filterwarnings("ignore")
logging.disable(logging.WARNING)
from TraceLens import TreePerfAnalyzer
t1 = time.perf_counter()
rows = 0
for path in sorted(Path(sys.argv[1]).glob("*.json*")):
    rows += len(TreePerfAnalyzer.from_file(str(path)).get_df_gpu_timeline())
t2 = time.perf_counter()
print("BENCH_RESULT " + json.dumps({"import_s": t1 - t0, "load_s": t2 - t1, "overlap_s": 0.0, "rows": rows}))
'''
"""TraceLens on a folder of rank traces: each file's GPU timeline in turn, in one process (it has no folder mode)."""

PEERS = {"hta": ("hta", "HolisticTraceAnalysis 0.5 (pip install holistictraceanalysis==0.5.0)"),
         "tracelens": ("TraceLens", "AMD's TraceLens (pip install --no-deps git+https://github.com/AMD-AGI/TraceLens, "
                                    "then pip install tqdm openpyxl tabulate orjson PyYAML matplotlib; PyPI's 'tracelens' is another "
                                    "project)")}
"""Peer -> (its module, how to install it)."""


def peer_installed(peer: str, python: str) -> bool:
    """Whether ``python`` can import the peer's module (looked up, not imported)."""
    module = PEERS[peer][0]
    code = f"import importlib.util, sys; sys.exit(importlib.util.find_spec({module!r}) is None)"
    return subprocess.run([python, "-c", code], capture_output=True).returncode == 0


def peer_cmd(peer: str, path: Path, python: str, folder: Path) -> list[str]:
    """The whole-process command of a peer on ``path``; HTA reads every trace of a folder, so it is given ``folder``,
    which holds only a link to ``path`` (made here)."""
    if peer == "hta" and path.is_dir():  # (a folder of rank traces: HTA reads it whole)
        return [python, "-c", HTA_CODE, str(path)]
    if peer == "hta":
        link = folder / path.name
        if not link.exists():
            link.symlink_to(path.resolve())
        return [python, "-c", HTA_CODE, str(folder)]
    return [python, "-c", TRACELENS_BATCH_CODE if path.is_dir() else TRACELENS_CODE, str(path)]


STAGES_CODE = r'''
import json, sys, time
t0 = time.perf_counter()
import typer  # the CLI's own import
try:  # a checkout from before traceprobe/reading (a --baseline)
    from traceprobe import kineto, trace
    read_events = kineto.read_events
except ImportError:
    from traceprobe.reading import decode, trace
    read_events = decode.read_events
from traceprobe import overlap_report  # (where it lives inside the package changes between versions)
from traceprobe.analysis.summary import summarize
from traceprobe.report.json_document import to_json
replay = [0.0]  # seconds inside the replay's sweep (numba's import and cached kernels included): its share of the analysis
try:
    from traceprobe.analysis.causal import sweep as _sweep

    def _timing(f):
        def timed(*a, **k):
            t = time.perf_counter()
            try:
                return f(*a, **k)
            finally:
                replay[0] += time.perf_counter() - t
        return timed
    for _m in ("__init__", "replay", "critical_paths"):
        if hasattr(_sweep.Sweep, _m):
            setattr(_sweep.Sweep, _m, _timing(getattr(_sweep.Sweep, _m)))
except ImportError:  # a checkout from before the sweep
    pass
t1 = time.perf_counter()
dec = read_events(sys.argv[1])
t2 = time.perf_counter()
tr = trace._build(sys.argv[1], dec)
t3 = time.perf_counter()
rep = overlap_report(tr)
t4 = time.perf_counter()
text = to_json(summarize([rep], []))
t5 = time.perf_counter()
print("BENCH_RESULT " + json.dumps({"imports_s": t1 - t0, "read_decode_s": t2 - t1, "frames_s": t3 - t2,
                                  "analysis_s": t4 - t3, "json_s": t5 - t4, "replay_s": replay[0], "bytes": len(text)}))
'''
"""Where one trace's time goes, stage by stage, in one process (imports, read + decode, DataFrames,
analysis, JSON document: the summary's cross-rank part, the what-if replay among it, and the JSON text), and the
replay's own seconds (``replay_s``: the sweep's methods, timed where they run); run from a checkout (``cwd``), so a
``--baseline`` checkout is timed alike."""


SAMPLE_FIRST_S, SAMPLE_MAX_S = 0.002, 0.025
"""The process tree's memory is sampled 2 ms after the start, then at doubling intervals up to 25 ms:
each sample scans ``/proc`` (psutil), and sampling every 2 ms throughout cost the sampler about 0.3
of a CPU, which on 2 CPUs slowed the measured command (a batch of 100 traces: 2.53 -> 2.95 s)."""


def measure(cmd: list[str], timeout: float | None = None, env: dict[str, str] | None = None, cwd: Path | None = None) -> dict[str, Any]:
    """Run ``cmd`` (cwd: the repository, or ``cwd``); its wall time, CPU time and peak RSS (wait4), and its ``BENCH_RESULT`` line."""
    out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
    t = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=out, stderr=err, cwd=cwd or ROOT, env=env)
    done, killed = threading.Event(), threading.Event()
    tree_peak = [0]

    def sample() -> None:  # beside the wait: the wall time ends when the process does, not at a sample
        delay = SAMPLE_FIRST_S
        while not done.wait(delay):
            tree_peak[0] = max(tree_peak[0], _tree_rss(p.pid))
            delay = min(2 * delay, SAMPLE_MAX_S)

    def kill() -> None:
        killed.set()
        p.kill()

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    timer = threading.Timer(timeout, kill) if timeout is not None else None
    if timer is not None:
        timer.start()
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t
    done.set()
    if timer is not None:
        timer.cancel()
    sampler.join()
    timed_out = killed.is_set()
    p.returncode = os.waitstatus_to_exitcode(status)
    out.seek(0)
    err.seek(0)
    stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    result = None
    for line in stdout.splitlines():
        if line.startswith(MARK):
            result = json.loads(line[len(MARK):])
    return {"wall_s": wall, "cpu_s": ru.ru_utime + ru.ru_stime, "peak_rss_mb": max(ru.ru_maxrss / 1024, tree_peak[0] / 2**20),
            "maxrss_mb": ru.ru_maxrss / 1024, "tree_rss_mb": tree_peak[0] / 2**20, "rc": p.returncode,
            "timed_out": timed_out, "result": result, "stderr_tail": stderr[-600:]}


def _tree_rss(pid: int) -> int:
    """Resident bytes of a process and all its descendants together, now (0 if it is gone)."""
    import psutil

    try:
        proc = psutil.Process(pid)
        total = proc.memory_info().rss
        for c in proc.children(recursive=True):
            try:
                total += c.memory_info().rss
            except psutil.Error:
                pass
        return total
    except psutil.Error:
        return 0


def compile_package(root: Path) -> None:
    """Byte-compile ``root/traceprobe`` into its ``__pycache__``, as ``pip install`` does for an installed
    package. Where ``PYTHONDONTWRITEBYTECODE`` is set and the checkout is an editable install, every
    timed run would otherwise compile traceprobe's modules again (30 ms of the real trace's 0.5 s
    run), while pandas, msgspec and HTA come byte-compiled from their installs."""
    import compileall

    compileall.compile_dir(str(root / "traceprobe"), quiet=1)


def traceprobe_cmd(paths: list[str], *opts: str) -> list[str]:
    """``traceprobe overlap-report PATHS --format json --output /dev/null OPTS`` as a user runs it."""
    return [sys.executable, "-m", "traceprobe", "overlap-report", *paths, "--format", "json", "--output", os.devnull, *opts]


def floor_cmd(path: str, pandas: bool = False) -> list[str]:
    """The parse floor's process on ``path``; with ``pandas``, the same process importing pandas first (the floor a
    tool that builds pandas tables starts from: issue 52's reference)."""
    return [sys.executable, "-c", ("import pandas\n" if pandas else "") + FLOOR_CODE, path]


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Median wall and CPU time, every wall time, the largest peak RSS; ``ok`` when every run exited 0 or 1."""
    ok = all(r["rc"] in (0, 1) and not r["timed_out"] for r in runs)
    s: dict[str, Any] = {"ok": ok, "wall_s": statistics.median(r["wall_s"] for r in runs),
                         "cpu_s": statistics.median(r["cpu_s"] for r in runs), "peak_rss_mb": max(r["peak_rss_mb"] for r in runs),
                         "wall_runs_s": [round(r["wall_s"], 4) for r in runs]}
    if not ok:
        bad = next(r for r in runs if r["rc"] not in (0, 1) or r["timed_out"])
        s["error"] = "timed out" if bad["timed_out"] else f"rc={bad['rc']}: {bad['stderr_tail'].strip()[-300:]}"
    results = [r["result"] for r in runs if r["result"]]
    if results:
        s["result"] = results[0]
        if "parse_s" in results[0]:
            s["parse_s"] = statistics.median(x["parse_s"] for x in results)
    return s


Command = list[str] | tuple[list[str], Path]
"""A command, or a command and the folder it runs in (``python -m traceprobe`` there runs that checkout)."""


def alternate(commands: dict[str, Command], repeat: int, timeout: float,
              envs: dict[str, dict[str, str]] | None = None) -> dict[str, dict[str, Any]]:
    """Run each command ``repeat`` times, alternating between them (so that a busy moment of a shared
    machine weighs on all of them alike); :func:`summarize` per command. ``envs``: variables set for
    the command of that name, beside this process's environment."""
    runs: dict[str, list[dict[str, Any]]] = {k: [] for k in commands}
    for _ in range(repeat):
        for k, cmd in commands.items():
            argv, cwd = cmd if isinstance(cmd, tuple) else (cmd, None)
            env = {**os.environ, **envs[k]} if envs and k in envs else None
            runs[k].append(measure(argv, timeout, env=env, cwd=cwd))
    return {k: summarize(v) for k, v in runs.items()}


def synth(workdir: Path, name: str, args: list[str]) -> Path:
    """``scripts/synth_trace.py ARGS -o workdir/name``, reused when written before with the same arguments."""
    path = workdir / name
    stamp = workdir / f".{name}.args"
    if path.exists() and stamp.exists() and stamp.read_text() == json.dumps(args):
        return path
    t = time.perf_counter()
    subprocess.run([sys.executable, str(ROOT / "scripts" / "synth_trace.py"), "-q", *args, "-o", str(path)], check=True)
    stamp.write_text(json.dumps(args))
    print(f"  wrote {name} in {time.perf_counter() - t:.1f} s", file=sys.stderr)
    return path
