"""What faster kernels would give back: device-time causes replayed on the same dependency graph as the others.

Definitions (quoted by the README). Where a trace recorded shapes (:mod:`..work.op_work`), each op's *achievable
time* is ``max(FLOPs / (ACHIEVABLE_COMPUTE x peak FLOP/s of its dtype), bytes / (ACHIEVABLE_MEMORY x bandwidth))``
(:data:`ACHIEVABLE_COMPUTE` 70% of the datasheet's peak, :data:`ACHIEVABLE_MEMORY` 80% of its bandwidth: what tuned
kernels reach on large shapes). The causes, each a set of the graph's device ops with new durations (the
:attr:`.dependency_graph.RankGraph.device_causes` that :func:`.what_if.what_ifs` replays like any other cause):

- ``kernels_<class>`` (``gemm``, ``attention``, ``convolution``, ``elementwise``, ``reduction``, ``copy``): every op
  of the class slower than its achievable time brought to it (its kernels shortened in proportion);
- ``fp32_gemm``: fp32 GEMMs (not TF32: their kernels' names say so) at TF32's achievable time, the lever being
  ``torch.backends.cuda.matmul.allow_tf32`` or autocast to bf16;
- ``unfused``: each chain of two or more elementwise or reduction ops run back to back on one stream, read once and
  written once: the chain's time brought to its largest op's bytes over the achievable bandwidth (what
  ``torch.compile`` makes of it). Only device time is modelled: the launches a fusion saves would add to it. A chain
  is one loop (:data:`SAME_LOOP_RATIO`): it breaks between ops over different tensors (elements that differ by at most
  that ratio), which a fusing compiler leaves as separate kernels, as Inductor's scheduler fuses only nodes of one
  iteration space. A trace holds no tensor identities, so two loops over different tensors of the same size are read
  as one chain (the gain then over-stated).

No cause without shapes: no efficiency figure from a guessed shape. A device without a known roofline (and no
``--roofline``) has none either.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from ... import intervals as iv
from ...reading import Trace
from ..work.efficiency import op_rooflines
from ..work.op_models import class_of_name
from ..work.op_owners import event_owners
from ..work.op_work import op_work
from ..work.roofline import Roofline, device_roofline
from .dependency_graph import RankGraph

ACHIEVABLE_COMPUTE = 0.7
"""The share of the datasheet's peak FLOP/s a tuned kernel reaches (module docstring)."""
ACHIEVABLE_MEMORY = 0.8
"""The share of the datasheet's bandwidth a tuned kernel reaches (module docstring)."""
CLASS_CAUSES = ("gemm", "attention", "convolution", "elementwise", "reduction", "copy")
"""The classes whose ops' time a ``kernels_<class>`` cause brings to its roofline."""
SAME_LOOP_RATIO = 64
"""Two fusable ops back to back are one chain where their loops have the same number of elements, or where one has
more than this many times the other's (the smaller a reduction's output or a broadcast row or column, fused into the
larger's loop); between the two, they loop over different tensors and stay two kernels (module docstring)."""
FUSABLE = ("elementwise", "reduction")
"""The classes an ``unfused`` chain is made of."""

LABELS = {**{f"kernels_{c}": f"{c} kernels below their roofline" for c in CLASS_CAUSES},
          "fp32_gemm": "fp32 GEMMs", "unfused": "unfused elementwise chains"}
"""Short names of the causes (as :data:`.what_if_windows.LABELS`)."""


ACTIONS = {"kernels_gemm": "see the GEMMs in --detail: multiples of 64, bf16, larger batches",
           "kernels_attention": "F.scaled_dot_product_attention with the flash backend",
           "kernels_convolution": "channels_last and torch.backends.cudnn.benchmark = True",
           "kernels_elementwise": "fuse the elementwise kernels: torch.compile",
           "kernels_reduction": "fused norms and reductions: torch.compile",
           "kernels_copy": "drop the casts and layout copies in the step",
           "fp32_gemm": "torch.backends.cuda.matmul.allow_tf32 = True, or autocast to bf16",
           "unfused": "fuse the elementwise chains: torch.compile"}
"""The first screen's one action of each cause (as :data:`traceprobe.report.actions.DO_CAUSE`), shortened from :func:`advice`."""


def advice(cause: str, top: str) -> str:
    """The action each cause calls for, in PyTorch's words (``top``: the op and shape holding most of it)."""
    where = f" ({top})" if top else ""
    if cause == "kernels_gemm" and "memory-bound" in top and top.startswith(("aten::bmm", "aten::baddbmm")):
        return (f"batched GEMMs bound by their output's bytes{where}: attention written as bmm + softmax writes its scores to "
                "memory; F.scaled_dot_product_attention (flash) never does")
    if cause == "kernels_gemm" and "memory-bound" in top:
        return (f"memory-bound GEMMs{where}: their time is the weights' bytes over the bandwidth; a larger batch (more tokens "
                "per weight read) or weight quantisation, not kernel tuning, gives it back")
    if cause == "kernels_attention" and top.startswith("aten::_scaled_dot_product_attention_math"):
        return (f"attention in SDPA's math backend{where}: it writes the scores to memory, in fp32; the flash backend "
                "never does (bf16/fp16 inputs, no sdpa_kernel(SDPBackend.MATH), a mask flash supports)")
    if cause == "kernels_attention" and top.startswith("aten::_scaled_dot_product_"):
        return (f"attention in SDPA's own kernel below its roofline{where}: short sequences or few heads leave the device "
                "part idle; a larger batch or packed sequences fill it")
    return {
        "kernels_gemm": f"GEMMs below their roofline{where}: shapes in multiples of 64 (pad), torch.compile(mode='max-autotune'), "
                        "or bf16 where fp32",
        "kernels_attention": f"attention below its roofline{where}: F.scaled_dot_product_attention with the flash or "
                             "efficient backend (not the math one, nor explicit bmm + softmax)",
        "kernels_convolution": f"convolutions below their roofline{where}: channels_last memory format, "
                               "torch.backends.cudnn.benchmark = True, bf16 autocast",
        "kernels_elementwise": f"elementwise kernels below their bandwidth{where}: fuse them (torch.compile)",
        "kernels_reduction": f"norms and reductions below their bandwidth{where}: fused kernels (torch.compile, fused norm ops)",
        "kernels_copy": f"copies below their bandwidth{where}: avoid the cast or layout copy (.contiguous(), .to(dtype)) in the step",
        "fp32_gemm": f"fp32 GEMMs{where}: torch.backends.cuda.matmul.allow_tf32 = True "
                     "(torch.set_float32_matmul_precision('high')) or torch.autocast(device_type='cuda', dtype=torch.bfloat16)",
        "unfused": f"chains of elementwise kernels read and write memory once each{where}: torch.compile fuses them into one",
    }.get(cause, "")


def _shape(row: dict) -> str:
    b, m, n, k = (int(row[c]) for c in ("b", "m", "n", "k"))
    shape = "" if m <= 0 else (f"{b} x " if b > 1 else "") + f"{m} x {n} x {k}"
    return f"{row['name']}{' ' + shape if shape else ''}"


def kernel_causes(trace: Trace, graph: RankGraph, roofline: Roofline | None = None,
                  compute: float = ACHIEVABLE_COMPUTE, memory: float = ACHIEVABLE_MEMORY) -> tuple[tuple[str, str, np.ndarray], ...]:
    """The device-time causes of ``trace`` (module docstring) over ``graph``'s ops (:func:`.dependency_graph.rank_graph`
    of the same trace): ``(cause, top, durations)`` with ``durations`` (int64 ns, aligned with ``graph.d``) the ops'
    durations with the cause removed and ``top`` the op (and GEMM shape, bound) losing most; a cause that shortens
    nothing is left out. ``roofline``: the user's peaks (else the datasheets'); ``compute``, ``memory``: the
    achievable shares of peak FLOP/s and bandwidth."""
    if graph.event_rows.size == 0 or graph.event_rows.size != graph.d.size:
        return ()
    ops = op_work(trace)
    if ops.empty:
        return ()
    roofs = {int(d): device_roofline(trace.devices, int(d), roofline) for d in ops["device"].unique().tolist()}
    ops = op_rooflines(ops, roofs)
    with np.errstate(invalid="ignore"):
        ach = np.fmax(ops["compute_ns"] / compute, ops["memory_ns"] / memory).to_numpy(np.float64)
    time = ops["time_ns"].to_numpy(np.float64)
    owners, parts = event_owners(trace)
    owner = owners[graph.event_rows]  # (each graph op's row of host_events, -1 none)
    key = owner * 2 + (parts[graph.event_rows] > 0)  # (an op, or its backward)
    pos = pd.Index(ops["op_row"].to_numpy(np.int64) * 2 + ops["backward"].to_numpy(bool)).get_indexer(key)  # (its row of ops)
    pos = np.where(owner >= 0, pos, -1)
    ok = pos >= 0
    out = []

    def cause(name: str, factor: np.ndarray, lost: np.ndarray) -> None:
        """Add ``name`` where ``factor`` (per row of ``ops``, in (0, 1]) shortens an op; ``lost`` ranks the ops for ``top``."""
        f = np.where(ok, factor[np.maximum(pos, 0)], 1.0)
        d = np.where(f < 1, np.floor(graph.d * f), graph.d).astype(np.int64)
        if (d < graph.d).any():
            row = ops.iloc[int(np.nanargmax(lost))].to_dict()
            bound = "memory-bound" if row["memory_ns"] >= row["compute_ns"] else "compute-bound"
            out.append((name, f"{_shape(row)}, {bound}", d))

    klass, dtype = ops["klass"].to_numpy(object), ops["dtype"].to_numpy(object)
    with np.errstate(divide="ignore", invalid="ignore"):
        shrink = np.where(np.isfinite(ach) & (ach < time), ach / time, 1.0)
    for c in CLASS_CAUSES:
        sel = klass == c
        cause(f"kernels_{c}", np.where(sel, shrink, 1.0), np.where(sel, time - np.nan_to_num(ach, nan=np.inf), -np.inf))
    fp32 = (klass == "gemm") & (dtype == "fp32")
    if fp32.any():
        tf32 = op_rooflines(ops.assign(dtype=np.where(fp32, "tf32", dtype)), roofs)
        with np.errstate(invalid="ignore", divide="ignore"):
            a32 = np.fmax(tf32["compute_ns"] / compute, tf32["memory_ns"] / memory).to_numpy(np.float64)
            f32 = np.where(fp32 & np.isfinite(a32) & (a32 < time), a32 / time, 1.0)
        cause("fp32_gemm", f32, np.where(fp32, time - np.nan_to_num(a32, nan=np.inf), -np.inf))
    _unfused(graph, ops, pos, owner, memory, out)
    return tuple(out)


def _fusable(ops: pd.DataFrame) -> np.ndarray:
    """Per op: of a :data:`FUSABLE` class, or a copy whose kernel is an elementwise kernel (a dtype cast such as
    ``bfloat16_copy_kernel_cuda`` or a strided ``direct_copy_kernel_cuda``: the fusing compiler folds it into the kernels
    beside it). A memcpy or memset (a copy engine's transfer, no kernel) stays outside every chain."""
    klass = ops["klass"].to_numpy(object)
    code, names = pd.factorize(ops["kernel_name"].astype(str))
    elementwise = np.array([class_of_name(n) == "elementwise" for n in names], bool)  # (once per kernel name)
    cast = (klass == "copy") & elementwise[code] if len(names) else np.zeros(len(ops), bool)
    return np.isin(klass, FUSABLE) | cast


def _other_loop(ops: pd.DataFrame, p: np.ndarray, fusable: np.ndarray) -> np.ndarray:
    """Per graph op (``p`` its row of ``ops``): whether it loops over other tensors than the fusable ops before it
    (:data:`SAME_LOOP_RATIO`). An op's loop is its elements (an elementwise or reduction op's FLOPs, :mod:`..work.formulas`);
    an op more than :data:`SAME_LOOP_RATIO` times smaller than the op before it (a reduction's output, a broadcast row)
    is an epilogue of that loop, and the ops after it are compared with the loop it belongs to, not with it."""
    size = np.where(fusable, ops["flops"].to_numpy(np.float64)[p], np.nan)
    prev = np.r_[np.nan, size[:-1]]
    with np.errstate(invalid="ignore"):
        epilogue = size * SAME_LOOP_RATIO < prev
        at = np.maximum.accumulate(np.where(~epilogue, np.arange(size.size), 0))
        loop = np.r_[np.nan, size[at][:-1]]  # (the loop of the ops before each op)
        lo, hi = np.fmin(size, loop), np.fmax(size, loop)
        return ~epilogue & (hi > lo) & (hi <= SAME_LOOP_RATIO * lo)


def _unfused(graph: RankGraph, ops: pd.DataFrame, pos: np.ndarray, owner: np.ndarray, memory: float,
             out: list[tuple[str, str, np.ndarray]]) -> None:
    """Add the ``unfused`` cause (module docstring): chains of ops of :data:`FUSABLE` classes back to back on a lane."""
    moved = ops["bytes"].to_numpy(np.float64)
    per_byte = ops["memory_ns"].to_numpy(np.float64) / np.maximum(moved, 1)  # (ns per byte at the device's bandwidth)
    p = np.maximum(pos, 0)
    fusable = (pos >= 0) & _fusable(ops)[p] & np.isfinite(per_byte[p]) & (moved[p] > 0)
    k = graph.d.size
    if k < 2 or not fusable.any():
        return
    breaks = ~fusable | np.r_[True, graph.lane[1:] != graph.lane[:-1]] | np.r_[True, ~fusable[:-1]] | _other_loop(ops, p, fusable)
    chain = np.cumsum(breaks)  # (a chain: fusable ops back to back on one lane; an op's kernels stay together)
    c, o = chain[fusable], p[fusable]
    n = int(chain.max()) + 1
    pairs = iv.distinct(c * (len(ops) + 1) + o)
    pc, po = pairs // (len(ops) + 1), pairs % (len(ops) + 1)
    n_ops = np.bincount(pc, minlength=n)
    fused = np.zeros(n)
    np.maximum.at(fused, pc, moved[po] * per_byte[po] / memory)  # (read once, written once: its largest op's bytes)
    time = np.bincount(c, weights=graph.d[fusable].astype(np.float64), minlength=n)
    keep = (n_ops >= 2) & (fused < time)
    if not keep.any():
        return
    factor = np.where(keep, fused / np.maximum(time, 1), 1.0)
    d = np.where(fusable, np.floor(graph.d * factor[chain]), graph.d).astype(np.int64)
    worst = int(np.argmax(np.where(keep, time - fused, -np.inf)))
    names = ops["name"].to_numpy(object)[po[pc == worst]]
    top = f"{int(n_ops[worst])} ops: " + ", ".join(str(x).removeprefix("aten::") for x in names[:4]) + (", ..." if len(names) > 4 else "")
    out.append(("unfused", top, d))


def with_kernel_causes(graph: RankGraph, trace: Trace, roofline: Roofline | None = None) -> RankGraph:
    """``graph`` with its :attr:`.dependency_graph.RankGraph.device_causes` (:func:`kernel_causes`); itself where none."""
    causes = kernel_causes(trace, graph, roofline)
    return replace(graph, device_causes=causes) if causes else graph
