"""What a what-if's cause calls for, in words: the short name of each cause (:data:`LABELS`) and the one action it calls
for (:func:`advice`), read by the window's what-ifs (:mod:`.what_if_windows`) and the job's causes."""

from __future__ import annotations

from ..advice.idle_advice import COMPILED_OPS, Backend, launch_fix, loader_fix
from ..host.python_frames import short_frame
from .sync_names import sync_kind
from .what_if_kernels import LABELS as KERNEL_LABELS
from .what_if_kernels import advice as kernel_advice

LABELS = {
    "graph_capture": "graph capture", "sync": "syncs", "profiler": "profiler's own work (CUPTI buffers)", "compile": "compilation",
    "slow_call": "slow calls (new shapes)",
    "warmup": "one-time first calls", "pinned_alloc": "pinned allocation", "device_alloc": "device allocation",
    "other_rank": "host waits for other ranks", "data_loading": "data loading", "optimizer": "optimizer on the host",
    "dispatch": "launch-bound dispatch", "cpu_op": "CPU ops that launch nothing", "host": "host outside ops",
    "pageable_copy": "pageable copies", "imbalance": "extra device work", **KERNEL_LABELS,
}
"""Short names of the what-if causes."""


def short_name(name: str) -> str:
    """A kernel's name for a sentence: one over 48 characters (they run to 130) as its start and end, which say which."""
    return name[:30].rstrip() + "…" + name[-17:].lstrip() if len(name) > 48 else name


def advice(cause: str, top: str, steps_with: int, steps: int, backend: str = "cuda", replays: bool = False,
           host_ops: str = "", before: int = 0) -> str:
    """The one action a what-if's cause calls for (``top``: what holds most of it; ``steps_with`` of ``steps``); launch-bound
    dispatch in the words of ``backend``, told what is left where ``top`` is compiled code and the trace ``replays``
    graphs (:func:`..advice.idle_advice.launch_fix`); host time where the trace holds no host ops (``host_ops`` ``"none"``) or
    only some (``"sampled"``) as that (:attr:`.what_if_windows.WindowWhatIf.unrecorded_host`); one-time work (and the
    profiler's own) as start-up to record after only where no step or run of the program went before the window
    (``before``, :attr:`.what_if_windows.WindowWhatIf.runs_before`)."""
    if cause == "host" and host_ops == "none":
        return ("host time between the runtime calls the trace recorded: it holds no host ops, so whether an op, Python or "
                "a sleep held it cannot be told; record host ops too (torch.profiler's CPU activity) to name it")
    if cause == "host" and host_ops == "sampled":
        return ("host time between the calls the sampled trace kept: the ops it dropped may hold it, so whether an op, Python "
                "or a sleep held it cannot be told; record a whole window (no sampling) to name it")
    every = steps_with >= 2 and steps_with >= steps - 1
    after = f"the program had run {before} step{'s' if before > 1 else ''} or run{'s' if before > 1 else ''} before the window"
    full, full_top = top if cause == "host" else "", top  # (the Python frame the trace's stacks name: short_frame shortens it)
    top = short_name(top)
    where = f" ({top})" if top else ""
    return {
        "graph_capture": "capture the graph once and replay it; a capture per step records launches that do not run",
        "sync": {"htod": "the host waits for its copies to the device from pageable memory: pin the batches "
                         "(DataLoader(pin_memory=True)) and copy with .to(device, non_blocking=True)",
                 "condition": f"a Python condition reads a device tensor{where} (if, while, bool(), assert) and waits for the "
                              "device: keep the check on the device (torch.where, a masked update) or check every N steps",
                 "data_dependent": f"an op whose output size depends on the data{where} waits for the device to size it: "
                                   "torch.where or a mask in place of boolean indexing, or give the size (nonzero_static, "
                                   "output_size=)"}.get(sync_kind(full_top),
                f"drop the syncs in the loop{where}: .item(), .cpu(), printing a device tensor; log every N steps"),
        "profiler": (f"the profiler's own work{where}: CUPTI allocating its activity buffers as they fill, not the program's; "
                     "nothing to fix in the program") if before else
                    (f"the profiler's own start-up{where}: CUPTI allocating its activity buffers and instrumenting, not the program's; "
                     "torch.profiler.schedule(wait=1, warmup=1, ...) starts it a step before the steps it records"),
        "compile": (f"recompiling in {steps_with} of {steps} steps: shapes change; find the guard with TORCH_LOGS=recompiles, "
                    "then mark_dynamic or pad to fixed sizes") if every else f"compilation{where}: one-time, not a steady cost",
        "slow_call": (f"calls{where} ran 10x their median in {steps_with} of {steps} steps: a new shape each step builds "
                      "new cuDNN/cuBLAS plans; keep shapes fixed (pad or bucket)") if every else
                     (f"calls{where} ran 10x their name's median; {after}, so they are no warm-up: a new shape's cuDNN/cuBLAS plan "
                      "or autotuning (keep shapes fixed), or a larger input than the others (record_shapes=True shows it)")
                     if steps == 0 and before else
                     (f"first calls of new shapes{where}: cuDNN/cuBLAS plans and autotuning, one-time; "
                      "torch.profiler.schedule(wait=1, warmup=1, ...) leaves them out") if steps == 0 else
                     f"slow calls{where} in {max(steps_with, 1)} of {steps} steps: a new shape's plan or autotuning",
        "warmup": (f"first calls{where} far slower than their later ones; {after}, so they are no start-up: a new shape's "
                   "first calls, new work, or a recompile (TORCH_LOGS=recompiles says why)") if steps == 0 and before else
                  (f"one-time first calls{where}: torch.profiler.schedule(wait=1, warmup=1, ...) leaves them out"
                   if steps == 0 else f"one-time first calls{where}: not a steady-state cost"),
        "pinned_alloc": f"pinned host memory allocated in the step{where}: allocate it once and reuse it",
        "device_alloc": f"cudaMalloc/cudaFree in the step{where}: drop empty_cache() and keep tensor sizes steady",
        "other_rank": f"the host waits for other ranks{where}: see the rank it waits for",
        "data_loading": f"the step waits for its input{where}: {loader_fix(full_top)}",
        "optimizer": f"the optimizer runs on the host{where}: foreach=True or fused=True",
        "dispatch": f"the host launches slower than the device runs{where}: " + (launch_fix(full_top, Backend(backend), replays)
                    if COMPILED_OPS.search(full_top) else f"fewer, larger kernels (torch.compile) or {Backend(backend).graphs}"),
        "cpu_op": f"CPU work that launches nothing{where}: move it to the device or off the step (a DataLoader worker)",
        "host": (f"host time outside any op, most of it in {short_frame(full)}: speed it up or move it off the step "
                 "(a DataLoader worker, a background thread)") if full else
                "host time outside any op (Python, sleeps, I/O): find it with stacks (record --with-stack) or py-spy",
        "pageable_copy": "copies from pageable memory block the host: pin the buffer and copy with non_blocking=True",
        "imbalance": f"this rank runs more device work than the median rank{where}: balance data, experts or stages",
    }.get(cause, "") or kernel_advice(cause, full_top)
