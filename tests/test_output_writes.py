"""Output is written or the command fails: stdout cut by ``ulimit -f`` (EFBIG) or written to a full disk
(``/dev/full``: ENOSPC) is one line on stderr and exit 2, in every command that writes to stdout. The traces are
SYNTHETIC (tests/synthetic.py: made up, not recorded)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from synthetic import TraceBuilder

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def traces(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("writes")
    for name in ("a", "b"):
        b = TraceBuilder(f"output writes {name}", rank=0 if name == "a" else 1, world_size=2)
        for i in range(20):
            b.kernel(0, 7, i * 2000, 1000, name=f"kernel_{i}_" + "x" * 60)
        b.step(1, 0, 50_000)
        b.write(folder / f"{name}.pt.trace.json")
    return folder


SHORT = {  # name -> the command's arguments, run with stdout a file limited to 1 KiB (ulimit -f 1: EFBIG)
    "json": ["overlap-report", ".", "--format", "json", "-j", "1"],
    "detail": ["overlap-report", ".", "--detail", "-j", "1"],
    "csv": ["overlap-report", ".", "--format", "csv", "-j", "1"],
    "markdown": ["overlap-report", ".", "--format", "markdown", "-j", "1"],
    "job": ["job", ".", "-j", "1"],
    "job_json": ["job", ".", "--format", "json", "-j", "1"],
    "diff": ["diff", "a.pt.trace.json", "b.pt.trace.json", "--format", "json", "-j", "1"],
    "schema": ["schema"],
}
FULL = {  # run with stdout /dev/full (ENOSPC)
    "json_full": ["overlap-report", ".", "--format", "json", "-j", "1"],
    "export_full": ["export", ".", "--perfetto", "-o", "OUT", "-j", "1"],
}

_SCRIPT = """
import json, os, resource, sys
from traceprobe.cli import app
cases, out, full, limit, short = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5].split(",")
hard = resource.getrlimit(resource.RLIMIT_FSIZE)[1]
results = {}
for name, args in cases.items():
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit if name in short else hard, hard))
    target = full if name.endswith("_full") else os.path.join(out, name + ".out")
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    efd = os.open(os.path.join(out, name + ".err"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(fd, 1); os.dup2(efd, 2); os.close(fd); os.close(efd)
    try:
        code = app(args, standalone_mode=False)
    except SystemExit as e:
        code = e.code
    except Exception as e:  # (an error that is no exit code: -1)
        print(f"{type(e).__name__}: {e}", file=sys.stderr)
        code = -1
    sys.stdout.flush(); sys.stderr.flush()
    results[name] = code or 0
resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY,) * 2)
with open(os.path.join(out, "codes.json"), "w") as f:
    json.dump(results, f)
"""


@pytest.fixture(scope="module")
def ran(traces: Path, tmp_path_factory) -> tuple[dict, Path]:
    """Every case run once, in one interpreter (each with its own stdout and stderr files): exit codes and folder."""
    out = tmp_path_factory.mktemp("outs")
    cases = {**SHORT, **{k: [str(out) if a == "OUT" else a for a in v] for k, v in FULL.items()}, "fits": SHORT["json"]}
    import json

    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    full = "/dev/full" if os.path.exists("/dev/full") else os.devnull
    subprocess.run([sys.executable, "-c", _SCRIPT, json.dumps(cases), str(out), full, "1024", ",".join(SHORT)], cwd=traces, env=env,
                   timeout=120, check=True)
    return json.loads((out / "codes.json").read_text()), out


@pytest.mark.parametrize("name", sorted(SHORT))
def test_short_write_under_ulimit_is_an_error(ran, name: str) -> None:
    codes, out = ran
    err = (out / f"{name}.err").read_text()
    lines = [ln for ln in err.splitlines() if "cannot write the output" in ln]
    assert codes[name] == 2 and len(lines) == 1 and "too large" in lines[0].lower(), (codes[name], err)
    assert (out / f"{name}.out").stat().st_size <= 1024


@pytest.mark.parametrize("name", sorted(FULL))
def test_full_disk_is_an_error(ran, name: str) -> None:
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full here")
    codes, out = ran
    err = (out / f"{name}.err").read_text()
    assert codes[name] == 2 and "No space left on device" in err, (codes[name], err)


def test_whole_output_written_when_it_fits(ran) -> None:
    """The same command without a limit: exit 0 and the whole document."""
    import json

    codes, out = ran
    assert codes["fits"] == 0 and len(json.loads((out / "fits.out").read_text())["traces"]) == 2
