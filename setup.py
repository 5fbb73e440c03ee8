"""traceprobe's build beside pyproject.toml: the replay's kernels compiled ahead of time into an extension module
(``traceprobe/analysis/causal/sweep_aot.py`` says why and how). Where they cannot be built (no C compiler, a numba
without ``pycc``), the install goes on without them, one line of its log says so (``pip install -v`` shows it), and
the kernels compile on first use instead."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent


def _sweep_aot():
    """traceprobe's ``sweep_aot`` module, loaded by its path (the package's own imports are not in the build's
    environment: numba and numpy are)."""
    spec = importlib.util.spec_from_file_location("_traceprobe_sweep_aot", HERE / "traceprobe/analysis/causal/sweep_aot.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class BuildExt(build_ext):
    """Builds the kernels' module with numba's ``pycc`` (it has no C sources of its own); a failure leaves it out of the
    build's outputs, so the rest installs."""

    def build_extensions(self) -> None:
        for ext in list(self.extensions):
            try:
                _sweep_aot().build(self.get_ext_fullpath(ext.name))
            except Exception as e:  # noqa: BLE001 - optional: the JIT kernels take its place
                print(f"traceprobe: the replay's kernels were not compiled ahead of time ({type(e).__name__}: {e}); "
                      "they compile on first use instead", file=sys.stderr)
                self.extensions.remove(ext)


if __name__ == "__main__":  # (as setuptools runs it; tests import BuildExt)
    setup(ext_modules=[Extension("traceprobe.analysis.causal._sweep_aot", sources=[])], cmdclass={"build_ext": BuildExt})
