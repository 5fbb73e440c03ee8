"""Which host ops have a model of their work, and their parameters read from the recorded shapes.

:data:`OP_FAMILY` maps an op name to its family (``gemm``, ``attention``, ``attention_backward``, ``convolution``,
``convolution_backward``, ``unary``, ``binary``, ``streamed``); :func:`op_parameters` reads each distinct (op name,
recorded args) pair of a trace once (``Input Dims``, ``Input type``, ``Concrete Inputs``, as TraceLens's
``get_param_details`` reads them) into columns for :mod:`.formulas`. ``aten::linear`` and ``aten::matmul`` are not
modelled: they call ``mm``/``addmm``/``bmm``, which are (as in TraceLens), and the public
``aten::scaled_dot_product_attention`` calls a backend's op (flash, efficient, cuDNN) or, in the math backend, GEMMs
and a softmax.
"""

from __future__ import annotations

import re
from functools import lru_cache
from math import prod
from typing import Any

import msgspec
import numpy as np
import pandas as pd

from . import formulas

_GEMMS = {"aten::mm": (0, 1, False, False), "aten::addmm": (1, 2, True, False), "aten::bmm": (0, 1, False, True),
          "aten::baddbmm": (1, 2, True, True), "aten::_scaled_mm": (0, 1, None, False)}
"""GEMM op -> (index of A, index of B, bias (None: three args recorded), batched), as TraceLens's ``aten_*`` GEMM classes."""
_ATTENTION = {"aten::_scaled_dot_product_flash_attention": (0, 4, False, True),
              "aten::_scaled_dot_product_efficient_attention": (0, 6, False, False),
              "aten::_scaled_dot_product_cudnn_attention": (0, 6, False, False),
              "aten::_scaled_dot_product_attention_math": (0, 5, False, False),
              "aten::_scaled_dot_product_flash_attention_backward": (1, 11, True, True),
              "aten::_scaled_dot_product_efficient_attention_backward": (1, 11, True, False),
              "aten::_scaled_dot_product_cudnn_attention_backward": (1, 14, True, False)}
"""Attention op -> (index of Q; K and V follow), index of ``is_causal`` in ``Concrete Inputs``, backward, recomputes
QKᵀ (flash)): the ops' schemas in ``aten/src/ATen/native/native_functions.yaml``. The math backend's op is modelled as
the attention it computes (its GEMMs, softmax and casts are its kernels): what flash attention would do of it."""
_UNARY = ("copy_", "silu", "gelu", "relu", "sigmoid", "tanh", "neg", "rsqrt", "sqrt", "exp", "log", "pow", "abs",
          "clamp", "clamp_min", "clamp_max", "fill_", "zero_", "cos", "sin", "reciprocal", "erf",
          "silu_backward", "gelu_backward", "threshold_backward", "sigmoid_backward", "tanh_backward")
_BINARY = ("add", "sub", "mul", "div", "maximum", "minimum", "where", "eq", "ne", "lt", "gt", "le", "ge", "masked_fill",
           "addcmul", "addcdiv", "lerp")
_STREAMED = ("layer_norm", "native_layer_norm", "native_layer_norm_backward", "group_norm", "native_group_norm",
             "batch_norm", "native_batch_norm", "cudnn_batch_norm", "rms_norm", "_fused_rms_norm", "sum", "mean", "max",
             "min", "amax", "norm", "linalg_vector_norm", "softmax", "_softmax", "log_softmax", "_log_softmax",
             "_softmax_backward_data", "embedding", "embedding_dense_backward", "argmax", "topk",
             "cumsum", "var_mean", "std", "var", "cross_entropy_loss", "nll_loss_forward", "nll_loss_backward")
_STREAMED_CLASS = {"embedding": "other", "embedding_dense_backward": "other", "cat": "copy"}

OP_FAMILY: dict[str, str] = {
    **dict.fromkeys(_GEMMS, "gemm"),
    **{k: "attention_backward" if v[2] else "attention" for k, v in _ATTENTION.items()},
    "aten::convolution": "convolution", "aten::convolution_backward": "convolution_backward",
    **{f"aten::{n}": "unary" for n in _UNARY}, **{f"aten::{n}_": "unary" for n in _UNARY if not n.endswith("_")},
    **{f"aten::{n}": "binary" for n in _BINARY}, **{f"aten::{n}_": "binary" for n in _BINARY},
    **{f"aten::{n}": "streamed" for n in _STREAMED},
}
"""Op name -> family of :mod:`.formulas` (the ops TraceLens models, and a few more of each family)."""

BACKWARD_FAMILY = {"gemm": "gemm_backward", "attention": "attention_backward", "convolution": "convolution_backward"}
"""Forward family -> the family of its backward's work (:mod:`.formulas`), read from the forward op's own shapes: the
backward of an op that has no backward op of its own to model (:mod:`.op_owners`)."""

FAMILY_CLASS = {"gemm": "gemm", "attention": "attention", "attention_backward": "attention", "convolution": "convolution",
                "convolution_backward": "convolution", "unary": "elementwise", "binary": "elementwise",
                "streamed": "reduction"}
"""Family -> kernel class (:data:`.kernel_classes.CLASSES`); ``copy_``, ``to``, ``_to_copy`` and ``cat`` are copies,
``embedding`` other (a gather: the rows it reads, not its table)."""

BYTES_PER_ELEMENT = {"double": 8, "long int": 8, "float": 4, "int": 4, "scalar": 4, "c10::half": 2, "c10::bfloat16": 2,
                     "short int": 2, "bool": 1, "unsigned char": 1, "signed char": 1, "c10::float8_e4m3fn": 1,
                     "c10::float8_e4m3fnuz": 1, "c10::float8_e5m2": 1, "c10::float8_e5m2fnuz": 1,
                     "c10::float8_e8m0fnu": 1, "c10::float4_e2m1fn_x2": 1, "c10::complex<float>": 8}
"""Bytes per element of each ``Input type`` (lower case), as TraceLens's ``name2bpe`` (plus ``bool``, ``short int``,
complex); an unknown type has no size, and an op of one has no model."""

DTYPES = {"float": "fp32", "double": "fp64", "c10::half": "fp16", "c10::bfloat16": "bf16", "c10::float8_e4m3fn": "fp8",
          "c10::float8_e4m3fnuz": "fp8", "c10::float8_e5m2": "fp8", "c10::float8_e5m2fnuz": "fp8",
          "c10::float4_e2m1fn_x2": "fp4"}
"""``Input type`` (lower case) -> the dtype a roofline's peak is read for (:mod:`.roofline`)."""

PARAMETERS = ("b", "m", "n", "k", "bias", "bpe", "bpe_out", "n_q", "h_q", "n_kv", "h_kv", "d_qk", "d_v", "causal",
              "recompute", "x", "w", "out", "w_inner", "c_in", "c_out", "transposed", "n1", "n2", "bpe2", "bytes_in",
              "bytes_out")


def _decode(text: str) -> Any:
    return msgspec.json.decode(text) if text else []


def _bpe(t: Any) -> int:
    return BYTES_PER_ELEMENT.get(str(t).lower(), 0)


def _ints(text: str, n: int, default: int) -> tuple[int, ...]:
    """A ``Concrete Inputs`` list (``"[16, 16]"``) as ints, broadcast to ``n`` dims; ``(default,) * n`` where empty."""
    vals = tuple(int(v) for v in text.strip("[]").split(",") if v.strip()) if text else ()
    return (default,) * n if not vals else vals * n if len(vals) == 1 else vals


def _truthy(text: str) -> bool:
    return text.strip().lower() == "true"


def _parse(family: str, name: str, dims: list[Any], types: list[Any], concrete: list[Any]) -> dict[str, Any] | None:
    """The parameters of one (op, args) pair (:data:`PARAMETERS`), None where its shapes do not fit the family."""
    if family == "gemm":
        ia, ib, bias, batched = _GEMMS[name]
        a, bm = dims[ia], dims[ib]
        if len(a) != 2 + batched or len(bm) != 2 + batched:
            return None
        bpe = _bpe(types[ia])
        bpe_out = (2 if bpe == 1 else bpe) if name == "aten::_scaled_mm" else bpe
        return {"b": a[0] if batched else 1, "m": a[-2], "k": a[-1], "n": bm[-1], "bpe": bpe, "bpe_out": bpe_out,
                "bias": len(dims) == 3 if bias is None else bias}  # (_scaled_mm: as TraceLens reads it)
    if family in ("attention", "attention_backward"):
        iq, ic, _, recompute = _ATTENTION[name]
        q, k, v = dims[iq:iq + 3]
        if not (len(q) == len(k) == len(v) == 4):
            return None
        causal = len(concrete) > ic and _truthy(concrete[ic])
        return {"b": q[0], "h_q": q[1], "n_q": q[2], "d_qk": q[3], "h_kv": k[1], "n_kv": k[2], "d_v": v[3],
                "causal": causal, "recompute": recompute, "bpe": _bpe(types[iq])}
    if family in ("convolution", "convolution_backward"):
        bwd = family == "convolution_backward"
        x, w = dims[bwd], dims[1 + bwd]
        nd = len(x) - 2
        if nd < 1 or len(w) != len(x):
            return None
        c = concrete[3 + bwd:] + [""] * 6
        stride, padding, dilation, out_pad = _ints(c[0], nd, 1), _ints(c[1], nd, 0), _ints(c[2], nd, 1), _ints(c[4], nd, 0)
        transposed = _truthy(c[3])
        if transposed:
            spatial = [(x[2 + i] - 1) * stride[i] - 2 * padding[i] + dilation[i] * (w[2 + i] - 1) + out_pad[i] + 1 for i in range(nd)]
        else:
            spatial = [(x[2 + i] + 2 * padding[i] - dilation[i] * (w[2 + i] - 1) - 1) // stride[i] + 1 for i in range(nd)]
        c_out = w[1] if transposed else w[0]
        # the bias as TraceLens reads it: ``len(Input Dims) == 3`` forward, never true of aten::convolution's nine args
        # (so its bias, out + c_out of ~10^6 FLOPs, is left out, to agree), and ``Input Dims[3]`` backward
        bias = bwd and len(dims) > 3 and bool(dims[3])
        return {"x": prod(x), "w": prod(w), "out": x[0] * c_out * prod(spatial), "w_inner": prod(w[1:]), "c_in": x[1],
                "c_out": c_out, "transposed": transposed, "bias": bool(bias), "bpe": _bpe(types[bwd])}
    tensors = [(prod(d), _bpe(t)) for d, t in zip(dims, types) if isinstance(d, list) and d]
    if not tensors:
        return None
    if family == "unary":
        n, bpe = tensors[0]
        bpe_out = _bpe(types[1]) if len(dims) > 1 and dims[1] else bpe
        return {"n1": n, "bpe": bpe, "bpe_out": bpe_out}
    if family == "binary":
        if len(dims) < 2:
            return None
        d1, d2 = list(dims[0]), list(dims[1]) if isinstance(dims[1], list) else []
        try:
            shape = np.broadcast_shapes(tuple(d1), tuple(d2))
        except ValueError:
            return None
        b1, b2 = _bpe(types[0]), _bpe(types[1])
        bpe_out = max(b1, b2) if d1 and d2 else b1
        return {"n1": prod(d1), "n2": prod(d2), "out": prod(shape), "bpe": b1, "bpe2": b2, "bpe_out": bpe_out}
    n, bpe = tensors[0]
    if name == "aten::embedding" and len(dims) > 1 and len(dims[0]) == 2:  # (weight (V, D), indices): rows gathered, not the table
        rows, width = prod(dims[1]), dims[0][1]
        return {"n1": rows * width, "bpe": bpe, "bytes_in": rows * _bpe(types[1]) + rows * width * bpe, "bytes_out": rows * width * bpe}
    return {"n1": n, "bpe": bpe, "bytes_in": sum(e * s for e, s in tensors), "bytes_out": 0 if "norm" not in name else n * bpe}


def op_parameters(names: pd.Series, dims: pd.Series, types: pd.Series, concrete: pd.Series,
                  backward: pd.Series | None = None) -> pd.DataFrame:
    """FLOPs and bytes of each distinct (op, args) pair: the parameters read once per pair (:func:`_parse`), then
    :mod:`.formulas` over all pairs of a family at once.

    Args:
        names, dims, types, concrete: one entry per pair: the op name, and the JSON text of its ``Input Dims``,
            ``Input type``, ``Concrete Inputs`` (``Trace.op_args``).
        backward: per pair (bool), the work of the op's backward instead (:data:`BACKWARD_FAMILY`, from the forward's
            shapes; unmodelled where its family has none); None: forward only.

    Returns:
        one row per pair (the input's index): ``family`` (str, ``""`` where unmodelled), ``dtype`` (str, the main
        input's: ``fp32``, ``bf16``, ...; ``""`` where unknown), ``flops``, ``bytes`` (int64, -1 where unmodelled),
        and the shape's parameters (``m``, ``n``, ``k``, ``b``: int64, 0 where not a GEMM).
    """
    rows: list[dict[str, Any]] = []
    for name, d, t, c in zip(names.tolist(), dims.tolist(), types.tolist(), concrete.tolist()):
        family, p, tt = OP_FAMILY.get(name, ""), None, []
        if family:
            try:
                dd, tt, cc = _decode(d), _decode(t), _decode(c)
                p = _parse(family, name, dd, tt, [str(x) for x in cc])
            except (msgspec.DecodeError, ValueError, TypeError, IndexError, ZeroDivisionError):
                p = None
            if p is not None and (p.get("bpe", 0) == 0):
                p = None
        main = (tt[_GEMMS[name][0]] if family == "gemm" else tt[0]) if p is not None and tt else ""
        rows.append({"family": family if p is not None else "", "dtype": DTYPES.get(str(main).lower(), ""), **(p or {})})
    if backward is not None:
        for row, back in zip(rows, backward.tolist()):
            if back:
                row["family"] = BACKWARD_FAMILY.get(row["family"], "")
    df = pd.DataFrame(rows, index=names.index)
    for col in PARAMETERS:
        df[col] = df[col].fillna(0).astype(np.int64) if col in df else np.zeros(len(df), np.int64)
    flops, moved = np.full(len(df), -1, np.int64), np.full(len(df), -1, np.int64)
    fam = df["family"].to_numpy(object) if len(df) else np.zeros(0, object)
    g = {c: df[c].to_numpy(np.int64) for c in PARAMETERS}
    for family, fn in _FORMULAS.items():
        sel = fam == family
        if sel.any():
            f, m = fn({c: v[sel] for c, v in g.items()})
            flops[sel], moved[sel] = f, m
    df["flops"], df["bytes"] = flops, moved
    return df.loc[:, ["family", "dtype", "flops", "bytes", "b", "m", "n", "k"]]


_FORMULAS = {
    "gemm": lambda g: formulas.gemm(g["b"], g["m"], g["n"], g["k"], g["bias"] > 0, g["bpe"], g["bpe_out"]),
    "gemm_backward": lambda g: formulas.gemm_backward(g["b"], g["m"], g["n"], g["k"], g["bias"] > 0, g["bpe"]),
    "attention": lambda g: formulas.attention(g["b"], g["n_q"], g["h_q"], g["n_kv"], g["h_kv"], g["d_qk"], g["d_v"],
                                              g["causal"] > 0, g["bpe"]),
    "attention_backward": lambda g: formulas.attention_backward(g["b"], g["n_q"], g["h_q"], g["n_kv"], g["h_kv"], g["d_qk"],
                                                                g["d_v"], g["causal"] > 0, g["recompute"] > 0, g["bpe"]),
    "convolution": lambda g: formulas.convolution(g["x"], g["w"], g["out"], g["w_inner"], g["c_out"], g["transposed"] > 0,
                                                  g["bias"] > 0, g["bpe"]),
    "convolution_backward": lambda g: formulas.convolution_backward(g["x"], g["w"], g["out"], g["w_inner"], g["c_in"],
                                                                    g["c_out"], g["transposed"] > 0, g["bias"] > 0, g["bpe"]),
    "unary": lambda g: formulas.unary(g["n1"], g["bpe"], g["bpe_out"]),
    "binary": lambda g: formulas.binary(g["n1"], g["n2"], g["out"], g["bpe"], g["bpe2"], g["bpe_out"]),
    "streamed": lambda g: formulas.streamed(g["n1"], g["bytes_in"], g["bytes_out"]),
}


def op_class(name: str) -> str:
    """The kernel class of a modelled op (:data:`FAMILY_CLASS`; copies and gathers by name), ``""`` where unmodelled."""
    family = OP_FAMILY.get(name, "")
    short = name.removeprefix("aten::")
    if short in ("copy_", "to", "_to_copy") or short in _STREAMED_CLASS:
        return _STREAMED_CLASS.get(short, "copy")
    return FAMILY_CLASS.get(family, "")


NAME_RULES = [
    ("copy", re.compile(r"memcpy|memset|CatArrayBatchedCopy", re.I)),
    ("attention", re.compile(r"flash|fmha|attention|attn|mha_|sdpa", re.I)),
    ("convolution", re.compile(r"conv|fprop|dgrad|wgrad|winograd|implicit_gemm|cudnn", re.I)),
    ("gemm", re.compile(r"gemm|cutlass|cublas|xmma|wgmma|nvjet|matmul|Cijk_|rocblas|hipblaslt|splitKreduce|triton_tem", re.I)),
    ("reduction", re.compile(r"reduce|norm|softmax|welford|argmax|topk|sort|scan|triton_red|triton_per", re.I)),
    ("elementwise", re.compile(r"elementwise|vectorized|unrolled|functor|fill|where|index|gather|scatter|triton_poi", re.I)),
]
"""(class, pattern) searched in order in a kernel's name (module docstring)."""


@lru_cache(maxsize=1 << 14)
def class_of_name(name: str) -> str:
    """The class of a kernel from its name alone (:data:`NAME_RULES`), ``other`` where no rule matches; kept per name
    for the process (the ranks of a job share their kernels' names; the case-blind searches take 50 µs a name)."""
    return next((c for c, pattern in NAME_RULES if pattern.search(name)), "other")
