"""Shared test helpers: which sample traces a sweep takes (a few by default, every one under ``slow``), sample
traces and reports loaded once per test run, GPU-marked tests skipped where torch sees no CUDA device.

The default run (``python -m pytest -q``) deselects ``slow`` (pyproject's ``addopts``): end-to-end runs (torchrun,
``record``, killed commands, whole-folder commands) and sweeps over every sample. ``-m slow`` runs those alone,
``-m ""`` everything; ``.ci/run`` runs both.
"""

from __future__ import annotations

import fcntl
import os
import pickle
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest

SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"
HELDOUT = Path(__file__).resolve().parent / "data" / "heldout"
"""The held-out runs (tests/data/heldout/README.md): the what-if model's test set, swept with the samples."""

FEW = (
    "compute-copy.overlapped.",  # copies under compute
    "data-parallel.ddp.rank0.",  # one rank of a DDP pair: collectives, buckets
    "multi-gpu.concurrent.",  # two devices
    "small-ops.cpu-threads.",  # many small ops, host threads
    "training/rec-ddp/train_gpt_ddp.steps2-4.rank0.",  # a training window of a recorded script
    "causes/graph-capture/",  # CUDA graphs
    "matrix/ddp-compute/rank0.",  # the matrix
)
"""The samples a sweep takes in the default run (paths under ``sample_traces/`` starting so): one of each kind of
recording; the rest of every sweep is marked ``slow``."""


def few(path) -> bool:
    """Whether a sample trace is one of :data:`FEW` (swept in the default run as well as under ``slow``)."""
    p = str(path).replace("\\", "/")
    rel = p.split("sample_traces/", 1)[-1]
    return rel.startswith(FEW)


def sweep(paths, ids=None) -> list:
    """``pytest.param`` of each path :func:`swept` keeps, those not in :data:`FEW` marked ``slow`` (ids as given)."""
    kept = [p for p in paths if swept(p)]
    return [pytest.param(p, marks=() if few(p) else pytest.mark.slow, id=ids(p) if ids else None) for p in kept]


@cache
def sample_trace(path):
    """A sample trace loaded once per test run (a ``Trace`` is frozen: tests share it)."""
    from traceprobe import load_trace

    return load_trace(path)


@cache
def sample_report(path):
    """A sample trace's ``OverlapReport`` (with its manifest's facts, as the CLI attaches them), computed once per run."""
    from traceprobe import overlap_report
    from traceprobe.collect import manifest_info

    return overlap_report(sample_trace(path), manifest_info(Path(path)))


@cache
def sample_summary(*paths):
    """``analyze_paths(paths, jobs=1)`` of sample files or folders, once per test run (tests read it, never change it)."""
    from traceprobe.collect import analyze_paths

    return analyze_paths(list(paths), jobs=1)


@pytest.fixture(scope="session")
def every_sample(tmp_path_factory):
    """A function giving ``(results, failures)``: :func:`traceprobe.collect.analyze_file` of every trace under
    sample_traces/ and tests/data/heldout/ (:data:`HELDOUT`; an ``OverlapReport`` or ``Failure`` each, in
    :func:`~traceprobe.collect.discover`'s order) and the failures ``discover`` found, each call a copy of its own (tests
    may change it), analysed once per test run.

    The first process of the run to ask analyses them (2 worker processes, as the command's workers do, and pickles
    them as they pickle a report back); pytest-xdist's workers share the run's temporary root, so the others read that
    pickle (52 MB, 3 s) instead of reading and analysing the 541 traces of both folders again (60 s of 2 CPUs each).
    For the sweeps over every sample whose subject is what comes after the per-trace analysis (the windows' replays and
    what-ifs, the whole JSON document, the summaries): each summarises these as ``analyze_paths`` does
    (``summarize``)."""
    from traceprobe.collect import _crash_failure, analyze_file, discover
    from traceprobe.collect.execution import map_items

    root = tmp_path_factory.getbasetemp()
    root = root.parent if os.environ.get("PYTEST_XDIST_WORKER") else root
    path = root / "every_sample.pickle"
    with open(root / "every_sample.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # (released with the file)
        if not path.exists():
            files, failures = discover([str(SAMPLES), str(HELDOUT)])
            results = map_items(analyze_file, files, jobs=2, on_crash=_crash_failure)
            part = path.with_suffix(".part")
            part.write_bytes(pickle.dumps((results, failures), protocol=5))
            part.replace(path)
        data = path.read_bytes()
    return lambda: pickle.loads(data)


@dataclass
class SampleSummary:
    """:func:`every_sample_summary`'s: the summary, and what its replays showed on the way."""

    summary: Any
    replays: list[bool] = field(default_factory=list)
    """Per what-if replay: whether the sweep's arrivals equal the rounds' (tests/replay_rounds.py), array for array."""
    windows: list[tuple] = field(default_factory=list)
    """Per window's what-ifs: ``(full, full_steps, pruned, pruned_steps, min_ns, n_steps, seen)``, its tables replayed
    without the bounds (every cause) and with them, and ``(bound, gain)`` of each candidate replayed with them."""


@pytest.fixture(scope="session")
def every_sample_summary(every_sample) -> SampleSummary:
    """Every sample's report (:func:`every_sample`) summarised once per process as ``analyze_paths`` summarises them,
    each what-if replay also run by the rounds and each window's what-ifs also without the bounds (the tables and
    the bounds kept for tests/test_what_if_plan.py; the replays compared for tests/test_sweep.py; the summary's JSON
    document is tests/test_cli.py's): one summary of every window instead of one per test (35 s of CPU each)."""
    from replay_rounds import replay_rounds

    from traceprobe.analysis.causal import what_if as W
    from traceprobe.analysis.causal import what_if_windows
    from traceprobe.analysis.per_trace import OverlapReport
    from traceprobe.analysis.summary import summarize

    out = SampleSummary(None)
    arrivals, what_ifs, replayed = W.replay_arrivals, what_if_windows.what_ifs, W._replayed

    def both_replays(job, h, d, no_sync):
        new = arrivals(job, h, d, no_sync)
        out.replays.append(all(np.array_equal(a, b) for a, b in zip(new, replay_rounds(job, h, d, no_sync))))
        return new

    def both_tables(graphs, per_rank=None, min_ns=0, only=None, groups=None, before=0, job=None):
        seen: list[tuple[int, int]] = []

        def spy(cands, *args):
            done = replayed(cands, *args)
            seen.extend((cands[i].bound[0], int(r[4])) for i, r in done.items())
            return done

        with pytest.MonkeyPatch.context() as m:  # (every cause replayed, then the bounds pruning as they do)
            m.setattr(W, "PRUNE", False)
            full, full_steps = what_ifs(graphs, per_rank, min_ns, only, groups, before, job)
        with pytest.MonkeyPatch.context() as m:
            m.setattr(W, "PRUNE", True)
            m.setattr(W, "_replayed", spy)
            pruned, pruned_steps = what_ifs(graphs, per_rank, min_ns, only, groups, before, job)
        out.windows.append((full, full_steps, pruned, pruned_steps, max(min_ns, 0), max((len(g.steps) for g in graphs), default=0), seen))
        return pruned, pruned_steps

    results, failures = every_sample()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(W, "replay_arrivals", both_replays)
        mp.setattr(what_if_windows, "what_ifs", both_tables)
        out.summary = summarize([r for r in results if isinstance(r, OverlapReport)],
                                failures + [r for r in results if not isinstance(r, OverlapReport)])
    return out


def swept(path) -> bool:
    """Whether a sample trace is in the sweeps over every sample (reading in pieces, step figures, breakdowns, summary
    round trips): of sample_traces/matrix (21 scenarios x 4 ranks, tested by tests/test_what_if.py) rank 0 only, of
    tests/data/heldout (the matrix's scenarios recorded again with other ranks and sizes, tests/test_heldout.py) none."""
    p = str(path).replace("\\", "/")
    if "tests/data/heldout/" in p:
        return False
    return "sample_traces/matrix/" not in p or "/rank0." in p


def _gpus() -> int:
    try:
        import torch

        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:
        return 0


def pytest_collection_modifyitems(config, items):
    gpu_items = [i for i in items if "gpu" in i.keywords or "multigpu" in i.keywords]
    if not gpu_items:
        return
    n = _gpus()
    for item in gpu_items:
        if "multigpu" in item.keywords and n < 2:
            item.add_marker(pytest.mark.skip(reason=f"needs 2 CUDA GPUs, found {n}"))
        elif "gpu" in item.keywords and n < 1:
            item.add_marker(pytest.mark.skip(reason="needs a CUDA GPU"))


@pytest.fixture(scope="session")
def dask_scheduler():
    """Address of a Dask LocalCluster of 2 worker processes (1 thread each), shared by the session's tests."""
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        yield cluster.scheduler_address


def starts_with_window(text: str, folder: object, window: str) -> bool:
    """Whether ``text`` (a ``job`` report, any wrapping) starts with ``folder``'s window header ``FOLDER WINDOW``: the
    folder's name whole, or cut in the middle with ``…`` where it is wider than the line (a long temporary path)."""
    joined = " ".join(text.split())
    head, _, _ = joined.partition(f" {window}")
    full = str(folder)
    if head == full:
        return joined.startswith(f"{full} {window}")
    left, cut, right = head.partition("…")
    return bool(cut) and full.startswith(left) and full.endswith(right) and joined.startswith(f"{head} {window}")
