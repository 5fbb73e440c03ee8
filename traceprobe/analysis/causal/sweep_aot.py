"""The replay's kernels (:mod:`._sweep_kernels`) compiled ahead of time, at install, so that a process that replays
loads them without importing numba.

numba's import, its CPU target (which imports its whole registry of implementations, SciPy's linear algebra among
them where SciPy is installed) and its disk cache's kernels cost each process that replays about 0.6 s of CPU and
100 MB of memory on the 2-CPU benchmark machine, against a few ms for every replay of a 216k-event trace after it.
``setup.py`` builds the same kernels, from the same source, into the extension module :data:`MODULE` with numba's
``pycc`` (:func:`build`); loading it (:func:`kernels`) takes under a millisecond and imports no numba.

The module is built for one set of argument types, those of every window below 2^31 nodes (:data:`SIGNATURES`:
int32 indices, int64 times, bool flags, 1-D C-contiguous arrays). ``pycc``'s functions do not check the types they
are given, so each call is checked here first, and a call with other types (a window of 2^31 nodes or more, an array
that is a strided view) goes to numba's JIT kernel, compiled on first use as where no module was built. The module
also carries the hash of the kernels' source it was built from (:func:`source_id`): one built from another source (an
editable install whose kernels changed since) is not used. Where it cannot be built (no C compiler at install, a
numba without ``pycc``), the install goes on without it and every kernel is numba's JIT kernel.

Imports numpy only (``setup.py`` loads this file by its path, in the build's own environment)."""

from __future__ import annotations

import hashlib
import importlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

MODULE = "traceprobe.analysis.causal._sweep_aot"
"""The extension module's import name (``setup.py``'s extension)."""

KERNELS_SOURCE = Path(__file__).with_name("_sweep_kernels.py")
"""The kernels' source: the JIT kernels are compiled from it, and the module built ahead of time from the same."""

SIGNATURES: dict[str, tuple[str, tuple[str, ...]]] = {
    # name: (numba's result type, argument codes): ``n`` an integer, ``i4``/``i8``/``b1`` a 1-D C-contiguous array of
    # int32/int64/bool read by the kernel, with ``!`` one it writes
    "counts_into": ("void", ("i4", "i4!")),
    "csr_fill": ("void", ("i4", "i4", "i4", "i4!")),
    "topological_order": ("Tuple((i4[::1], i8))", ("i4", "i4", "i4!")),
    "visit": ("b1", ("i4", "n", "n", "n", "n", "b1", "b1") + ("i8",) * 9 + ("b1",) + ("i4",) * 9 + ("i8!",) * 4),
    "critical_walk": ("Tuple((i8, i8, i8, b1))", ("n", "n", "n", "b1", "b1") + ("i8",) * 11 + ("b1",) + ("i4",) * 9
                      + ("i8!",) * 3),
}
"""Each kernel's types as built ahead of time: those :class:`.sweep.Sweep` passes wherever its node ids fit int32."""

_DTYPES = {"i4": np.dtype(np.int32), "i8": np.dtype(np.int64), "b1": np.dtype(np.bool_)}


def source_id(kernels_source: bytes) -> int:
    """A 56-bit hash (SHA-256) of the kernels' source and :data:`SIGNATURES`: what the module built from them returns
    from its ``source_id()``."""
    digest = hashlib.sha256(kernels_source + repr(sorted(SIGNATURES.items())).encode()).digest()
    return int.from_bytes(digest[:7], "little")


def fits(x: Any, code: str) -> bool:
    """Whether ``x`` is of the type the argument code ``code`` (:data:`SIGNATURES`) stands for."""
    if code == "n":
        return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_)) and -(2**63) <= int(x) < 2**63
    return (type(x) is np.ndarray and x.ndim == 1 and x.dtype == _DTYPES[code[:2]] and x.flags.c_contiguous
            and (x.flags.writeable or not code.endswith("!")))


class _Checked:
    """One kernel: the module's function where every argument fits its signature, else the JIT kernel."""

    def __init__(self, name: str, fn: Callable[..., Any], codes: tuple[str, ...], jit: Callable[[], Any]) -> None:
        self.name, self.fn, self.codes, self.jit = name, fn, codes, jit

    def __call__(self, *args: Any) -> Any:
        if len(args) == len(self.codes) and all(fits(x, c) for x, c in zip(args, self.codes)):
            return self.fn(*args)
        return getattr(self.jit(), self.name)(*args)


class Kernels:
    """The kernels of :data:`SIGNATURES` as attributes (``counts_into``, ``visit``, ...), each called as the JIT
    kernel of the same name is."""

    def __init__(self, module: Any, jit: Callable[[], Any]) -> None:
        for name, (_, codes) in SIGNATURES.items():
            setattr(self, name, _Checked(name, getattr(module, name), codes, jit))

    def __getattr__(self, name: str) -> Any:  # (pyright: the kernels are set in __init__)
        raise AttributeError(name)


JIT_ENV = "TRACEPROBE_JIT_KERNELS"
"""Set (to anything but empty or ``0``): the module built ahead of time is not used, every kernel is numba's JIT one
(to rule the module out where a replay fails)."""


def kernels(jit: Callable[[], Any], module: str = MODULE) -> Kernels | None:
    """The kernels built ahead of time (``jit`` gives the module of JIT kernels, imported only when a call needs one),
    or None where no module of this source is built: not built at install, built from another source, not loadable
    here (built against another numpy), or turned off (:data:`JIT_ENV`)."""
    if os.environ.get(JIT_ENV, "0") not in ("", "0"):
        return None
    try:
        built = importlib.import_module(module)
        if built.source_id() != source_id(KERNELS_SOURCE.read_bytes()):
            return None
    except Exception:  # noqa: BLE001 - any failure to load it leaves the JIT kernels, which raise where they fail
        return None
    return Kernels(built, jit)


def build(path: str | Path) -> None:
    """Compile the kernels of :data:`KERNELS_SOURCE` for :data:`SIGNATURES` into the extension module file ``path``
    (its name as setuptools gives it: ``_sweep_aot.<platform tag>.so``), with numba's ``pycc`` (numba and a C compiler
    needed). For ``setup.py``.

    Raises:
        whatever numba or the compiler raise (ImportError where numba has no ``pycc``)."""
    import importlib.util
    import warnings

    spec = importlib.util.spec_from_file_location("_traceprobe_sweep_kernels", KERNELS_SOURCE)
    assert spec is not None and spec.loader is not None
    source = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(source)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (pycc's notice that it is pending deprecation)
        from numba.pycc.cc import CC
    path = Path(path)
    cc = CC(MODULE.rsplit(".", 1)[1])
    cc.output_dir, cc.output_file = str(path.parent), path.name
    for name, (result, codes) in SIGNATURES.items():
        args = ", ".join("i8" if c == "n" else f"{c[:2]}[::1]" for c in codes)
        cc.export(name, f"{result}({args})")(getattr(source, name).py_func)
    ns: dict[str, Any] = {}
    exec(f"def source_id():\n    return {source_id(KERNELS_SOURCE.read_bytes())}\n", ns)  # (a constant, compiled in)
    cc.export("source_id", "i8()")(ns["source_id"])
    path.parent.mkdir(parents=True, exist_ok=True)
    cc.compile()
