#!/usr/bin/env python3
"""Write SYNTHETIC Kineto (torch.profiler) Chrome traces of any size, for benchmarks and tests.

Nothing written by this script was recorded on a GPU. Every trace it writes says
so in its ``traceName`` (``"synthetic: ..."``), so a stray file can never pass for
a real recording.

The layout copies what ``torch.profiler`` 2.x (Kineto) exports, down to the text
layout (one key group per line, ``ts``/``dur`` in µs with three decimals):

- top level: ``schemaVersion``, ``deviceProperties``, ``distributedInfo``,
  ``cuda_driver_version``/``cuda_runtime_version``/``cupti_version``, ``trace_id``,
  ``displayTimeUnit``, ``baseTimeNanoseconds``, ``traceEvents``, ``traceName``;
- host activity: ``cpu_op`` events, each launching zero or more ``cuda_runtime``
  calls that lie inside it on its thread (``cudaLaunchKernel``,
  ``cudaMemcpyAsync``, ``cudaMemsetAsync``); ``ProfilerStep#N``
  ``user_annotation`` events covering the main thread; ``python_function``
  events (what ``with_stack=True`` adds) fill the rest;
- device activity: ``kernel`` (compute, and NCCL kernels whose name holds
  ``nccl``), ``gpu_memcpy`` (HtoD, DtoH, DtoD, PtoP, named like Kineto) and
  ``gpu_memset``, queued in launch order on each (device, stream): an event starts
  when it is launched and its stream is free, so streams serialise and devices and
  streams overlap as they do on a real GPU;
- ``ac2g`` flow events (``ph: s`` at the runtime call, ``ph: f``/``bp: e`` at the
  device event, ``id`` = correlation) for a share of the launches;
- ``ph: M`` metadata (process/thread names and sort indices), the ``Trace`` span
  and the two ``ph: i`` instants Kineto writes at the end.

``--events`` is the exact length of ``traceEvents``; the shares say how it
splits (see ``plan``). Output is deterministic for a given ``--seed`` (gzip
headers carry no time stamp). Generation is vectorized with numpy and the JSON
is streamed out in chunks, so 10^7 events (about 2.4 GB of JSON) take about 1 GB
of memory; the file is gzipped when its name ends in ``.gz``.

Usage::

    python scripts/synth_trace.py --events 1000000 -o /tmp/synth-1e6.pt.trace.json
    python scripts/synth_trace.py --events 10000 --devices 4 --streams 4 --nccl-share 0.3 -o t.json.gz
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

SYNTHETIC_PREFIX = "synthetic: "

HOST_PID = 4242
"""Process id of the (synthetic) training process; its main thread has the same tid."""

KERNELS = [
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_nn_n_tilesize256x128x64_warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas",
    "nvjet_tst_128x256_64x4_2x1_v_bz_coopA_TNN",
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul>)",
    "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#2}::operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul> >(int, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#2}::operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul>)",
    "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>(int, float, c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16 const*, float*, float*, c10::BFloat16*)",
    "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, c10::BFloat16, float, c10::BFloat16, at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(c10::BFloat16*, c10::BFloat16 const*, int)",
    "void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t, Flash_kernel_traits<128, 128, 64, 4, cutlass::bfloat16_t> >, false, true, false, false, false, true, false, false>(flash::Flash_fwd_params)",
    "void flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Flash_bwd_kernel_traits<128, 64, 128, 8, 2, 4, 2, false, false, cutlass::bfloat16_t, Flash_kernel_traits<128, 64, 128, 8, cutlass::bfloat16_t> >, false, true, false, false, false, true, false>(flash::Flash_bwd_params)",
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::func_wrapper_t<float, at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, float, 4, 4> >(at::native::ReduceOp<float, at::native::func_wrapper_t<float, at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, float, 4, 4>)",
    "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::TensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4, (at::native::ADAM_MODE)1, false>, double, double, double, double, double, double, bool*, float*>(at::native::(anonymous namespace)::TensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4, (at::native::ADAM_MODE)1, false>, double, double, double, double, double, double, bool*, float*)",
    "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#12}::operator()() const::{lambda(float)#1}, std::array<char*, 2ul>, 4, TrivialOffsetCalculator<1, unsigned int>, TrivialOffsetCalculator<1, unsigned int>, at::native::memory::LoadWithCast<1>, at::native::memory::StoreWithCast<1> >(int, at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#12}::operator()() const::{lambda(float)#1}, std::array<char*, 2ul>, TrivialOffsetCalculator<1, unsigned int>, TrivialOffsetCalculator<1, unsigned int>, at::native::memory::LoadWithCast<1>, at::native::memory::StoreWithCast<1>)",
    "void at::native::index_elementwise_kernel<128, 4, at::native::gpu_index_kernel<at::native::index_kernel_impl<at::native::OpaqueType<2> >(at::TensorIteratorBase&, c10::ArrayRef<long>, c10::ArrayRef<long>)::{lambda(char*, char const*, long)#1}>(at::TensorIteratorBase&, c10::ArrayRef<long>, c10::ArrayRef<long>, at::native::index_kernel_impl<at::native::OpaqueType<2> >(at::TensorIteratorBase&, c10::ArrayRef<long>, c10::ArrayRef<long>)::{lambda(char*, char const*, long)#1} const&)::{lambda(int)#1}>(long, at::native::gpu_index_kernel<at::native::index_kernel_impl<at::native::OpaqueType<2> >(at::TensorIteratorBase&, c10::ArrayRef<long>, c10::ArrayRef<long>)::{lambda(char*, char const*, long)#1}>(at::TensorIteratorBase&, c10::ArrayRef<long>, c10::ArrayRef<long>, at::native::index_kernel_impl<at::native::OpaqueType<2> >(at::TensorIteratorBase&, c10::ArrayRef<long>, c10::ArrayRef<long>)::{lambda(char*, char const*, long)#1} const&)::{lambda(int)#1})",
    "triton_poi_fused__to_copy_add_mul_0",
    "triton_red_fused_native_layer_norm_1",
]
NCCL_KERNELS = [
    "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
    "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
    "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
    "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)",
]
# direction, Kineto name, bandwidth in bytes per ns (= GB/s)
MEMCPYS = [
    ("HtoD", "Memcpy HtoD (Pinned -> Device)", 25.0),
    ("HtoD", "Memcpy HtoD (Pageable -> Device)", 10.0),
    ("DtoH", "Memcpy DtoH (Device -> Pinned)", 25.0),
    ("DtoH", "Memcpy DtoH (Device -> Pageable)", 8.0),
    ("DtoD", "Memcpy DtoD (Device -> Device)", 1500.0),
    ("PtoP", "Memcpy PtoP (Device -> Device)", 150.0),
]
MEMCPY_WEIGHTS = [0.30, 0.10, 0.20, 0.10, 0.25, 0.05]
MEMSET = "Memset (Device)"
CPU_OPS_LAUNCHING = ["aten::mm", "aten::addmm", "aten::add", "aten::mul", "aten::copy_", "aten::native_layer_norm",
                     "aten::_softmax", "aten::gelu", "aten::sum", "aten::_foreach_add_", "aten::index",
                     "aten::_flash_attention_forward", "aten::fill_", "aten::zero_", "aten::_to_copy"]
CPU_OPS_PURE = ["aten::empty", "aten::view", "aten::t", "aten::transpose", "aten::as_strided", "aten::reshape",
                "aten::detach", "aten::empty_strided", "aten::resolve_conj", "aten::result_type", "aten::expand",
                "aten::to", "aten::slice", "aten::select", "aten::unsqueeze"]
PY_FUNCS = ["nn.Module: Linear_0", "nn.Module: LayerNorm_1", "nn.Module: GELU_2", "nn.Module: MultiheadAttention_3",
            "torch/nn/modules/module.py(1773): _call_impl", "torch/nn/modules/module.py(1762): _wrapped_call_impl",
            "torch/nn/functional.py(2900): layer_norm", "<built-in method linear of type object at 0x7f0000000000>",
            "torch/optim/adamw.py(220): step", "train.py(88): train_step"]
RUNTIME_BY_KIND = [("cudaLaunchKernel", 211), ("cudaMemcpyAsync", 41), ("cudaMemsetAsync", 51)]

KERNEL, MEMCPY, MEMSET_KIND = 0, 1, 2


@dataclass(frozen=True)
class Config:
    """What to generate. Shares of ``events`` unless said otherwise."""

    events: int = 100_000
    devices: int = 2
    streams: int = 3
    """Streams per device (stream 0 computes, 1 copies, the last one runs NCCL)."""
    threads: int = 2
    """Host threads of the process (the first one, the main thread, runs most ops)."""
    device_share: float = 0.20
    """Device activity: kernel, gpu_memcpy, gpu_memset."""
    memcpy_share: float = 0.10
    """Of the device events, gpu_memcpy."""
    memset_share: float = 0.02
    """Of the device events, gpu_memset."""
    nccl_share: float = 0.10
    """Of the kernels, NCCL communication kernels."""
    cpu_share: float = 0.40
    """Host activity: cuda_runtime (one per device event, at most half of it) and cpu_op."""
    flow_share: float = 0.30
    """ac2g flow events (s/f pairs, one pair per linked launch; at most two per runtime call)."""
    steps: int = 10
    """ProfilerStep#N user_annotation events."""
    rank: int | None = 0
    """distributedInfo.rank; None writes no distributedInfo."""
    world_size: int = 1
    seed: int = 0
    shapes: bool = False
    """Give each cpu_op the args of ``record_shapes=True`` (``Input Dims``, ``Input type``, ``Input Strides``,
    ``Concrete Inputs``), one of :data:`SHAPES` by its index."""


@dataclass(frozen=True)
class Plan:
    """Exact event counts; they add up to ``Config.events``."""

    metadata: int
    steps: int
    kernels: int
    nccl: int
    memcpys: int
    memsets: int
    cpu_ops: int
    runtime: int
    flows: int
    python: int

    @property
    def device(self) -> int:
        return self.kernels + self.memcpys + self.memsets

    @property
    def total(self) -> int:
        return self.metadata + self.steps + self.device + self.cpu_ops + self.runtime + self.flows + self.python


def metadata_count(cfg: Config) -> int:
    """``ph: M`` events, the Trace span and the two instants."""
    return 3 + 3 * cfg.devices + 2 * cfg.devices * cfg.streams + 2 * cfg.threads + 1 + 1 + 2


def plan(cfg: Config) -> Plan:
    """Split ``cfg.events`` into exact counts per kind of event.

    Raises:
        ValueError: shares that do not fit (negative, summing over 1, more flow
            pairs than runtime calls, too few events for the metadata).
    """
    for name in ("device_share", "memcpy_share", "memset_share", "nccl_share", "cpu_share", "flow_share"):
        v = getattr(cfg, name)
        if not 0.0 <= v <= 1.0:
            raise ValueError(f"--{name.replace('_', '-')} must be within [0, 1], not {v}")
    if cfg.devices < 1 or cfg.streams < 1 or cfg.threads < 1:
        raise ValueError("--devices, --streams and --threads must be at least 1")
    if cfg.memcpy_share + cfg.memset_share > 1.0:
        raise ValueError("--memcpy-share + --memset-share must not exceed 1")
    n = cfg.events
    meta = metadata_count(cfg)
    steps = cfg.steps
    dev = round(n * cfg.device_share)
    memcpys = round(dev * cfg.memcpy_share)
    memsets = round(dev * cfg.memset_share)
    kernels = dev - memcpys - memsets
    nccl = round(kernels * cfg.nccl_share)
    host = round(n * cfg.cpu_share)
    runtime = min(dev, host // 2)
    cpu_ops = host - runtime
    flows = 2 * round(n * cfg.flow_share / 2)
    if flows // 2 > runtime:
        raise ValueError(
            f"--flow-share {cfg.flow_share} asks for {flows // 2:,} flow pairs but there are only {runtime:,} "
            "runtime calls to link (raise --device-share and --cpu-share, or lower --flow-share)"
        )
    python = n - (meta + steps + dev + host + flows)
    if python < 0:
        raise ValueError(
            f"{n:,} events cannot hold {meta} metadata, {steps} step, {dev:,} device, {host:,} host and {flows:,} "
            "flow events: lower the shares or --steps, or raise --events"
        )
    p = Plan(meta, steps, kernels, nccl, memcpys, memsets, cpu_ops, runtime, flows, python)
    assert p.total == n
    return p


# --- vectorized timeline --------------------------------------------------------------------


def _lognormal_ns(rng: np.random.Generator, median_ns: float, sigma: float, n: int, lo: int, hi: int) -> np.ndarray:
    return np.clip(rng.lognormal(np.log(median_ns), sigma, n), lo, hi).astype(np.int64)


def _group_first(sorted_keys: np.ndarray) -> np.ndarray:
    """For keys sorted ascending: index of the first element of each element's group."""
    n = sorted_keys.size
    new = np.ones(n, dtype=bool)
    new[1:] = sorted_keys[1:] != sorted_keys[:-1]
    firsts = np.flatnonzero(new)
    return firsts[np.cumsum(new) - 1]


def _exclusive_cumsum_by_group(sorted_keys: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Exclusive running sum of ``values`` within runs of equal ``sorted_keys``."""
    if values.size == 0:
        return values.copy()
    cs = np.cumsum(values)
    excl = cs - values
    return excl - excl[_group_first(sorted_keys)]


def _stream_queue(group: np.ndarray, ready: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """Start times of events queued in ready order on their group (stream); vectorized.

    end_j = max(ready_j, end_{j-1}) + dur_j has the closed form
    end_j = D_j + max_{k<=j}(ready_k - D_{k-1}), D the running sum of durations.
    """
    n = ready.size
    start = np.empty(n, dtype=np.int64)
    if n == 0:
        return start
    order = np.lexsort((ready, group))
    g, r, d = group[order], ready[order], dur[order]
    before = _exclusive_cumsum_by_group(g, d)  # D_{k-1}
    val = r - before
    span = int(val.max() - val.min()) + 1
    lifted = val + g.astype(np.int64) * span  # groups ascend, so one running max serves all
    run = np.maximum.accumulate(lifted) - g.astype(np.int64) * span
    start[order] = before + run
    return start


@dataclass
class Timeline:
    """All events as columns (int64 ns relative to the trace start unless said otherwise)."""

    # host ops
    op_start: np.ndarray
    op_dur: np.ndarray
    op_thread: np.ndarray
    op_name: np.ndarray
    # runtime calls, in time order; runtime i launches device event i
    rt_start: np.ndarray
    rt_dur: np.ndarray
    rt_thread: np.ndarray
    rt_op: np.ndarray
    # device events
    dev_start: np.ndarray
    dev_dur: np.ndarray
    dev_kind: np.ndarray
    dev_name: np.ndarray  # index into KERNELS / NCCL_KERNELS (+len(KERNELS)) / MEMCPYS / 0
    dev_device: np.ndarray
    dev_stream: np.ndarray  # stream id as Kineto writes it
    dev_bytes: np.ndarray
    dev_ext: np.ndarray
    # flows: indices of the linked runtime calls (= device events)
    flow_idx: np.ndarray
    # steps
    step_start: np.ndarray
    step_dur: np.ndarray
    # python_function fill
    py_start: np.ndarray
    py_dur: np.ndarray
    py_thread: np.ndarray
    py_name: np.ndarray
    trace_end: int
    # whole-job mode (scripts/synth_job.py): per device event, its row of the collectives table, -1 for none
    dev_comm: np.ndarray | None = None


def stream_id(device: int | np.ndarray, index: int | np.ndarray) -> Any:
    """Kineto-like stream ids: the compute stream is 7 (+8 per device), side streams 20+."""
    return np.where(np.asarray(index) == 0, 7 + 8 * np.asarray(device), 20 + 16 * np.asarray(device) + 4 * np.asarray(index))


def thread_id(thread: int | np.ndarray) -> Any:
    """Host tids: the main thread's tid is the pid, other threads follow."""
    return HOST_PID + 17 * np.asarray(thread)


def build_timeline(cfg: Config, p: Plan) -> Timeline:
    rng = np.random.default_rng(cfg.seed)
    T = cfg.threads
    # ---- host ops and the runtime calls inside them
    n_op, n_rt = p.cpu_ops, p.runtime
    weights = np.array([0.75] + [0.25 / (T - 1)] * (T - 1)) if T > 1 else np.ones(1)
    op_thread = rng.choice(T, n_op, p=weights).astype(np.int64) if n_op else np.zeros(0, np.int64)
    rt_op = np.sort(rng.integers(0, n_op, n_rt)) if n_rt else np.zeros(0, np.int64)
    k = np.bincount(rt_op, minlength=n_op)
    rt_dur = _lognormal_ns(rng, 4_000, 0.6, n_rt, 800, 2_000_000)
    rt_gap = rng.integers(500, 4_000, n_rt)
    pre = rng.integers(2_000, 15_000, n_op)
    post = rng.integers(1_000, 5_000, n_op)
    pure = _lognormal_ns(rng, 12_000, 1.0, n_op, 500, 5_000_000)
    step_len = rt_dur + rt_gap
    rt_off = _exclusive_cumsum_by_group(rt_op, step_len)
    in_op = np.bincount(rt_op, weights=step_len, minlength=n_op).astype(np.int64) if n_rt else np.zeros(n_op, np.int64)
    op_dur = np.where(k > 0, pre + in_op + post, pure).astype(np.int64)
    op_gap = _lognormal_ns(rng, 3_000, 0.8, n_op, 200, 10_000_000)
    stall = rng.random(n_op) < 0.001  # data loading, host syncs: rare long gaps
    op_gap[stall] += rng.integers(200_000, 2_000_000, int(stall.sum()))
    order = np.argsort(op_thread, kind="stable")
    adv = (op_gap + op_dur)[order]
    start_sorted = _exclusive_cumsum_by_group(op_thread[order], adv) + op_gap[order] + thread_id(op_thread[order]) % 97 * 1_000
    op_start = np.empty(n_op, np.int64)
    op_start[order] = start_sorted
    rt_start = op_start[rt_op] + pre[rt_op] + rt_off if n_rt else np.zeros(0, np.int64)
    rt_order = np.argsort(rt_start, kind="stable")
    rt_start, rt_dur, rt_op = rt_start[rt_order], rt_dur[rt_order], rt_op[rt_order]
    rt_thread = op_thread[rt_op] if n_rt else np.zeros(0, np.int64)
    host_end = int((op_start + op_dur).max()) if n_op else 1_000_000
    op_name_launch = rng.integers(0, len(CPU_OPS_LAUNCHING), n_op)
    op_name_pure = rng.integers(0, len(CPU_OPS_PURE), n_op) + len(CPU_OPS_LAUNCHING)
    op_name = np.where(k > 0, op_name_launch, op_name_pure)

    # ---- device events, launched by runtime calls 0..n_rt-1 in time order
    n_dev = p.device
    kind = np.repeat(np.array([KERNEL, MEMCPY, MEMSET_KIND], dtype=np.int64), [p.kernels, p.memcpys, p.memsets])
    kind = rng.permutation(kind)
    kernel_idx = np.flatnonzero(kind == KERNEL)
    is_nccl = np.zeros(n_dev, dtype=bool)
    is_nccl[rng.choice(kernel_idx, p.nccl, replace=False) if p.nccl else np.zeros(0, np.int64)] = True
    S, D = cfg.streams, cfg.devices
    device = rng.integers(0, D, n_dev)
    sidx = np.where(rng.random(n_dev) < 0.85, 0, rng.integers(0, S, n_dev))
    if S > 1:
        sidx = np.where((kind == MEMCPY) & (rng.random(n_dev) < 0.8), 1, sidx)
        sidx = np.where(is_nccl, S - 1, sidx)
    name = rng.integers(0, len(KERNELS), n_dev)
    name = np.where(is_nccl, len(KERNELS) + rng.integers(0, len(NCCL_KERNELS), n_dev), name)
    cp = rng.choice(len(MEMCPYS), n_dev, p=MEMCPY_WEIGHTS)
    if D == 1:
        cp = np.where(cp == 5, 4, cp)  # no peer copies on one device
    name = np.where(kind == MEMCPY, cp, name)
    name = np.where(kind == MEMSET_KIND, 0, name)
    dur = _lognormal_ns(rng, 8_000, 1.3, n_dev, 1_000, 50_000_000)
    dur = np.where(is_nccl, _lognormal_ns(rng, 150_000, 0.8, n_dev, 5_000, 50_000_000), dur)
    nbytes = np.full(n_dev, -1, dtype=np.int64)
    cbytes = np.left_shift(1, rng.integers(12, 27, n_dev))
    bw = np.array([m[2] for m in MEMCPYS])[cp]
    nbytes = np.where(kind == MEMCPY, cbytes, nbytes)
    dur = np.where(kind == MEMCPY, 1_500 + (cbytes / bw).astype(np.int64), dur)
    sbytes = np.left_shift(1, rng.integers(8, 24, n_dev))
    nbytes = np.where(kind == MEMSET_KIND, sbytes, nbytes)
    dur = np.where(kind == MEMSET_KIND, 1_000 + sbytes // 2_000, dur)
    ready = np.empty(n_dev, np.int64)
    ready[:n_rt] = rt_start + rt_dur // 2 + rng.integers(2_000, 8_000, n_rt)
    ready[n_rt:] = np.sort(rng.integers(0, host_end, n_dev - n_rt))  # launched outside the profiled host ops
    dev_start = _stream_queue(device * S + sidx, ready, dur)
    ext = np.empty(n_dev, np.int64)
    ext[:n_rt] = rt_op + 1
    ext[n_rt:] = 0
    dev_end = int((dev_start + dur).max()) if n_dev else 0

    # ---- flows: pairs for a random subset of the launches
    pairs = p.flows // 2
    flow_idx = np.sort(rng.choice(n_rt, pairs, replace=False)) if pairs else np.zeros(0, np.int64)

    # ---- ProfilerStep annotations cover the main thread's span in equal windows
    main = op_thread == 0
    lo = int(op_start[main].min()) if main.any() else 0
    hi = int((op_start + op_dur)[main].max()) if main.any() else max(host_end, 1)
    edges = np.linspace(lo, hi, p.steps + 1).astype(np.int64) if p.steps else np.zeros(1, np.int64)
    step_start = edges[:-1]
    step_dur = np.maximum(np.diff(edges) - 500, 1)

    # ---- python_function fill
    n_py = p.python
    py_thread = rng.choice(T, n_py, p=weights).astype(np.int64) if n_py else np.zeros(0, np.int64)
    py_start = rng.integers(0, max(host_end, 1), n_py)
    py_dur = _lognormal_ns(rng, 8_000, 1.2, n_py, 100, 10_000_000)
    py_name = rng.integers(0, len(PY_FUNCS), n_py)

    return Timeline(
        op_start=op_start, op_dur=op_dur, op_thread=op_thread, op_name=op_name,
        rt_start=rt_start, rt_dur=rt_dur, rt_thread=rt_thread, rt_op=rt_op,
        dev_start=dev_start, dev_dur=dur, dev_kind=kind, dev_name=name, dev_device=device,
        dev_stream=stream_id(device, sidx).astype(np.int64), dev_bytes=nbytes, dev_ext=ext,
        flow_idx=flow_idx, step_start=step_start, step_dur=step_dur,
        py_start=py_start, py_dur=py_dur, py_thread=py_thread, py_name=py_name,
        trace_end=max(host_end, dev_end),
    )


# --- JSON text ---------------------------------------------------------------------------------

_CPU_OP = (
    '  {\n    "ph": "X", "cat": "cpu_op", "name": "%s", "pid": %d, "tid": %d,\n    "ts": %d.%03d, "dur": %d.%03d,\n'
    '    "args": {\n      "External id": %d,"Record function id": 0, "Sequence number": %d, "Fwd thread id": 0, "Ev Idx": %d\n    }\n  }'
)
SHAPES = [
    f'"Input Dims": [[{m}, 1024], [1024, 4096]], "Input type": ["c10::BFloat16", "c10::BFloat16"], '
    '"Input Strides": [[1024, 1], [4096, 1]], "Concrete Inputs": ["", ""]' for m in (1, 8, 32, 128, 512, 2048, 4096)
] + [
    f'"Input Dims": [[{m}, 4096], [{m}, 4096], []], "Input type": ["float", "float", "Scalar"], '
    '"Input Strides": [[4096, 1], [4096, 1], []], "Concrete Inputs": ["", "", "1"]' for m in (64, 256, 1024)
]
"""The recorded args a ``--shapes`` trace gives its cpu_ops (record_shapes=True's keys; the same few shapes repeat, as
a model's layers do)."""
_SHAPED_OP = _CPU_OP.replace('"Ev Idx": %d\n', '"Ev Idx": %d, %s\n')

_STEP = (
    '  {\n    "ph": "X", "cat": "user_annotation", "name": "ProfilerStep#%d", "pid": %d, "tid": %d,\n'
    '    "ts": %d.%03d, "dur": %d.%03d,\n    "args": {\n      "External id": %d,"Record function id": 0, "Ev Idx": %d\n    }\n  }'
)
_PY = (
    '  {\n    "ph": "X", "cat": "python_function", "name": "%s", "pid": %d, "tid": %d,\n    "ts": %d.%03d, "dur": %d.%03d,\n'
    '    "args": {\n      "Python parent id": %d, "Python id": %d, "Ev Idx": %d\n    }\n  }'
)
_RUNTIME = (
    '  {\n    "ph": "X", "cat": "cuda_runtime", "name": "%s", "pid": %d, "tid": %d,\n    "ts": %d.%03d, "dur": %d.%03d,\n'
    '    "args": {\n      "External id": %d,      "cbid": %d, "correlation": %d\n    }\n  }'
)
_KERNEL = (
    '  {\n    "ph": "X", "cat": "kernel", "name": "%s", "pid": %d, "tid": %d,\n    "ts": %d.%03d, "dur": %d.%03d,\n'
    '    "args": {\n      "External id": %d,      "queued": 0, "device": %d, "context": 1,      "stream": %d, "correlation": %d,'
    '      "registers per thread": %d,      "shared memory": %d,      "blocks per SM": %d.%06d,      "warps per SM": %d.%06d,'
    '      "grid": [%d, %d, 1],      "block": [%d, 1, 1],      "est. achieved occupancy %%": %d\n    }\n  }'
)
_MEMCPY = (
    '  {\n    "ph": "X", "cat": "gpu_memcpy", "name": "%s", "pid": %d, "tid": %d,\n    "ts": %d.%03d, "dur": %d.%03d,\n'
    '    "args": {\n      "External id": %d,      "device": %d, "context": 1,      "stream": %d, "correlation": %d,'
    '      "bytes": %d, "memory bandwidth (GB/s)": %d.%06d\n    }\n  }'
)
_MEMSET = (
    '  {\n    "ph": "X", "cat": "gpu_memset", "name": "%s", "pid": %d, "tid": %d,\n    "ts": %d.%03d, "dur": %d.%03d,\n'
    '    "args": {\n      "External id": %d,      "device": %d, "context": 1,      "stream": %d, "correlation": %d,'
    '      "bytes": %d, "memory bandwidth (GB/s)": %d.%06d\n    }\n  }'
)
_FLOW_S = '  {\n    "ph": "s", "id": %d, "pid": %d, "tid": %d, "ts": %d.%03d,\n    "cat": "ac2g", "name": "ac2g"\n  }'
_FLOW_F = '  {\n    "ph": "f", "id": %d, "pid": %d, "tid": %d, "ts": %d.%03d,\n    "cat": "ac2g", "name": "ac2g", "bp": "e"\n  }'

CORR0 = 100_000
"""Correlation id of runtime call / device event 0."""


class _Writer:
    """Formats events chunk by chunk; holds only one chunk of text at a time."""

    def __init__(self, cfg: Config, tl: Timeline, t0_ns: int, collectives: list[str] | None = None) -> None:
        self.cfg, self.tl, self.t0 = cfg, tl, t0_ns
        self.collectives = collectives  # the Kineto args of each collective, as JSON text ('"Collective name": ...')
        self.op_names = np.array(CPU_OPS_LAUNCHING + CPU_OPS_PURE, dtype=object)
        self.dev_names = np.array(KERNELS + NCCL_KERNELS, dtype=object)
        self.cp_names = np.array([m[1] for m in MEMCPYS], dtype=object)
        self.py_names = np.array(PY_FUNCS, dtype=object)
        self.rt_names = np.array([r[0] for r in RUNTIME_BY_KIND], dtype=object)
        self.rt_cbid = np.array([r[1] for r in RUNTIME_BY_KIND], dtype=np.int64)

    def _ts(self, rel: np.ndarray) -> tuple[list, list]:
        a = rel + self.t0
        return (a // 1000).tolist(), (a % 1000).tolist()

    @staticmethod
    def _dur(d: np.ndarray) -> tuple[list, list]:
        return (d // 1000).tolist(), (d % 1000).tolist()

    def cpu_ops(self, i: np.ndarray) -> list[str]:
        tl = self.tl
        ts, tf = self._ts(tl.op_start[i])
        dw, df = self._dur(tl.op_dur[i])
        tid = thread_id(tl.op_thread[i]).tolist()
        cols = (self.op_names[tl.op_name[i]].tolist(), [HOST_PID] * len(i), tid, ts, tf, dw, df,
                (i + 1).tolist(), (i % 9973).tolist(), i.tolist())
        if self.cfg.shapes:
            return [_SHAPED_OP % t for t in zip(*cols, (SHAPES[k % len(SHAPES)] for k in i.tolist()))]
        return [_CPU_OP % t for t in zip(*cols)]

    def steps(self, i: np.ndarray) -> list[str]:
        tl = self.tl
        ts, tf = self._ts(tl.step_start[i])
        dw, df = self._dur(tl.step_dur[i])
        n = len(i)
        cols = ((i + 1).tolist(), [HOST_PID] * n, [int(thread_id(0))] * n, ts, tf, dw, df,
                (i + 10_000_000).tolist(), i.tolist())
        return [_STEP % t for t in zip(*cols)]

    def python(self, i: np.ndarray) -> list[str]:
        tl = self.tl
        ts, tf = self._ts(tl.py_start[i])
        dw, df = self._dur(tl.py_dur[i])
        cols = (self.py_names[tl.py_name[i]].tolist(), [HOST_PID] * len(i), thread_id(tl.py_thread[i]).tolist(),
                ts, tf, dw, df, i.tolist(), (i + 1).tolist(), i.tolist())
        return [_PY % t for t in zip(*cols)]

    def runtime(self, i: np.ndarray) -> list[str]:
        tl = self.tl
        ts, tf = self._ts(tl.rt_start[i])
        dw, df = self._dur(tl.rt_dur[i])
        kind = tl.dev_kind[i]
        cols = (self.rt_names[kind].tolist(), [HOST_PID] * len(i), thread_id(tl.rt_thread[i]).tolist(), ts, tf, dw, df,
                (tl.rt_op[i] + 1).tolist(), self.rt_cbid[kind].tolist(), (i + CORR0).tolist())
        return [_RUNTIME % t for t in zip(*cols)]

    def device(self, i: np.ndarray) -> list[str]:
        tl = self.tl
        out = np.empty(len(i), dtype=object)
        kind = tl.dev_kind[i]
        for k in (KERNEL, MEMCPY, MEMSET_KIND):
            sel = kind == k
            if not sel.any():
                continue
            j = i[sel]
            ts, tf = self._ts(tl.dev_start[j])
            dw, df = self._dur(tl.dev_dur[j])
            dev, stream = tl.dev_device[j].tolist(), tl.dev_stream[j].tolist()
            common = (dev, stream, ts, tf, dw, df, tl.dev_ext[j].tolist(), dev, stream, (j + CORR0).tolist())
            if k == KERNEL:
                names = self.dev_names[tl.dev_name[j]].tolist()
                h = (j * 2654435761) % 1000003  # cheap deterministic "launch configuration"
                grid = (h % 4096 + 1)
                bpsm = grid * 1_000_000 // 132
                cols = (names,) + common + ((h % 200 + 32).tolist(), ((h % 8) * 8192).tolist(),
                                            (bpsm // 1_000_000).tolist(), (bpsm % 1_000_000).tolist(),
                                            (bpsm * 4 // 1_000_000).tolist(), (bpsm * 4 % 1_000_000).tolist(),
                                            grid.tolist(), (h % 8 + 1).tolist(), (128 * (h % 4 + 1)).tolist(),
                                            (h % 100).tolist())
                texts = [_KERNEL % t for t in zip(*cols)]
                if self.collectives is not None and tl.dev_comm is not None:
                    comm = tl.dev_comm[j].tolist()
                    texts = [t if c < 0 else f"{t[:-10]},      {self.collectives[c]}{t[-10:]}" for t, c in zip(texts, comm)]
                out[sel] = texts
            else:
                b = tl.dev_bytes[j]
                bw = b * 1_000_000 // np.maximum(tl.dev_dur[j], 1)  # bytes/ns = GB/s, 6 decimals
                names = self.cp_names[tl.dev_name[j]].tolist() if k == MEMCPY else [MEMSET] * len(j)
                cols = (names,) + common + (b.tolist(), (bw // 1_000_000).tolist(), (bw % 1_000_000).tolist())
                out[sel] = [(_MEMCPY if k == MEMCPY else _MEMSET) % t for t in zip(*cols)]
        return out.tolist()

    def flows_s(self, f: np.ndarray) -> list[str]:
        tl = self.tl
        i = tl.flow_idx[f]
        ts, tf = self._ts(tl.rt_start[i])
        cols = ((i + CORR0).tolist(), [HOST_PID] * len(i), thread_id(tl.rt_thread[i]).tolist(), ts, tf)
        return [_FLOW_S % t for t in zip(*cols)]

    def flows_f(self, f: np.ndarray) -> list[str]:
        tl = self.tl
        i = tl.flow_idx[f]
        ts, tf = self._ts(tl.dev_start[i])
        cols = ((i + CORR0).tolist(), tl.dev_device[i].tolist(), tl.dev_stream[i].tolist(), ts, tf)
        return [_FLOW_F % t for t in zip(*cols)]

    def metadata(self) -> list[str]:
        cfg, t0 = self.cfg, self.t0
        ts = f"{t0 // 1000}.{t0 % 1000:03d}"
        out = []

        def m(name: str, pid: Any, tid: Any, args: str) -> None:
            out.append(f'  {{\n    "name": "{name}", "ph": "M", "ts": {ts}, "pid": {json.dumps(pid)}, "tid": {json.dumps(tid)},\n'
                       f'    "args": {{\n      {args}\n    }}\n  }}')

        m("process_name", HOST_PID, 0, '"name": "python3"')
        m("process_labels", HOST_PID, 0, '"labels": "CPU"')
        m("process_sort_index", HOST_PID, 0, f'"sort_index": {HOST_PID}')
        for d in range(cfg.devices):
            m("process_name", d, 0, '"name": "python3"')
            m("process_labels", d, 0, f'"labels": "GPU {d}"')
            m("process_sort_index", d, 0, f'"sort_index": {5000000 + d}')
        for d in range(cfg.devices):
            for s in range(cfg.streams):
                sid = int(stream_id(d, s))
                m("thread_name", d, sid, f'"name": "stream {sid} "')
                m("thread_sort_index", d, sid, f'"sort_index": {sid}')
        for t in range(cfg.threads):
            tid = int(thread_id(t))
            m("thread_name", HOST_PID, tid, f'"name": "thread {tid} (python3)"')
            m("thread_sort_index", HOST_PID, tid, f'"sort_index": {tid}')
        end = self.tl.trace_end + 50_000
        out.append(f'  {{\n    "ph": "X", "cat": "Trace", "ts": {ts}, "dur": {end // 1000}.{end % 1000:03d},\n'
                   f'    "pid": "Spans", "tid": "PyTorch Profiler",\n    "name": "PyTorch Profiler (0)",\n'
                   f'    "args": {{\n      "Op count": 0\n    }}\n  }}')
        m("process_sort_index", "Spans", 0, '"sort_index": 536870912')
        out.append(f'  {{\n    "name": "Iteration Start: PyTorch Profiler", "ph": "i", "s": "g",\n'
                   f'    "pid": "Traces", "tid": "Trace PyTorch Profiler", "ts": {ts}\n  }}')
        e = t0 + end
        out.append(f'  {{\n    "name": "Record Window End", "ph": "i", "s": "g",\n'
                   f'    "pid": "", "tid": "", "ts": {e // 1000}.{e % 1000:03d}\n  }}')
        return out


def _blocks(w: _Writer, chunk: int) -> Iterator[list[str]]:
    """Event text in Kineto's order: CPU-side ops, then CUPTI activity with its flows, then metadata.

    Within the first two blocks events are in time order; each block is sorted
    once (numpy) and then formatted ``chunk`` events at a time.
    """
    tl = w.tl
    # block 1: cpu_op, ProfilerStep annotations, python_function (parents before children)
    for block in (
        [(tl.op_start, tl.op_dur, w.cpu_ops), (tl.step_start, tl.step_dur, w.steps), (tl.py_start, tl.py_dur, w.python)],
        [(tl.rt_start, None, w.runtime), (tl.rt_start[tl.flow_idx], None, w.flows_s),
         (tl.dev_start, None, w.device), (tl.dev_start[tl.flow_idx], None, w.flows_f)],
    ):
        ts = np.concatenate([b[0] for b in block])
        neg_dur = np.concatenate([-(b[1]) if b[1] is not None else np.zeros(len(b[0]), np.int64) for b in block])
        src = np.concatenate([np.full(len(b[0]), j, dtype=np.int8) for j, b in enumerate(block)])
        idx = np.concatenate([np.arange(len(b[0]), dtype=np.int64) for b in block])
        order = np.lexsort((src, neg_dur, ts))
        del ts, neg_dur
        for c in range(0, order.size, chunk):
            o = order[c : c + chunk]
            s, i = src[o], idx[o]
            out = np.empty(o.size, dtype=object)
            for j, b in enumerate(block):
                sel = s == j
                if sel.any():
                    out[sel] = b[2](i[sel])
            yield out.tolist()
    yield w.metadata()


def _header(cfg: Config, t0_ns: int, trace_id: str, pg_config: list[dict] | None = None) -> str:
    props = [
        {"id": d, "name": "SYNTHETIC H100", "totalGlobalMem": 85520809984, "computeMajor": 9, "computeMinor": 0,
         "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048, "regsPerBlock": 65536, "warpSize": 32,
         "sharedMemPerBlock": 49152, "numSms": 132, "regsPerMultiprocessor": 65536, "sharedMemPerBlockOptin": 232448,
         "sharedMemPerMultiprocessor": 233472}
        for d in range(cfg.devices)
    ]
    parts = ['{\n  "schemaVersion": 1,\n  "deviceProperties": [\n']
    parts.append(",\n".join("    " + json.dumps(p) for p in props))
    parts.append("\n  ],\n")
    if cfg.rank is not None:
        info = {"backend": "nccl", "rank": cfg.rank, "world_size": cfg.world_size, "pg_count": 1,
                "pg_config": pg_config or [{"pg_name": "0", "pg_desc": "default_pg", "backend_config": "cuda:nccl",
                                            "pg_size": cfg.world_size, "ranks": list(range(cfg.world_size))}],
                "nccl_version": "2.27.3"}
        parts.append(f'  "distributedInfo": {json.dumps(info)},\n')
    parts.append(f'  "trace_id": "{trace_id}",\n  "cuda_driver_version": 13000,\n  "cuda_runtime_version": 13000,\n'
                 f'  "cupti_version": 130001,\n  "displayTimeUnit": "ms",\n  "baseTimeNanoseconds": 1790000000000000000,\n'
                 '  "traceEvents": [\n')
    return "".join(parts)


def trace_name(cfg: Config) -> str:
    c = asdict(cfg)
    return SYNTHETIC_PREFIX + "traceprobe scripts/synth_trace.py " + " ".join(f"{k}={v}" for k, v in c.items())


def write(cfg: Config, path: str | Path, chunk: int = 50_000, gzip_level: int = 1, *, timeline: Timeline | None = None,
          t0_ns: int | None = None, collectives: list[str] | None = None, pg_config: list[dict] | None = None) -> Plan:
    """Write the trace described by ``cfg`` to ``path`` (gzipped when it ends in ``.gz``).

    ``timeline`` (default: ``build_timeline(cfg, plan(cfg))``), ``t0_ns`` (the trace
    clock's origin), ``collectives`` (args text per row of ``timeline.dev_comm``) and
    ``pg_config`` (``distributedInfo.pg_config``) let ``scripts/synth_job.py`` write
    the ranks of one job on one clock with matching collectives.

    Returns:
        the :class:`Plan` (exact counts per kind) of what was written.
    """
    p = plan(cfg)
    tl = timeline if timeline is not None else build_timeline(cfg, p)
    rng = np.random.default_rng([cfg.seed, 1])
    t0 = int(rng.integers(1_000_000_000_000_000, 5_000_000_000_000_000))  # Kineto-like clock, ~12-58 days
    t0_ns = t0 if t0_ns is None else t0_ns
    trace_id = "".join(f"{x:02X}" for x in rng.integers(0, 256, 16))
    w = _Writer(cfg, tl, t0_ns, collectives)
    path = Path(path)
    with open(path, "wb") as raw:
        out: BinaryIO
        gz = gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=gzip_level, mtime=0) if path.name.endswith(".gz") else None
        out = gz if gz is not None else raw
        buf = io.BufferedWriter(out, buffer_size=1 << 22) if gz is not None else out  # type: ignore[arg-type]
        buf.write(_header(cfg, t0_ns, trace_id, pg_config).encode())
        first = True
        for texts in _blocks(w, chunk):
            if not texts:
                continue
            if not first:
                buf.write(b",\n")
            buf.write(",\n".join(texts).encode())
            first = False
        buf.write(f'\n  ],\n  "traceName": {json.dumps(trace_name(cfg))}\n}}\n'.encode())
        if gz is not None:
            buf.flush()
            gz.close()
    return p


def _parse_size(s: str) -> int:
    """10000, 1e6, 10^7, 100k, 2M."""
    t = s.strip().lower().replace("_", "").replace(",", "")
    mult = {"k": 10**3, "m": 10**6, "g": 10**9}.get(t[-1:], 1)
    if mult != 1:
        t = t[:-1]
    if "^" in t:
        b, e = t.split("^")
        return int(b) ** int(e) * mult
    return int(float(t) * mult)


def main(argv: list[str] | None = None) -> int:
    d = Config()
    ap = argparse.ArgumentParser(
        description="Write a SYNTHETIC Kineto-style Chrome trace (torch.profiler layout) with an exact number of events. "
                    "Every trace written is labelled 'synthetic: ...' in its traceName.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    ap.add_argument("-o", "--output", required=True, help="output file; gzipped when it ends in .gz")
    ap.add_argument("-n", "--events", type=_parse_size, default=d.events, help="length of traceEvents (10000, 1e6, 10^7, 2M)")
    ap.add_argument("--devices", type=int, default=d.devices, help="GPUs")
    ap.add_argument("--streams", type=int, default=d.streams, help="streams per GPU (0: compute, 1: copies, last: NCCL)")
    ap.add_argument("--threads", type=int, default=d.threads, help="host threads")
    ap.add_argument("--device-share", type=float, default=d.device_share, help="share of events that are kernels, memcpys, memsets")
    ap.add_argument("--memcpy-share", type=float, default=d.memcpy_share, help="share of device events that are gpu_memcpy")
    ap.add_argument("--memset-share", type=float, default=d.memset_share, help="share of device events that are gpu_memset")
    ap.add_argument("--nccl-share", type=float, default=d.nccl_share, help="share of kernels that are NCCL kernels")
    ap.add_argument("--cpu-share", type=float, default=d.cpu_share, help="share of events that are host activity (cpu_op, cuda_runtime)")
    ap.add_argument("--flow-share", type=float, default=d.flow_share, help="share of events that are ac2g flow events")
    ap.add_argument("--steps", type=int, default=d.steps, help="ProfilerStep#N annotations")
    ap.add_argument("--rank", type=int, default=d.rank, help="distributedInfo.rank (-1: no distributedInfo)")
    ap.add_argument("--world-size", type=int, default=d.world_size, help="distributedInfo.world_size")
    ap.add_argument("--seed", type=int, default=d.seed, help="random seed (same seed, same bytes)")
    ap.add_argument("--shapes", action="store_true", help="give each cpu_op record_shapes=True's args (Input Dims, ...)")
    ap.add_argument("--chunk", type=int, default=50_000, help="events formatted per chunk of output")
    ap.add_argument("--gzip-level", type=int, default=1, help="gzip compression level for .gz output")
    ap.add_argument("-q", "--quiet", action="store_true", help="print nothing")
    ap.add_argument("--ranks", type=int, default=0,
                    help="write a whole job instead: this many rank traces into the folder -o, with matching collectives "
                         "(see scripts/synth_job.py)")
    ap.add_argument("--skewed", type=int, default=1, help="--ranks: ranks that arrive late at every collective")
    ap.add_argument("--skew-us", type=float, default=500.0, help="--ranks: mean late arrival of the skewed ranks, µs")
    a = ap.parse_args(argv)
    cfg = Config(
        events=a.events, devices=a.devices, streams=a.streams, threads=a.threads, device_share=a.device_share,
        memcpy_share=a.memcpy_share, memset_share=a.memset_share, nccl_share=a.nccl_share, cpu_share=a.cpu_share,
        flow_share=a.flow_share, steps=a.steps, rank=None if a.rank is not None and a.rank < 0 else a.rank,
        world_size=a.world_size, seed=a.seed, shapes=a.shapes,
    )
    t = time.perf_counter()
    if a.ranks:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import synth_job

        try:
            paths = synth_job.write_job(cfg, a.ranks, a.output, skewed=a.skewed, skew_ns=int(a.skew_us * 1000),
                                        gz=True, gzip_level=a.gzip_level)
        except ValueError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        if not a.quiet:
            print(f"wrote {len(paths)} rank traces of {a.events:,} events into {a.output} in {time.perf_counter() - t:.1f} s",
                  file=sys.stderr)
        return 0
    try:
        p = write(cfg, a.output, chunk=a.chunk, gzip_level=a.gzip_level)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if not a.quiet:
        size = Path(a.output).stat().st_size
        print(f"wrote {a.output}: {p.total:,} events ({p.device:,} device: {p.kernels:,} kernels of which {p.nccl:,} NCCL, "
              f"{p.memcpys:,} memcpy, {p.memsets:,} memset; {p.cpu_ops:,} cpu_op, {p.runtime:,} cuda_runtime, "
              f"{p.flows:,} flow, {p.steps} steps, {p.python:,} python_function, {p.metadata} metadata), "
              f"{size / 1e6:,.1f} MB in {time.perf_counter() - t:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
