"""SYNTHETIC Kineto-style Chrome traces for the tests.

Nothing here was recorded on a GPU: every trace this module builds is made up by
hand (or by hypothesis) to have known, hand-computable figures. The ``traceName``
of every written trace starts with ``"synthetic: "`` so a stray file can never be
mistaken for a real recording.

The layout follows what ``torch.profiler`` (Kineto) writes:

- top level ``{"schemaVersion": 1, "deviceProperties": [...], "traceEvents": [...],
  "traceName": "synthetic: ..."}``, optionally ``"distributedInfo"``;
- device events ``{"ph": "X", "cat": "kernel" | "gpu_memcpy" | "gpu_memset", "name",
  "pid": device, "tid": stream, "ts": µs, "dur": µs, "args": {"device", "stream",
  "correlation", "bytes"}}``;
- host events ``{"ph": "X", "cat": "cpu_op" | "cuda_runtime" | "cuda_driver" |
  "user_annotation", "name", "pid", "tid", "ts", "dur", "args": {"External id",
  "correlation"}}``; steps are ``user_annotation`` events named ``ProfilerStep#N``.

Times are given to the builder in integer **nanoseconds** (so tests can state
expected values exactly) and written as Kineto does, in float microseconds
(``ns / 1000``, which round-trips to the same ns for any time below 2**43 µs).
"""

from __future__ import annotations

import gzip
import itertools
import json
from pathlib import Path
from typing import Any

SYNTHETIC_PREFIX = "synthetic: "

PID = 123
"""Host process/thread id used by default for host events."""

GEMM = "sm90_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x128x8_stage3_execute_kernel__5x_cublas"
NCCL_ALLREDUCE = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"

# Kineto memcpy names by direction, default memory kinds
_DEFAULT_KINDS = {
    "HtoD": ("Pinned", "Device"),
    "DtoH": ("Device", "Pageable"),
    "DtoD": ("Device", "Device"),
    "PtoP": ("Device", "Device"),
    "HtoH": ("Pinned", "Pinned"),
}


def us(ns: int) -> float:
    """Integer ns -> float µs, the unit Kineto writes."""
    return ns / 1000


def memcpy_name(direction: str, src: str | None = None, dst: str | None = None) -> str:
    """Kineto's memcpy name, e.g. ``Memcpy DtoH (Device -> Pageable)``."""
    d_src, d_dst = _DEFAULT_KINDS.get(direction, ("Device", "Device"))
    return f"Memcpy {direction} ({src or d_src} -> {dst or d_dst})"


class TraceBuilder:
    """Collects SYNTHETIC events and writes a Kineto-style trace file.

    All ``start``/``dur`` arguments are integer nanoseconds; ``base_ns`` is added
    to every start (Kineto's ``ts`` are large absolute values).
    """

    def __init__(
        self,
        description: str = "test trace",
        *,
        devices: int = 1,
        base_ns: int = 0,
        rank: int | None = None,
        world_size: int | None = None,
        pg_config: list[dict] | None = None,
    ) -> None:
        self.description = description
        self.base_ns = base_ns
        self.device_count = devices
        self.rank = rank
        self.pg_config = pg_config
        self.world_size = world_size
        self.events: list[dict[str, Any]] = []
        self._corr = itertools.count(1000)
        self._ext = itertools.count(1)

    # --- device events ---------------------------------------------------------

    def _device(self, cat: str, name: str, device: int, stream: int, start: int, dur: int,
                correlation: int | None, nbytes: int | None) -> dict[str, Any]:
        args: dict[str, Any] = {
            "External id": next(self._ext),
            "device": device,
            "context": 1,
            "stream": stream,
            "correlation": next(self._corr) if correlation is None else correlation,
        }
        if nbytes is not None:
            args["bytes"] = nbytes
        ev = {
            "ph": "X",
            "cat": cat,
            "name": name,
            "pid": device,
            "tid": stream,
            "ts": us(self.base_ns + start),
            "dur": us(dur),
            "args": args,
        }
        self.events.append(ev)
        return ev

    def kernel(self, device: int, stream: int, start: int, dur: int, name: str = GEMM,
               correlation: int | None = None) -> dict[str, Any]:
        """A compute kernel (or any kernel, by ``name``)."""
        return self._device("kernel", name, device, stream, start, dur, correlation, None)

    def nccl(self, device: int, stream: int, start: int, dur: int, name: str = NCCL_ALLREDUCE,
             correlation: int | None = None) -> dict[str, Any]:
        """An NCCL communication kernel."""
        return self._device("kernel", name, device, stream, start, dur, correlation, None)

    def memcpy(self, device: int, stream: int, start: int, dur: int, direction: str = "HtoD",
               src: str | None = None, dst: str | None = None, nbytes: int = 1 << 20,
               correlation: int | None = None, name: str | None = None) -> dict[str, Any]:
        """A ``gpu_memcpy`` named like Kineto does (``Memcpy HtoD (Pinned -> Device)``)."""
        return self._device("gpu_memcpy", name or memcpy_name(direction, src, dst), device, stream,
                            start, dur, correlation, nbytes)

    def memset(self, device: int, stream: int, start: int, dur: int, nbytes: int = 4096,
               correlation: int | None = None) -> dict[str, Any]:
        """A ``gpu_memset`` (``Memset (Device)``)."""
        return self._device("gpu_memset", "Memset (Device)", device, stream, start, dur, correlation, nbytes)

    # --- host events -----------------------------------------------------------

    def host(self, cat: str, name: str, start: int, dur: int, *, pid: int | str = PID,
             tid: int | str = PID, correlation: int | None = None) -> dict[str, Any]:
        """Any host event (``cpu_op``, ``cuda_runtime``, ``cuda_driver``, ``user_annotation``)."""
        args: dict[str, Any] = {"External id": next(self._ext)}
        if correlation is not None:
            args["correlation"] = correlation
        ev = {
            "ph": "X",
            "cat": cat,
            "name": name,
            "pid": pid,
            "tid": tid,
            "ts": us(self.base_ns + start),
            "dur": us(dur),
            "args": args,
        }
        self.events.append(ev)
        return ev

    def cpu_op(self, start: int, dur: int, name: str = "aten::add", **kw: Any) -> dict[str, Any]:
        return self.host("cpu_op", name, start, dur, **kw)

    def runtime(self, start: int, dur: int, name: str = "cudaLaunchKernel", correlation: int | None = None,
                **kw: Any) -> dict[str, Any]:
        return self.host("cuda_runtime", name, start, dur,
                         correlation=next(self._corr) if correlation is None else correlation, **kw)

    def launch(self, at: int, event: str, *args: Any, **kw: Any) -> dict[str, Any]:
        """A 1 µs runtime call at ``at`` and the device event it launched, linked by correlation id.

        ``event`` names the builder method (``kernel``, ``nccl``, ``memcpy``, ``memset``);
        ``args``/``kw`` go to it. Returns the device event.
        """
        call = {"memcpy": "cudaMemcpyAsync", "memset": "cudaMemsetAsync"}.get(event, "cudaLaunchKernel")
        c = self.runtime(at, 1_000, call)["args"]["correlation"]
        return getattr(self, event)(*args, correlation=c, **kw)

    def annotation(self, name: str, start: int, dur: int, **kw: Any) -> dict[str, Any]:
        return self.host("user_annotation", name, start, dur, **kw)

    def step(self, n: int, start: int, dur: int, **kw: Any) -> dict[str, Any]:
        """A ``ProfilerStep#n`` annotation."""
        return self.annotation(f"ProfilerStep#{n}", start, dur, **kw)

    def raw(self, event: dict[str, Any]) -> dict[str, Any]:
        """Append an event exactly as given."""
        self.events.append(event)
        return event

    # --- output ----------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "schemaVersion": 1,
            "deviceProperties": [
                {"id": i, "name": "SYNTHETIC GPU", "totalGlobalMem": 80 * 2**30, "computeMajor": 9,
                 "computeMinor": 0, "numSms": 132}
                for i in range(self.device_count)
            ],
            "traceEvents": list(self.events),
            "traceName": SYNTHETIC_PREFIX + self.description,
        }
        if self.rank is not None:
            doc["distributedInfo"] = {"backend": "nccl", "rank": self.rank,
                                      "world_size": self.world_size if self.world_size is not None else self.rank + 1}
            if self.pg_config is not None:
                doc["distributedInfo"]["pg_config"] = self.pg_config
        return doc

    def write(self, path: str | Path, gz: bool | None = None) -> Path:
        """Write the trace; gzipped when ``gz`` is true (default: when ``path`` ends in ``.gz``)."""
        return write_trace(self.to_dict(), path, gz)


BASE = 4_526_647_612_879_555
"""A Kineto-like absolute ts in ns (4526647612879.555 µs)."""


def load(b: TraceBuilder, tmp_path: Path, name: str = "t.pt.trace.json") -> Any:
    """Write ``b`` under ``tmp_path`` and load it with :func:`traceprobe.load_trace`."""
    from traceprobe import load_trace

    return load_trace(b.write(tmp_path / name))


def rows(df: Any, cols: list[str]) -> list[tuple]:
    """The ``cols`` of a DataFrame as a list of tuples, for exact comparisons."""
    return [tuple(r) for r in df[cols].itertuples(index=False)]


def write_trace(doc: dict[str, Any], path: str | Path, gz: bool | None = None) -> Path:
    """Write a trace dict as ``.json`` or gzipped ``.json.gz``.

    A ``traceName`` not already marked is prefixed with ``"synthetic: "``.
    """
    p = Path(path)
    doc = dict(doc)
    name = str(doc.get("traceName") or "")
    if not name.startswith(SYNTHETIC_PREFIX):
        doc["traceName"] = SYNTHETIC_PREFIX + name
    data = json.dumps(doc).encode()
    if gz if gz is not None else p.name.endswith(".gz"):
        data = gzip.compress(data)
    p.write_bytes(data)
    return p
