"""The advice of each idle cause, in the words of the trace's backend (CUDA graphs and NCCL, HIP graphs and RCCL).

Used by :mod:`.findings`; each text names the device, what the host was in (``top``) and one action.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..host.python_frames import short_frame


@dataclass(frozen=True)
class Backend:
    """How a trace's devices, graphs and communication library are named (``cuda``: CUDA graphs, NCCL; ``hip``: HIP
    graphs, RCCL; ``mtia``: MTIA)."""

    name: str

    def device(self, d: int) -> str:
        return f"{self.name}:{d}"

    @property
    def graphs(self) -> str:
        return {"cuda": "CUDA graphs", "hip": "HIP graphs"}.get(self.name, "device graphs")

    @property
    def comm(self) -> str:
        return {"cuda": "NCCL", "hip": "RCCL"}.get(self.name, "collective")

    @property
    def events(self) -> str:
        return {"cuda": "CUDA events", "hip": "HIP events"}.get(self.name, "events")


LOADER_ITERATORS = {"_MultiProcessingDataLoaderIter": "workers", "_SingleProcessDataLoaderIter": "main"}
"""The DataLoader iterator classes torch names in its ``enumerate(DataLoader)#<iterator>.__next__`` op, and how each
loads: in worker processes (``num_workers > 0``) or in the main process (``num_workers=0``)."""


def loader_kind(top: str) -> str:
    """How the DataLoader named by op ``top`` loads: ``"workers"``, ``"main"`` (:data:`LOADER_ITERATORS`), or ``""``
    where the op does not say (another loader, or no op recorded). Advice for a slow input pipeline depends on it: a
    loader that already has workers needs more of them or cheaper samples, not ``num_workers>0``."""
    return next((kind for name, kind in LOADER_ITERATORS.items() if name in top), "")


def loader_fix(top: str) -> str:
    """The remedy of a step waiting for its input, by :func:`loader_kind` of ``top``."""
    return {"workers": "its DataLoader workers cannot keep up: more workers (num_workers), cheaper samples (decode or "
                       "augment on the GPU) or a larger prefetch_factor",
            "main": "it loads in the main process (num_workers=0): DataLoader(num_workers>0, pin_memory=True)"}.get(
        loader_kind(top), "DataLoader(num_workers>0, pin_memory=True, prefetch)")


def idle_advice(cause: str, dev: str, top: str, b: Backend, queued_stream: int = -1, replays: bool = False,
                unseen: bool = False, before: int = 0) -> str:
    """The advice for a device (``dev``, e.g. ``cuda:0``) idle for ``cause`` (one of
    :data:`traceprobe.analysis.host.host_classes.CAUSES`), the host being in ``top`` (``""``: unknown); ``queued_stream``
    the stream of queued work, ``replays`` whether the trace replays graphs, ``unseen`` whether no other device's work
    ran while queued work waited (the trace does not show what it waited for); ``before`` the steps or runs of the
    program before the window (:func:`traceprobe.analysis.host.warmup_notes.runs_before`): after them, first calls are
    no start-up to record after. Raises KeyError for another cause."""
    held = f" ({top})" if top else ""
    ran = f"the program had run {before} step{'s' if before > 1 else ''} or run{'s' if before > 1 else ''} before the window"
    stream = f" (on stream {queued_stream})" if queued_stream >= 0 else ""
    return {
        "graph_capture": f"{dev} was idle while the host made a graph{held}: what it launches inside a capture is recorded "
                         f"into {b.graphs}, not run; capture once at start-up and profile the steps that replay the graph (a graph "
                         "captured again every step usually means new input shapes: pad or bucket them so that one graph is replayed)",
        "sync": f"{dev} was idle while the host was blocked in a synchronizing call{held}: remove it from the loop or defer it "
                "(.item(), .cpu(), printing a tensor, blocking copies, explicit synchronize)",
        "profiler": f"{dev} was idle while the profiler did its own work{held} (CUPTI requesting its activity buffers, setting up "
                    "its instrumentation): the profiler's cost, not the program's; " + (
                        f"{ran}, so it is no start-up of the program: nothing to fix in it" if before else
                        "a profiler started a step before the measured steps (torch.profiler.schedule(wait=1, warmup=1, active=N)) "
                        "does its start-up in that step"),
        "compile": f"{dev} was idle while torch.compile compiled{held}: a compile after the first steps is a recompile "
                   "(TORCH_LOGS=recompiles names the guard; mark_dynamic or pad to fixed sizes where shapes change), " + (
                       f"and {ran}" if before else
                       "a first one is one-time: record after it with torch.profiler.schedule(wait=1, warmup=1, active=N)"),
        "slow_call": f"{dev} was idle while calls ran far slower than their name's median{held}: a new shape's cuDNN/cuBLAS "
                     "plan or autotuning; where shapes change every step, keep them fixed (pad or bucket)",
        "warmup": (f"{dev} was idle while the host did one-time work{held}: first calls far longer than the later ones; {ran}, "
                   "so they are no start-up to record after: a new shape's first calls, new work, or a recompile (TORCH_LOGS=recompiles "
                   "says why)") if before else
                  (f"{dev} was idle while the host did one-time work{held}: first calls far longer than the later ones, or "
                   "torch.compile setting up and compiling; warm-up (CUDA context, lazy kernel loading, cuDNN/cuBLAS handles, compilation, "
                   "NCCL communicators) was profiled: record after it with torch.profiler.schedule(wait=1, warmup=1, active=N) and "
                   "prof.step() each step, or warm up before profiling; a compile after the first steps is a recompile "
                   "(TORCH_LOGS=recompiles says why)"),
        "pinned_alloc": f"{dev} was idle while the host allocated page-locked memory{held}: every non_blocking copy to the "
                        "host allocates a pinned destination; reuse pinned buffers (allocate once, .copy_(..., non_blocking=True) into them)",
        "device_alloc": f"{dev} was idle while the host allocated or freed device memory{held}: keep allocations at steady sizes "
                        "so the caching allocator reuses blocks (no empty_cache in the loop; expandable segments)",
        "other_rank": f"{dev} was idle while the host waited for other ranks{held}: see which rank was late and why",
        "data_loading": f"{dev} was idle while the host waited for the input pipeline{held}: " + (
            f"{loader_fix(top)}" if loader_kind(top) else "load in DataLoader workers (num_workers > 0, pin_memory=True, "
            "prefetch_factor) and copy the next batch ahead on a side stream"),
        "optimizer": f"{dev} was idle while the host ran the optimizer{held}: use a fused or foreach optimizer (fused=True), "
                     "or capture the step",
        "launch": f"{dev} was idle while the host was busy launching work{held}: the loop is launch-bound; {launch_fix(top, b, replays)}",
        "cpu_op": f"{dev} was idle while the host ran CPU ops that launch no device work{held}: not launch-bound, the host "
                  "was computing; move that work to the device or off the step (a DataLoader worker, a background thread)",
        "host": f"{dev} was idle while the host ran outside any profiled op (Python, I/O, sleeps)"
                + (f", most of it in {short_frame(top)}: move that work off the loop or overlap it with device work" if top else
                   ": move that work off the loop or overlap it with device work; a trace recorded with with_stack=True "
                   "(record --with-stack) shows in Perfetto which Python functions ran"),
        "dependency": f"{dev} was idle while its next work, launched already, waited for {top or 'work'} on another stream or device "
                      "(an event wait, the dependency graph's edge): start that work earlier or break the dependency",
        "queued": (f"{dev} was idle although its next work was already launched{stream}, and no other device's work in the trace "
                   "ran meanwhile: the trace does not show what it waited for (an event recorded outside the trace or window, "
                   "another process, or the device's own scheduling between back-to-back kernels); record the producer too")
                  if unseen else
                  f"{dev} was idle although its next work was already launched{stream}: it waited on a dependency (an event of "
                  f"another stream or device{'; the host was in ' + top if top else ''}); start the producer earlier or break the dependency",
    }[cause]


COMPILED_OPS = re.compile(r"(^|: )(CompiledFunction|Torch-Compiled Region|## Call CompiledFxGraph)")
"""Host ops of code ``torch.compile`` compiled: AOTAutograd's ``CompiledFunction`` and ``CompiledFunctionBackward``
(whose autograd node is ``autograd::engine::evaluate_function: CompiledFunctionBackward``), Dynamo's
``Torch-Compiled Region: f/n``, Inductor's ``## Call CompiledFxGraph <hash> ##``."""


def launch_fix(top: str, b: Backend, replays: bool) -> str:
    """What to change where the device waited for launches inside ``top``. A compiled region (:data:`COMPILED_OPS`)
    is not told to compile: without graph replays in the trace, to capture its kernels in graphs
    (``mode="reduce-overhead"``: CUDA graph trees, also on ROCm); with them (:func:`.graph_capture.replays_graphs`),
    that the host's work around the replays is what is left."""
    compiled = COMPILED_OPS.search(top) is not None
    if compiled and replays:
        return (f"it is compiled and replays {b.graphs} already: what is left is the host's work around the replays (guards, "
                "wrappers, eager ops such as the optimizer step): bring more of the step into the graphs (compile the optimizer "
                "step too), or give each replay more work (larger batches)")
    if compiled:
        how = ' (torch.compile(mode="reduce-overhead"))' if b.name in ("cuda", "hip") else ""
        return f"it is compiled already: capture its kernels in {b.graphs}{how}, fuse small kernels, move host work off the loop"
    return f"capture it in {b.graphs} or torch.compile it, fuse small kernels, move host work off the loop"
