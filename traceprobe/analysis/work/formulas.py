"""FLOPs and bytes moved of each op family, as vectorised functions over the parsed shape columns of :mod:`.op_models`.

One formula per family, each with its source; every one agrees with TraceLens's perf model
(AMD-AGI/TraceLens, ``TraceLens/PerfModel/perf_model.py``) where both model the op, and says where it does not.
Every argument is an int64 (or bool) array, one entry per distinct (op name, recorded args); the result is int64
(FLOPs, bytes). Bytes are the least a kernel must move through device memory (each input read once, each output
written once): the roofline's memory term, not a measurement.
"""

from __future__ import annotations

import numpy as np

I64 = np.int64


def gemm(b: np.ndarray, m: np.ndarray, n: np.ndarray, k: np.ndarray, bias: np.ndarray, bpe: np.ndarray,
         bpe_out: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A batch of ``b`` GEMMs ``(m x k) @ (k x n)`` (+ a bias): FLOPs ``b (2mnk + mn·bias)``, bytes ``b (mk·bpe + kn·bpe
    + mn·bpe_out + n·bias·bpe)``.

    The bias is taken as one row of ``n`` (TraceLens's ``GEMM.flops_func`` / ``bytes_func``, which ``aten_mm``,
    ``aten_addmm``, ``aten_bmm``, ``aten_baddbmm`` and ``aten_scaled_mm`` share; ``baddbmm``'s bias too, as there).
    """
    flops = b * (2 * m * n * k + np.where(bias, m * n, 0))
    moved = b * (m * k * bpe + k * n * bpe + m * n * bpe_out + np.where(bias, n * bpe, 0))
    return flops.astype(I64), moved.astype(I64)


def gemm_backward(b: np.ndarray, m: np.ndarray, n: np.ndarray, k: np.ndarray, bias: np.ndarray,
                  bpe: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The backward of :func:`gemm` (``C = A B (+ bias)``): ``dA = dC Bᵀ`` and ``dB = Aᵀ dC``, ``2mnk`` FLOPs each,
    and the bias gradient (a sum of ``dC``, ``mn``): FLOPs ``b (4mnk + mn·bias)``, twice the forward's GEMM. Bytes:
    each gradient GEMM reads two of (A, B, dC) and writes the third, ``2b (mk + kn + mn)·bpe``, and the bias gradient
    ``b·mn`` (counted in elements, as TraceLens counts it).

    Source: TraceLens's ``GEMM.flops_bwd`` / ``bytes_bwd`` (input and weight gradients as two GEMMs of
    ``GEMM.flops_func`` / ``bytes_func``).
    """
    flops = b * (4 * m * n * k + np.where(bias, m * n, 0))
    moved = b * (2 * (m * k + k * n + m * n) * bpe + np.where(bias, m * n, 0))
    return flops.astype(I64), moved.astype(I64)


def attention(b: np.ndarray, n_q: np.ndarray, h_q: np.ndarray, n_kv: np.ndarray, h_kv: np.ndarray, d_qk: np.ndarray,
              d_v: np.ndarray, causal: np.ndarray, bpe: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Scaled dot-product attention, forward: FLOPs ``b·h_q (2 n_q n_kv d_qk + 2 n_q n_kv d_v)``, halved where causal
    (and ``n_q == n_kv``); the softmax's FLOPs left out. Bytes: Q, K, V read and O written once (flash attention's
    IO), ``(b n_q h_q d_qk + b n_kv h_kv (d_qk + d_v) + b n_q h_q d_v) · bpe``.

    Source: Dao et al.'s ``benchmark_flash_attention.py`` as TraceLens's ``SDPA.flops_func`` / ``bytes_func`` has it;
    TraceLens takes 2 bytes per element whatever the dtype, here the recorded dtype's size (the same for bf16/fp16).
    """
    flops = b * h_q * (2 * n_q * n_kv * d_qk + 2 * n_q * n_kv * d_v)
    flops = np.where(causal & (n_q == n_kv), flops // 2, flops)
    moved = (b * n_q * h_q * d_qk + b * n_kv * h_kv * d_qk + b * n_kv * h_kv * d_v + b * n_q * h_q * d_v) * bpe
    return flops.astype(I64), moved.astype(I64)


def attention_backward(b: np.ndarray, n_q: np.ndarray, h_q: np.ndarray, n_kv: np.ndarray, h_kv: np.ndarray,
                       d_qk: np.ndarray, d_v: np.ndarray, causal: np.ndarray, recompute: np.ndarray,
                       bpe: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Scaled dot-product attention, backward: the four GEMMs of dV, dP, dQ, dK (``2 n_q n_kv d`` each per head),
    with the GQA reductions, plus QKᵀ again where the kernel recomputes it (flash); halved where causal. Bytes: Q,
    K, V, dO read and dQ, dK, dV written once.

    Without recomputation (SDPA's math backend keeps the probabilities) that is twice the forward's FLOPs where
    ``d_qk == d_v``; with it 2.5 times (FlashAttention-2, Dao 2023, and its ``benchmark_flash_attention.py``:
    backward FLOPs ``2.5 x`` the forward's).

    Source: TraceLens's ``SDPA.flops_bwd_func`` / ``bytes_bwd_func`` (its ``flash_impl`` is ``recompute``).
    """
    gqa = np.maximum(h_q // np.maximum(h_kv, 1) - 1, 0)
    flops = (np.where(recompute, b * h_q * 2 * n_q * n_kv * d_qk, 0)
             + b * h_q * 2 * n_kv * n_q * d_v + b * n_kv * d_v * gqa
             + b * h_q * 2 * n_q * n_kv * d_v
             + b * h_q * 2 * n_q * n_kv * d_qk
             + b * h_q * 2 * n_kv * n_q * d_qk + b * n_kv * d_qk * gqa)
    flops = np.where(causal & (n_q == n_kv), flops // 2, flops)
    q, kv = b * n_q * h_q, b * n_kv * h_kv
    moved = (q * d_qk + kv * d_qk + kv * d_v + q * d_v + q * d_qk + kv * d_qk + kv * d_v) * bpe
    return flops.astype(I64), moved.astype(I64)


def convolution(x: np.ndarray, w: np.ndarray, out: np.ndarray, w_inner: np.ndarray, c_out: np.ndarray,
                transposed: np.ndarray, bias: np.ndarray, bpe: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A convolution, forward, from its element counts (input ``x``, weight ``w``, output ``out``; ``w_inner`` the
    weight's elements per output channel, ``prod(w[1:])``, which counts groups): FLOPs ``2 w_inner · out`` (``· x``
    where transposed) ``+ out·bias``; bytes ``(x + w + c_out·bias + out) · bpe``.

    Source: ``torch/utils/flop_counter.py``'s ``conv_flop_count``, as TraceLens's ``CONV.flops_func`` / ``bytes_func``.
    """
    flops = 2 * w_inner * np.where(transposed, x, out) + np.where(bias, out, 0)
    moved = (x + w + np.where(bias, c_out, 0) + out) * bpe
    return flops.astype(I64), moved.astype(I64)


def convolution_backward(x: np.ndarray, w: np.ndarray, out: np.ndarray, w_inner: np.ndarray, c_in: np.ndarray,
                         c_out: np.ndarray, transposed: np.ndarray, bias: np.ndarray,
                         bpe: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A convolution, backward: the input gradient (the forward's FLOPs with input and output swapped), the weight
    gradient (``2 w · out / c_out``; ``2 w · x / c_in`` where transposed) and the bias gradient (``out``). Bytes: each
    of the two gradients reads two of (x, w, dy) and writes the third, ``2 (x + w + out) · bpe``; the bias gradient
    adds ``out + c_out`` (counted in elements, as TraceLens's ``CONV.bytes_bwd_func`` counts it).

    Source: TraceLens's ``CONV.flops_bwd_func`` / ``bytes_bwd_func``, after ``torch/utils/flop_counter.py``.
    """
    flops = (2 * w_inner * np.where(transposed, x, out) + 2 * w * np.where(transposed, x // np.maximum(c_in, 1),
                                                                          out // np.maximum(c_out, 1))
             + np.where(bias, out, 0))
    moved = 2 * (x + w + out) * bpe + np.where(bias, out + c_out, 0)
    return flops.astype(I64), moved.astype(I64)


def unary(n: np.ndarray, bpe_in: np.ndarray, bpe_out: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """An elementwise op of one tensor (a cast, an activation, a copy): FLOPs ``n``, bytes ``n·bpe_in + n·bpe_out``.

    Source: TraceLens's ``UnaryElementwise`` (``flops_func``, ``bytes_func``)."""
    return n.astype(I64), (n * bpe_in + n * bpe_out).astype(I64)


def binary(n1: np.ndarray, n2: np.ndarray, n_out: np.ndarray, bpe1: np.ndarray, bpe2: np.ndarray,
           bpe_out: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """An elementwise op of two operands (``add``, ``mul``, ...; a scalar operand counts one element): FLOPs
    ``n_out`` (the broadcast shape's elements), bytes ``n1·bpe1 + n2·bpe2 + n_out·bpe_out``.

    Source: TraceLens's ``BinaryElementwise`` (``flops_func``, ``bytes_func``)."""
    return n_out.astype(I64), (n1 * bpe1 + n2 * bpe2 + n_out * bpe_out).astype(I64)


def streamed(n_in: np.ndarray, bytes_in: np.ndarray, bytes_out: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A norm, reduction, softmax or embedding: FLOPs ``n_in`` (one per input element: these are bound by memory, the
    FLOPs only place them on the roofline), bytes its tensor inputs read once and its output written once."""
    return n_in.astype(I64), (bytes_in + bytes_out).astype(I64)
