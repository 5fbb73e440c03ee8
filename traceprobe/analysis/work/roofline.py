"""The device's roofline: peak dense TFLOP/s per dtype and HBM bandwidth per device model, from the vendors' datasheets.

:data:`PEAKS` holds one row per model, matched from the trace's ``deviceProperties`` name (:func:`device_roofline`);
a user's own peaks (:func:`parse_roofline`, ``--roofline``) stand in for or beside them. Dense figures only: where a
datasheet gives a figure "with sparsity", half of it. An unknown device has no roofline: its kernels show achieved
TFLOP/s and TB/s only.

Sources (each model's datasheet, the figures of its SXM/OAM board unless named):

- H100 SXM and H100 PCIe: NVIDIA H100 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h100/): FP32 67 / 51,
  TF32 989 / 756 (sparse), BF16/FP16 1,979 / 1,513 (sparse), FP8 3,958 / 3,026 (sparse) TFLOPS; 3.35 / 2 TB/s.
- H100 NVL: the same datasheet: FP32 60, TF32 835, BF16 1,671, FP8 3,341 (sparse) TFLOPS; 3.9 TB/s.
- H200: NVIDIA H200 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h200/): H200 SXM, compute as H100 SXM;
  4.8 TB/s.
- B200: NVIDIA HGX B200 specifications (nvidia.com/en-us/data-center/hgx/), per GPU: FP32 75, TF32 2.2 PF, BF16 4.5
  PF, FP8 9 PF (sparse); 8 TB/s.
- A100 40GB / 80GB: NVIDIA A100 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/a100/): FP32 19.5, TF32 156,
  BF16/FP16 312 TFLOPS (dense); 1,555 GB/s (40GB SXM), 2,039 GB/s (80GB SXM), 1,935 GB/s (80GB PCIe).
- L4: NVIDIA L4 datasheet: FP32 30.3, TF32 120, BF16 242, FP8 485 (sparse) TFLOPS; 300 GB/s.
- L40S: NVIDIA L40S datasheet: FP32 91.6, TF32 366, BF16 733, FP8 1,466 (sparse) TFLOPS; 864 GB/s.
- MI250X: AMD Instinct MI250X datasheet (amd.com): FP32 matrix 95.7, FP16/BF16 383 TFLOPS; 3.2 TB/s (3.2768).
- MI300X: AMD Instinct MI300X datasheet: FP32 163.4, TF32 653.7, FP16/BF16 1,307.4, FP8 2,614.9 TFLOPS (dense); 5.3 TB/s.
- MI325X: AMD Instinct MI325X datasheet: compute as MI300X; 6 TB/s.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

DTYPES = ("fp32", "tf32", "bf16", "fp16", "fp8")
"""The dtypes a roofline gives a peak for (fp16 is bf16's peak on every model listed)."""


@dataclass(frozen=True)
class Roofline:
    """One device's peaks.

    Attributes:
        model: the model's name (``H100 SXM``), or ``given`` for a user's own peaks.
        tflops: peak dense TFLOP/s per dtype (:data:`DTYPES`); a dtype the device has no peak for is absent.
        tbps: peak memory bandwidth, TB/s (10^12 bytes/s).
        source: where the figures come from (a datasheet, or ``--roofline``).
    """

    model: str
    tflops: dict[str, float] = field(default_factory=dict)
    tbps: float = 0.0
    source: str = ""

    def peak_flops(self, dtype: str) -> float:
        """Peak FLOP/s (not TFLOP/s) of ``dtype``: fp64 and unknown dtypes take fp32's; 0.0 where there is none."""
        d = dtype if dtype in self.tflops else "bf16" if dtype == "fp16" else "fp32"
        return self.tflops.get(d, 0.0) * 1e12


def _r(model: str, fp32: float, tf32: float, bf16: float, fp8: float | None, tbps: float, source: str) -> Roofline:
    tf = {"fp32": fp32, "tf32": tf32, "bf16": bf16, "fp16": bf16} | ({"fp8": fp8} if fp8 else {})
    return Roofline(model, tf, tbps, source)


PEAKS: list[tuple[str, Roofline]] = [  # (a pattern of deviceProperties' name, its roofline), the first match wins
    (r"H100.*PCIe", _r("H100 PCIe", 51, 378, 756.5, 1513, 2.0, "NVIDIA H100 datasheet")),
    (r"H100.*NVL", _r("H100 NVL", 60, 417.5, 835.5, 1670.5, 3.9, "NVIDIA H100 datasheet")),
    (r"H100|GH200", _r("H100 SXM", 67, 494.5, 989.5, 1979, 3.35, "NVIDIA H100 datasheet")),
    (r"H200", _r("H200", 67, 494.5, 989.5, 1979, 4.8, "NVIDIA H200 datasheet")),
    (r"B200", _r("B200", 75, 1100, 2250, 4500, 8.0, "NVIDIA HGX B200 specifications")),
    (r"A100.*40\s*GB.*PCI|A100-PCIE-40GB", _r("A100 40GB PCIe", 19.5, 156, 312, None, 1.555, "NVIDIA A100 datasheet")),
    (r"A100.*80\s*GB.*PCI", _r("A100 80GB PCIe", 19.5, 156, 312, None, 1.935, "NVIDIA A100 datasheet")),
    (r"A100.*80\s*GB", _r("A100 80GB SXM", 19.5, 156, 312, None, 2.039, "NVIDIA A100 datasheet")),
    (r"A100", _r("A100 40GB SXM", 19.5, 156, 312, None, 1.555, "NVIDIA A100 datasheet")),
    (r"L40S", _r("L40S", 91.6, 183, 366.5, 733, 0.864, "NVIDIA L40S datasheet")),
    (r"\bL4\b", _r("L4", 30.3, 60, 121, 242.5, 0.3, "NVIDIA L4 datasheet")),
    (r"MI250", _r("MI250X", 95.7, 95.7, 383, None, 3.2768, "AMD Instinct MI250X datasheet")),
    (r"MI325", _r("MI325X", 163.4, 653.7, 1307.4, 2614.9, 6.0, "AMD Instinct MI325X datasheet")),
    (r"MI300X", _r("MI300X", 163.4, 653.7, 1307.4, 2614.9, 5.3, "AMD Instinct MI300X datasheet")),
]
"""Each known model's roofline (module docstring), and the pattern its ``deviceProperties`` name matches."""


def device_model(name: str) -> Roofline | None:
    """The roofline of a device named ``name`` (``deviceProperties``' ``name``: ``NVIDIA H100 80GB HBM3``), None where
    the model is not in :data:`PEAKS`."""
    return next((r for pattern, r in PEAKS if re.search(pattern, name, re.IGNORECASE)), None)


def parse_roofline(text: str) -> Roofline:
    """A user's own peaks, as ``--roofline`` takes them: ``bf16=989,fp32=67,tbps=3.35`` (TFLOP/s per dtype of
    :data:`DTYPES`, TB/s as ``tbps``); a dtype not given falls back as :meth:`Roofline.peak_flops` says.

    Raises:
        ValueError: a part that is not ``key=number``, an unknown key, or a figure that is not positive.
    """
    tflops: dict[str, float] = {}
    tbps = 0.0
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        key = key.strip().lower()
        try:
            number = float(value)
        except ValueError:
            number = float("nan")
        if not sep or not number > 0:
            raise ValueError(f"roofline: {part!r} is not key=positive number (e.g. bf16=989,tbps=3.35)")
        if key == "tbps":
            tbps = number
        elif key in DTYPES:
            tflops[key] = number
        else:
            raise ValueError(f"roofline: unknown key {key!r} (one of {', '.join(DTYPES)}, tbps)")
    if "bf16" in tflops and "fp16" not in tflops:
        tflops["fp16"] = tflops["bf16"]
    return Roofline("given", tflops, tbps, "--roofline")


ROOFLINE_ENV = "TRACEPROBE_ROOFLINE"
"""The environment variable ``overlap-report --roofline`` sets (read by every worker process): the user's peaks, as
:func:`parse_roofline` takes them."""


def given_roofline() -> Roofline | None:
    """The user's peaks from :data:`ROOFLINE_ENV` (``--roofline``), None where unset.

    Raises:
        ValueError: its value is not as :func:`parse_roofline` takes it.
    """
    text = os.environ.get(ROOFLINE_ENV, "").strip()
    return parse_roofline(text) if text else None


def device_name(devices: pd.DataFrame, device: int) -> str:
    """The ``deviceProperties`` name of device ``device`` (the row whose ``id`` it is, else the first row), ``""``
    where the trace has none."""
    if not len(devices) or "name" not in devices:
        return ""
    names = devices["name"].astype(str).to_numpy()
    hit = np.flatnonzero(devices["id"].to_numpy() == device) if "id" in devices else np.zeros(0, np.int64)
    return str(names[hit[0]] if hit.size else names[0])


def device_roofline(devices: pd.DataFrame, device: int, given: Roofline | None = None) -> Roofline | None:
    """The roofline of device ``device`` of a trace (its ``deviceProperties`` row ``id``; the first row where no id
    matches): ``given`` where the user gave one (else :func:`given_roofline`; its missing figures taken from the
    datasheet's), else the datasheet's of its model, else None (an unknown device, or no ``deviceProperties``)."""
    given = given if given is not None else given_roofline()
    name = device_name(devices, device)
    known = device_model(name) if name else None
    if given is None:
        return known
    if known is None:
        return given if given.tflops or given.tbps else None
    return Roofline(f"{known.model} (given)", known.tflops | given.tflops, given.tbps or known.tbps, "--roofline and " + known.source)
