"""What a workload is: named variants that record() times and profiles.

A workload module defines a :class:`Workload` whose ``variants(ctx)`` returns
:class:`Variant` objects. Each variant's ``setup()`` allocates inputs and returns
a ``step`` callable that runs the variant once and returns only when all its
device work is done (it synchronizes), so wall-clock timing around it is honest.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...manifest import trace_name

_GPUS = re.compile(r"GPU \d(?:(?:, | and |/)GPU \d)*(?:/second stream| \(or two streams\))?|(?:\d+ |two |both )?GPUs")
"""The GPUs a variant's description names, as :meth:`Context.describe` replaces them on the CPU."""


class Skip(Exception):
    """Raised by ``setup()`` (or found by the recorder) when the machine lacks what a variant needs."""


@dataclass
class Context:
    """Where and how big workloads run.

    Attributes:
        device: ``cuda`` or ``cpu``. With ``cpu``, every GPU a variant would use is
            replaced by the CPU so the whole record path still runs (no device
            events are recorded then).
        gpus: CUDA devices visible (0 with ``cpu``).
        size: matrix size override (elements per side), or None for the workload's default.
        repeat: repetition override (products per batch, steps, ...), or None.
    """

    device: str = "cpu"
    gpus: int = 0
    size: int | None = None
    repeat: int | None = None

    @property
    def cuda(self) -> bool:
        return self.device == "cuda"

    def dev(self, i: int) -> str:
        """The torch device string standing in for GPU ``i``."""
        return f"cuda:{i}" if self.cuda else "cpu"

    def describe(self, text: str) -> str:
        """A variant's description as it ran: on the CPU, each GPU it names (``GPU 0``, ``GPU 0 and GPU 1``, ``GPU 1/second
        stream``) is the CPU, what a GPU run is expected to show is left out, and it says so (``... (ran on the CPU: no
        device overlap to expect)``); unchanged on GPUs."""
        if self.cuda:
            return text
        text = _GPUS.sub("the CPU", text.split(": expect")[0])  # (what a GPU run would show is not expected here)
        return f"{text} (ran on the CPU: no device overlap to expect)"

    def pick(self, gpu_default: int, cpu_default: int, override: int | None) -> int:
        """A size or count: the override if given, else the GPU or CPU default."""
        if override is not None:
            return override
        return gpu_default if self.cuda else cpu_default


@dataclass
class Variant:
    """One variant of a workload.

    Attributes:
        name: short name used in file names (``sequential``, ``overlapped``...).
        description: one line on what the variant does and what it should show.
        setup: allocates inputs; returns the step callable (see module doc).
            May raise :class:`Skip`.
        gpus: GPUs the variant needs on a CUDA machine.
        gpu_bytes: rough GPU memory the variant needs on each GPU it uses, bytes.
        params: sizes and counts, recorded in the manifest.
        ranks: processes the variant runs in (0: this one). With ranks, it writes
            one trace per rank itself, through ``launcher``.
        launcher: with ``ranks``: ``launcher(out_dir, workload)`` runs the
            variant's processes, which write :meth:`trace_names` into
            ``out_dir``, and returns the wall time in seconds (``data-parallel``'s
            torchrun variant). ``setup`` is then ignored.
    """

    name: str
    description: str
    setup: Callable[[], Callable[[], None]]
    gpus: int = 1
    gpu_bytes: int = 0
    params: dict[str, Any] = field(default_factory=dict)
    ranks: int = 0
    launcher: Callable[[Path, str], float] | None = None

    def trace_names(self, workload: str) -> list[str]:
        """The file names of the variant's traces (:func:`traceprobe.manifest.trace_name`), one per rank."""
        if self.ranks:
            return [trace_name(workload, self.name, r) for r in range(self.ranks)]
        return [trace_name(workload, self.name)]


@dataclass
class Workload:
    """A named experiment: a description and a function giving its variants."""

    name: str
    description: str
    variants: Callable[[Context], list[Variant]]


def products(x: Any, repeat: int) -> list[Any]:
    """``repeat`` independent products ``x.mm(x)`` (the experiments' ``run``)."""
    return [x.mm(x) for _ in range(repeat)]


def mat_bytes(n: int) -> int:
    """Bytes of one n x n float32 matrix."""
    return 4 * n * n


def synchronize(ctx: Context, *devices: int) -> None:
    """Wait for all work on the given GPUs (all visible ones if none given); no-op on CPU."""
    if not ctx.cuda:
        return
    import torch

    for d in devices or range(ctx.gpus):
        torch.cuda.synchronize(d)
