"""A newcomer's path, end to end: a fresh clone of the repository (``git clone --local`` of HEAD: what is committed),
a fresh virtual environment (``python -m venv``, no system site-packages) with the clone installed as the light install
(``pip install <clone>``: no torch, every dependency from pip's index or cache as a newcomer's would come; with
``--no-compile``, which halves the install's time and leaves each command to compile what it imports), then the
README's ``traceprobe`` commands in the order the README gives them, run by the environment's ``traceprobe`` from the
clone's root on an 80-column terminal (``COLUMNS=80``, ``NO_COLOR=1``, as scripts/readme.py quotes them), each
output the README quotes compared with the quote as tests/test_readme.py compares it (scripts/readme.py's
:func:`quoted`: the same lines chosen, the same fence); the set-up's command's output fits the terminal (every line,
and at most :data:`SCREEN_LINES` lines for the whole sample folder).

The commands are read from README.md, not typed here: each ``<!-- output: ARGS -->`` part's, and the ``traceprobe``
commands of the set-up's block (``traceprobe overlap-report sample_traces/``: it exits 0 and prints its first screen,
which the README quotes further down as ``overlap-report sample_traces/; lines 1-14``). A command is run once however
often it is quoted. Left out:

- the set-up's ``pip install torch==2.13.0 -e .`` and ``pip install torch==2.13.0 -e '.[test]' && python -m pytest
  -q``: torch (several GB from PyPI on Linux) and the test suite itself; the light install stands for the first
  (``pip install .``: "enough for everything but record", as the README says), and no command here needs torch;
- nothing the README quotes is left out for its length: the longest, the whole sample folder's first screen, is the
  set-up's own command (30 s of the test's 50 on two cores).

Skipped, with the reason: tests run from a copy that is not a git checkout; no ``git``; a Python without ``venv``;
pip unable to reach a package index (its connection errors)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))
import readme  # noqa: E402  # pyright: ignore[reportMissingImports]  - scripts/readme.py

NO_INDEX = re.compile(r"NewConnectionError|NameResolutionError|Failed to establish a new connection|Temporary failure in name "
                      r"resolution|Name or service not known|Network is unreachable|ConnectTimeoutError|Read timed out|"
                      r"ProxyError|SSLError|Max retries exceeded")
"""What pip says when it cannot reach a package index: the warning of each retry (``--retries 1``: at least one, where
``PIP_RETRIES=0`` would leave pip silent about it)."""


def readme_commands(text: str) -> list[tuple[str, list[str], bool]]:
    """The ``traceprobe`` commands of README.md ``text`` in the order it gives them, each once: the set-up block's
    (each ``traceprobe ...`` between ``&&``) and each ``output`` part's; each with the specs of the parts quoting its
    output, and whether the set-up gives it (it must exit 0; a quoted one may exit 1, a gate not met)."""
    head = text.index("## Set-up")
    start = text.index("```\n", head) + 4
    block = text[start:text.index("\n```", start)]
    found = [(head, c.strip().removeprefix("traceprobe "), None) for line in block.splitlines() for c in line.split("&&")
             if c.strip().startswith("traceprobe ")]
    assert found, "no traceprobe command in the README's set-up block"
    quotes = [(p.start, p.spec.partition(";")[0], p.spec) for p in readme.parts(text) if p.kind == "output"]
    out: dict[str, tuple[list[str], list[bool]]] = {}
    for _, args, spec in sorted(found + quotes, key=lambda x: x[0]):
        specs, setup = out.setdefault(" ".join(args.split()), ([], []))
        specs.extend([spec] if spec is not None else [])
        setup.append(spec is None)
    return [(args, specs, any(setup)) for args, (specs, setup) in out.items()]


def _env(venv: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "COLUMNS", "LINES")}
    return {**env, "PATH": os.pathsep.join([str(venv / "bin"), env.get("PATH", "")]), "VIRTUAL_ENV": str(venv),
            "COLUMNS": str(readme.WIDTH), "NO_COLOR": "1"}


@pytest.mark.slow  # a clone, a virtual environment, an install (12 s, pip's cache warm) and the commands (35 s): 50 s on 2 cores
def test_a_newcomer_s_path_from_a_fresh_clone(tmp_path):
    if shutil.which("git") is None:
        pytest.skip("no git: the newcomer's path starts from a clone")
    top = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--show-toplevel"], capture_output=True, text=True)
    if top.returncode != 0 or Path(top.stdout.strip()).resolve() != REPO:
        pytest.skip(f"the tests run from {REPO}, not a git checkout: nothing to clone")
    clone, venv = tmp_path / "traceprobe", tmp_path / "venv"
    try:
        subprocess.run(["git", "clone", "--quiet", "--local", str(REPO), str(clone)], check=True, timeout=300)
        made = subprocess.run([sys.executable, "-m", "venv", str(venv)], capture_output=True, text=True, timeout=300)
        if made.returncode != 0:
            pytest.skip(f"python -m venv failed (no venv or ensurepip in this Python?): {made.stderr.strip()[-300:]}")
        env = _env(venv)
        t = time.monotonic()
        pip = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--disable-pip-version-check",
                              "--no-compile", "--timeout", "15", "--retries", "1", str(clone)],
                             capture_output=True, text=True, env=env, timeout=900)
        took = time.monotonic() - t
        said = pip.stdout + pip.stderr
        if pip.returncode != 0 and NO_INDEX.search(said) and "ResolutionImpossible" not in said:  # (a conflict is a defect)
            why = next(ln for ln in said.splitlines() if NO_INDEX.search(ln))
            pytest.skip(f"pip could not reach a package index to install the clone's dependencies: {why.strip()[:300]}")
        assert pip.returncode == 0, said[-3000:]
        print(f"pip install of the clone: {took:.1f} s")
        where = subprocess.run([str(venv / "bin" / "python"), "-c", "import traceprobe, importlib.util; print(traceprobe.__file__); "
                                "print(importlib.util.find_spec('torch') is None)"],
                               capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
        assert where.returncode == 0, where.stderr
        installed, no_torch = where.stdout.split()
        assert Path(installed).is_relative_to(venv) and no_torch == "True", where.stdout  # (the light install, used)

        text = (clone / "README.md").read_text()
        commands = readme_commands(text)
        assert len(commands) >= 3 and any(setup for *_, setup in commands), commands
        traceprobe = str(venv / "bin" / "traceprobe")
        for args, specs, setup in commands:
            t = time.monotonic()
            res = subprocess.run([traceprobe, *readme.command_argv(args, clone)], capture_output=True, text=True, env=env,
                                 cwd=clone, timeout=600)
            print(f"traceprobe {args}: exit {res.returncode}, {time.monotonic() - t:.1f} s")
            assert res.returncode in ((0,) if setup else (0, 1)), f"traceprobe {args}: exit {res.returncode}\n{res.stderr[-3000:]}"
            assert res.stdout.strip(), f"traceprobe {args} printed nothing"
            if setup:
                _fits_a_screen(args, res.stdout)
            for spec in specs:
                part = next(p for p in readme.parts(text) if p.kind == "output" and p.spec == spec)
                assert readme.quoted(res.stdout, spec.partition(";")[2]) == part.text, (
                    f"README.md's quote of `traceprobe {spec}` is not what the fresh install prints:\n{res.stdout}")
    finally:
        shutil.rmtree(venv, ignore_errors=True)  # (about 500 MB)
        shutil.rmtree(clone, ignore_errors=True)


SCREEN_LINES = 150
"""The most lines the set-up's command prints for the whole sample folder (one line per folder, the worst windows'
blocks, the counts: the first screen of a large folder, docs/measures.md#the-first-screen)."""


def _fits_a_screen(args: str, out: str) -> None:
    """The set-up's command's output on an 80-column terminal: no line wider, at most :data:`SCREEN_LINES` lines for a
    folder of hundreds of traces, which says how to see every window's block (``--all``)."""
    lines = out.splitlines()
    assert max(len(x) for x in lines) <= readme.WIDTH, f"traceprobe {args}: a line wider than {readme.WIDTH} columns"
    assert len(lines) <= SCREEN_LINES, f"traceprobe {args}: {len(lines)} lines\n{out}"
    if re.search(r"\d{3,} traces: \d+ runs, \d+ windows", out):  # (a folder too large for every window's block)
        assert "--all" in out, f"traceprobe {args}: says not how to see every window's block\n{out}"
