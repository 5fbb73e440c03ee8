"""One trace's analysis: every figure of one trace, and its verdicts (:class:`OverlapReport`).

(``analysis/report.py`` before: renamed so that "report" names one thing, the output package
:mod:`traceprobe.report`.)

This is the facade a notebook user calls: ``overlap_report(load_trace(path))``.
Each figure is defined once, in the docstring of the function computing it
(:mod:`.busy`, :mod:`.overlap`, :mod:`.concurrency`, :mod:`.steps`), over the
device work launched inside the profiled steps (:mod:`.profiled`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd

from ..keyed import unique_pairs
from ..reading import Trace
from .advice import verdicts as vd
from .advice.findings import exposed_collective_spans, findings
from .causal.dependency_graph import RankGraph, rank_graph
from .causal.what_if_kernels import with_kernel_causes
from .device.breakdown import gpu_breakdown, step_breakdown
from .device.busy import compute_mask, copy_directions, copy_mask, fraction_of, pageable_copies, stream_busy, work_ns
from .device.concurrency import DeviceConcurrency, device_concurrency, stream_concurrency
from .device.kernels import kernel_table, queue_times
from .device.overlap import CpuGpuOverlap, comm_overlap, copy_overlap, cpu_gpu_overlap
from .device.profiled import Launches, keep_device_events, launches, not_recorded_notes, set_aside, set_aside_notes, unlinked_notes
from .device.steps import device_steps, throughput
from .host.graph_capture import capture_notes
from .host.host_threads import HostThreadConcurrency, host_thread_concurrency, host_thread_verdict
from .host.idle_causes import idle_cause_table
from .host.training import data_parallel_wrapper, distributed_data_parallel, training_evidence
from .host.warmup_notes import first_step, runs_before, warmup_notes
from .job.collectives import collective_table
from .job.comm_types import BUCKETED, collective_kinds, forward_allreduce_devices, wrapper_copy_devices
from .memo import device_column, empty_frame
from .registry import Inputs, compute_figures


@dataclass(frozen=True)
class OverlapReport:
    """Every figure of one trace.

    Attributes:
        path: the trace file.
        window_ns: (start, end) of the trace window in ns (first start and last
            end of the device work counted, see ``set_aside``); (0, 0) without.
        streams: per (device, stream) busy time, see :func:`.busy.stream_busy`.
        copy_overlap: copy/compute overlap, see :func:`.overlap.copy_overlap`.
        devices: cross-device concurrency and per-device busy/idle time.
        stream_concurrency: per device, see :func:`.concurrency.stream_concurrency`.
        comm_overlap: comm/compute overlap, see :func:`.overlap.comm_overlap`.
        cpu_gpu: CPU/GPU overlap, see :class:`.overlap.CpuGpuOverlap`.
        host_threads: host-thread concurrency, see :mod:`.host_threads` (None only
            in reports built by hand).
        exposed_comm: exposed collective communication as intervals, see
            :func:`.findings.exposed_collective_spans` (what waits across ranks
            are measured against, :mod:`.causes`).
        idle_causes: idle time by cause per device and per step, see
            :func:`.idle_causes.idle_cause_table`.
        steps: per ``ProfilerStep``, host and device side (columns in
            :func:`.steps.device_steps`), with the figures ``device_concurrency``,
            ``copy_overlap``, ``comm_overlap``, ``stream_concurrency`` (float64
            fractions of the device work inside the step's GPU interval, NaN where
            undefined); empty without step annotations.
        throughput: steps per second, see :func:`.steps.throughput` (NaN without steps).
        verdicts: the plain-English statements, see :mod:`.verdicts`.
        rank: distributed rank from the trace's ``distributedInfo``, if any.
        info: manifest facts about the run (workload, variant, wall_s, ...).
        event_count: number of events in the file.
        warnings: what the loader dropped or could not use (one line each).
        breakdown: GPU time breakdown per device, see :func:`.breakdown.gpu_breakdown`.
        breakdown_steps: the same per step window, see :func:`.breakdown.step_breakdown`.
        findings: ranked headroom, see :func:`.findings.findings` (in a Summary, its host-side findings are its
            window's what-ifs, :func:`.replayed.with_what_if`).
        kernels: device time per kernel name, see :func:`.kernels.kernel_table`.
        queue: launch-to-start delay, see :func:`.kernels.queue_times`.
        collectives: the collective kernels launched in the trace, see
            :func:`.collectives.collective_table` (matched across ranks in the Summary).
        set_aside: device work left out of the figures, see :func:`.profiled.set_aside`.
        notes: sentences for a person on what has no figure or verdict and why:
            device activity the trace launched but did not record
            (:func:`.profiled.not_recorded_notes`), work set aside, graph captures (:func:`.graph_capture.capture_notes`), warm-up
            (:func:`.host.warmup_notes.warmup_notes`), copies or
            communication under the verdict cut-off.
        all_device_work: whether the figures keep every device event (``set_aside``
            then lists what the default would have left out).
        work_ns: time any device ran work other than communication kernels, see
            :func:`.busy.work_ns`.
        backend: the trace's device runtime (``cuda``, ``hip``, ``mtia``,
            :attr:`traceprobe.reading.Trace.backend`); devices are named
            ``<backend>:<id>`` in every verdict, note and diff subject.
        training: the host event that shows the trace trains
            (:func:`.training.training_evidence`); ``""`` for a trace without such
            evidence (inference, serving), whose hints use serving words; ``wrapper``
            ``"nn.DataParallel"`` where its host ops show it (:func:`.training.data_parallel_wrapper`);
            ``forward_allreduce`` the devices whose all-reduces include the forward's, tensor parallelism's
            (:func:`.job.comm_types.forward_allreduce_devices`).
        extra: the figures computed by a function of their own, declared in
            :data:`.registry.COMPUTED`: each one's table by its key (empty in reports
            built by hand).
        graph: the trace's part of its job's dependency graph
            (:func:`.dependency_graph.rank_graph`), replayed across the ranks of its window
            by :func:`.what_if_windows.window_what_ifs`; None in reports read from summaries or built by hand.

    A report is picklable (it travels between worker processes): it holds figures and
    the dependency graph's arrays, never the :class:`~traceprobe.reading.Trace`.
    """

    path: str
    window_ns: tuple[int, int]
    streams: pd.DataFrame
    copy_overlap: pd.DataFrame
    devices: DeviceConcurrency
    stream_concurrency: pd.DataFrame
    comm_overlap: pd.DataFrame
    cpu_gpu: CpuGpuOverlap
    steps: pd.DataFrame
    throughput: float
    verdicts: list[vd.Verdict]
    rank: int | None = None
    info: dict[str, Any] = field(default_factory=dict)
    event_count: int = 0
    warnings: tuple[str, ...] = ()
    breakdown: pd.DataFrame = field(default_factory=pd.DataFrame)
    breakdown_steps: pd.DataFrame = field(default_factory=pd.DataFrame)
    findings: pd.DataFrame = field(default_factory=pd.DataFrame)
    kernels: pd.DataFrame = field(default_factory=pd.DataFrame)
    queue: pd.DataFrame = field(default_factory=pd.DataFrame)
    collectives: pd.DataFrame = field(default_factory=pd.DataFrame)
    set_aside: pd.DataFrame = field(default_factory=pd.DataFrame)
    notes: tuple[str, ...] = ()
    all_device_work: bool = False
    work_ns: int = 0
    host_threads: HostThreadConcurrency | None = None
    exposed_comm: pd.DataFrame = field(default_factory=pd.DataFrame)
    idle_causes: pd.DataFrame = field(default_factory=pd.DataFrame)
    backend: str = "cuda"
    training: str = ""
    wrapper: str = ""
    forward_allreduce: tuple[int, ...] = ()
    extra: dict[str, pd.DataFrame] = field(default_factory=dict)
    graph: RankGraph | None = None

    @property
    def parallelism(self) -> bool:
        """True when any verdict confirms parallelism."""
        return any(v.level == "confirmed" for v in self.verdicts)

    @cached_property
    def headline(self) -> dict[str, float]:
        """The report's headline figures, summarised across ranks by :func:`.ranks.rank_summary`
        (fractions in 0..1, times in ns; NaN where undefined).

        ``duration_ns`` is the length of the report's trace window
        (``window_ns[1] - window_ns[0]``); ``mean_step_ns`` is 1 s / throughput (the
        loop's period on the device, see :func:`.steps.throughput`); ``gpu_busy_ns`` the time any device
        was busy; ``work_ns`` the same outside communication kernels
        (:func:`.busy.work_ns`); ``comm_ns`` the union of communication kernels, summed
        over devices. :func:`overlap_report` computes it where the trace is analysed (a
        worker process, for many traces), so it travels with the report and the
        summary across ranks pays nothing per rank.
        """
        co = self.copy_overlap
        return {
            "duration_ns": float(self.window_ns[1] - self.window_ns[0]),
            "mean_step_ns": 1e9 / self.throughput if self.throughput > 0 else math.nan,
            "gpu_busy_ns": float(self.devices.any_busy_ns),
            "work_ns": float(self.work_ns),
            "comm_ns": float(self.comm_overlap["comm_ns"].sum()) if not self.comm_overlap.empty else math.nan,
            "utilization": float(self.devices.devices["utilization"].mean()) if not self.devices.devices.empty else math.nan,
            "copy_overlap": fraction_of(co, "overlapped_ns", "copy_ns", where=(co["direction"] == "all").to_numpy(dtype=bool)),
            "comm_overlap": fraction_of(self.comm_overlap, "overlapped_ns", "comm_ns"),
            "stream_concurrency": fraction_of(self.stream_concurrency, "multi_stream_ns", "busy_ns"),
            "cpu_gpu_overlap": self.cpu_gpu.fraction,
        }


def _comm_hints(colls: dict[int, set[str]], training: bool = True, forward: frozenset[int] = frozenset(),
                ddp: bool = False) -> dict[int, str]:
    """The ``none`` hint of each device's communication verdict, by the collectives it ran (:func:`.job.comm_types.collective_kinds`).

    All-to-all first (expert parallelism, whatever else ran), then all-reduces launched in forward (``forward``: tensor
    parallelism's, in training); training words (gradient buckets, shard prefetch, backward, DataParallel) only when
    ``training``, ``DistributedDataParallel``'s own buckets where the trace shows it (``ddp``:
    :func:`.training.distributed_data_parallel`); all-gathers and reduce-scatters (FSDP, ZeRO) are shards, not
    gradient buckets (the trace shows it, :func:`.training.training_evidence`); otherwise serving words: the
    per-layer collectives of tensor parallelism in inference.
    """
    hints = {}
    for d, kinds in colls.items():
        if "alltoall" in kinds:  # (expert parallelism: tokens to their experts and back)
            hints[d] = ("all-to-all (expert parallelism's token dispatch and combine) ran while compute waited; pipeline it "
                        "with the experts' compute over split micro-batches, and balance the tokens across experts")
        elif d in forward:  # (all-reduces in forward: tensor parallelism's, .job.comm_types.forward_allreduce_devices)
            hints[d] = ("the per-layer all-reduces of tensor parallelism, launched in forward and backward between layers, "
                        "overlap little by design; overlap them with the next matmul (asynchronous tensor parallelism), or "
                        "use sequence parallelism's reduce-scatter and all-gather in their place")
        elif kinds & BUCKETED and not training:
            hints[d] = ("the per-layer collectives of tensor-parallel inference sit between layers and overlap little by design; "
                        "use a faster or fused all-reduce (custom one-shot/two-shot or multimem all-reduce, fused with the norm), "
                        "or asynchronous tensor parallelism that overlaps it with the next matmul")
        elif kinds & {"allgather", "reducescatter"}:  # (FSDP, ZeRO: shards gathered before use, gradients scattered after)
            hints[d] = ("communication ran while compute waited; prefetch the next layer's all-gather (FSDP's forward and "
                        "backward prefetch) so it runs under the current layer's compute, and the reduce-scatter under the next's")
        elif kinds & BUCKETED and ddp:  # (DDP buckets already: .training.distributed_data_parallel)
            hints[d] = ("communication ran while compute waited; DistributedDataParallel already all-reduces each gradient "
                        "bucket during backward, and what stays exposed is mostly the last buckets, after backward's compute: "
                        "a smaller bucket_cap_mb makes the last one smaller")
        elif kinds & BUCKETED:
            hints[d] = "communication ran while compute waited; bucket gradients so all-reduce starts during backward"
        elif kinds and kinds <= {"broadcast", "reduce"} and training:
            hints[d] = ("nn.DataParallel's broadcast and reduce run between the replicas' forward and backward and cannot "
                        "overlap them; DistributedDataParallel all-reduces gradients during backward")
        else:
            hints[d] = "communication ran while compute waited; launch independent compute before waiting on the collective"
    return hints


def _copy_hints(trace: Trace) -> tuple[dict[tuple[int, str], str], frozenset[tuple[int, str]]]:
    """The ``none`` hint for each (device, direction) of copies: why they did not overlap, and what would help;
    and the (device, direction) pairs of copies not meant to overlap (:func:`.verdicts.copy_verdicts`).

    DtoD copies of the devices of :func:`.job.comm_types.wrapper_copy_devices` are named as a data-parallel
    wrapper's (DDP's gradient buckets, FSDP's copy-in/out), not meant to overlap, as the findings name them;
    the hints name the trace's runtime (CUDA or HIP events, :func:`.verdicts.runtime_word`).
    """
    rt = vd.runtime_word(trace.backend)
    is_copy = copy_mask(trace)
    device, stream = device_column(trace, "device"), device_column(trace, "stream")
    comp = compute_mask(trace)
    # the copies alone: device, stream, direction, pageable
    c_dev, c_stream, c_dir, c_pageable = device[is_copy], stream[is_copy], copy_directions(trace)[is_copy], pageable_copies(trace)[is_copy]
    hints: dict[tuple[int, str], str] = {}
    wrapper_copies: set[tuple[int, str]] = set()
    # the copies of each (device, direction), and the streams of each device's compute, by one sort each (not a mask
    # over every event per group: thousands of devices took seconds)
    codes = pd.factorize(pd.Series(c_dir, dtype=object))[0].astype(np.int64)
    order = np.lexsort((codes, c_dev))
    cut = np.flatnonzero((np.diff(c_dev[order]) != 0) | (np.diff(codes[order]) != 0)) + 1
    copy_groups = sorted((((int(c_dev[g[0]]), str(c_dir[g[0]])), g) for g in np.split(order, cut) if g.size), key=lambda t: t[0])
    cd, cs = device[comp], stream[comp]
    comp_streams_of: dict[int, set[int]] = {}
    if cd.size:
        for a, b in unique_pairs(cd, cs)[0].T.tolist():
            comp_streams_of.setdefault(int(a), set()).add(int(b))
    wrappers = wrapper_copy_devices(trace)
    for (d, direction), g in copy_groups:
        if direction == "DtoD" and d in wrappers:
            hints[(d, direction)] = vd.wrapper_copy_words(wrappers[d])
            wrapper_copies.add((d, direction))
            continue
        comp_streams = comp_streams_of.get(d, set())
        if comp_streams and set(np.unique(c_stream[g]).tolist()) <= comp_streams:
            hint = f"copies ran on the compute stream, so each waited for the compute before it; issue them on a separate stream ordered by {rt} events"
        else:
            hint = "copies ran while no compute kernel did; enqueue the next compute before waiting on a copy"
        if c_pageable[g].any():
            hint += "; pageable host memory makes copies staged and synchronous: copy into pinned memory"
        hints[(d, direction)] = hint
    return hints, frozenset(wrapper_copies)


def _figures(trace: Trace) -> dict[str, Any]:
    return {"copy": copy_overlap(trace), "dev": device_concurrency(trace), "streams": stream_concurrency(trace), "comm": comm_overlap(trace)}


def gpu_step_windows(steps: pd.DataFrame) -> pd.DataFrame:
    """The steps' GPU intervals (:func:`.steps.device_steps`: they tile the device time, never overlapping) as
    windows: ``step``, ``start_ns``, ``end_ns`` (int64); steps without device work are left out."""
    if steps.empty or "gpu_start_ns" not in steps:
        return empty_frame(dict.fromkeys(("step", "start_ns", "end_ns"), np.int64))
    lo = steps["gpu_start_ns"].to_numpy(np.int64)
    ok = lo >= 0  # (-1: the step launched no device work)
    return pd.DataFrame({"step": steps["step"].to_numpy(np.int64)[ok], "start_ns": lo[ok],
                         "end_ns": steps["gpu_end_ns"].to_numpy(np.int64)[ok]})


def _tables(trace: Trace, kept: Trace, steps: pd.DataFrame, before: int = 0) -> dict[str, Any]:
    """The report's breakdowns, findings, kernel, queue and collective tables, CPU/GPU overlap and host-thread
    concurrency (computed once the figures that do not need them are), and the figures of
    :data:`.registry.COMPUTED`. Per-step tables use the steps' GPU intervals, so a step holds every device
    interval inside it, whichever step launched it; ``before``: the runs before the window (:func:`.runs_before`)."""
    windows = gpu_step_windows(steps)
    return {"breakdown": gpu_breakdown(kept), "breakdown_steps": step_breakdown(kept, windows),
            "findings": findings(kept, steps=windows if not windows.empty else None, runs_before=before),
            "kernels": kernel_table(kept), "queue": queue_times(kept), "collectives": collective_table(kept),
            "cpu": cpu_gpu_overlap(kept), "threads": host_thread_concurrency(trace),
            "exposed_comm": exposed_collective_spans(kept), "idle_causes": idle_cause_table(kept, windows),
            "extra": compute_figures(Inputs(trace, kept, windows))}


def overlap_report(trace: Trace, info: dict[str, Any] | None = None, all_device_work: bool = False) -> OverlapReport:
    """Compute every figure and verdict of ``trace``.

    Args:
        trace: a loaded :class:`~traceprobe.reading.Trace`.
        info: optional facts about the run (from a manifest) carried into the report.
        all_device_work: keep every device event in the trace-wide figures and
            verdicts, as traceprobe did before the profiled window existed; by
            default only device work launched inside the profiled steps counts
            (:mod:`.profiled`). Steps always count the work launched inside the
            steps (:mod:`.steps`).

    Returns:
        an :class:`OverlapReport`.
    """
    la = launches(trace)
    aside = set_aside(trace, la)
    kept = trace if all_device_work or aside.empty else keep_device_events(trace, la.kept)
    report = _report(trace, info, all_device_work, la, aside, kept)
    report.headline  # noqa: B018 - computed here, where the trace is analysed (see OverlapReport.headline)
    return report


def _report(trace: Trace, info: dict[str, Any] | None, all_device_work: bool, la: Launches, aside: pd.DataFrame,
            kept: Trace) -> OverlapReport:
    """:func:`overlap_report`'s figures, verdicts and notes."""
    f = _figures(kept)
    steps = device_steps(trace, la)
    streams, work, window = stream_busy(kept), work_ns(kept), kept.window_ns
    dev = f["dev"]
    per_device = list(vd.columns(dev.devices, "device", "busy_ns", "utilization"))
    busy = {int(d): int(b) for d, b, _ in per_device}
    util = {int(d): float(u) for d, _, u in per_device}
    colls, forward = collective_kinds(kept), forward_allreduce_devices(kept)
    training, backend = training_evidence(trace), trace.backend
    copy_hints, wrapper_copies = _copy_hints(kept)
    t = _tables(trace, kept, steps, runs_before(first_step(trace.steps), info))
    cpu, threads = t["cpu"], t["threads"]
    verdicts = (
        vd.copy_verdicts(f["copy"], busy, copy_hints, backend, wrapper_copies)
        + vd.device_verdict(dev.any_busy_ns, dev.concurrent_ns, dev.concurrency, dev.device_count, busy)
        + vd.stream_verdicts(f["streams"], util, backend)
        + vd.comm_verdicts(f["comm"], busy, _comm_hints(colls, bool(training), forward, distributed_data_parallel(trace)), backend)
        + vd.cpu_gpu_verdict(cpu)
        + host_thread_verdict(threads, not trace.device_events.empty)
    )
    notes = not_recorded_notes(trace) + set_aside_notes(aside, backend) + unlinked_notes(trace, la)
    if all_device_work and notes:
        notes = [n.replace(": left out", ": kept (--all-device-work)") for n in notes]
    if not la.linked and not trace.device_events.empty:
        notes.append("no device event is linked to a launch in this trace (no runtime events): all device work kept")
    notes += capture_notes(trace) + warmup_notes(trace, info) + vd.omissions(f["copy"], f["comm"], busy, f["streams"], backend)
    return OverlapReport(
        path=trace.path,
        window_ns=window,
        streams=streams,
        copy_overlap=f["copy"],
        devices=dev,
        stream_concurrency=f["streams"],
        comm_overlap=f["comm"],
        cpu_gpu=cpu,
        steps=steps,
        throughput=throughput(steps),
        verdicts=verdicts,
        rank=trace.rank,
        info=dict(info or {}),
        event_count=int(trace.metadata.get("event_count", 0)),
        warnings=tuple(trace.metadata.get("warnings") or ()),
        breakdown=t["breakdown"],
        breakdown_steps=t["breakdown_steps"],
        findings=t["findings"],
        kernels=t["kernels"],
        queue=t["queue"],
        collectives=t["collectives"],
        set_aside=aside,
        notes=tuple(notes),
        all_device_work=all_device_work,
        work_ns=work,
        host_threads=threads,
        exposed_comm=t["exposed_comm"],
        idle_causes=t["idle_causes"],
        backend=backend,
        training=training,
        wrapper=data_parallel_wrapper(trace),
        forward_allreduce=tuple(sorted(forward)),
        extra=t["extra"],
        graph=with_kernel_causes(rank_graph(trace), trace),
    )
