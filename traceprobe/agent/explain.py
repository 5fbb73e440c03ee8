"""What a figure means, read from where it is declared and defined: its key in the JSON document's figures
(:data:`traceprobe.report.figures.TRACE`, the computed ones from :data:`traceprobe.analysis.registry.COMPUTED`), the
sentence :class:`~traceprobe.analysis.per_trace.OverlapReport` gives its field, and the docstring of the function that
computes it (each figure is defined once, there). Nothing is written twice: a new figure is explained as soon as it is
declared and documented.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pkgutil
import re
from functools import cache
from typing import Any

from ..analysis.causal.what_if_windows import LABELS
from ..analysis.per_trace import OverlapReport
from ..analysis.registry import COMPUTED
from ..report.actions import DO_CAUSE
from ..report.figures import TRACE

FIELD_OF = {"workload": "info", "variant": "info", "wall_s": "info", "duration_ns": "window_ns",
            "device_concurrency": "devices", "throughput_steps_per_s": "throughput", "parallelism": "verdicts"}
"""The report's field each figure key is read off, where the two names differ (the getters of
:data:`traceprobe.report.figures.TRACE`)."""

CAUSE_SOURCE = {"imbalance": "traceprobe.analysis.causal.imbalance", "sync": "traceprobe.analysis.causal.sync_names",
                "pageable_copy": "traceprobe.analysis.causal.what_if"}
"""Where a what-if cause is defined, where not by the host's classes (:mod:`traceprobe.analysis.host.host_classes`,
the time a host-side cause removes)."""

_REF = re.compile(r":(?:func|class|mod|meth):`~?([\w.]+)`")
MAX_DEFINITION = 2500
"""Characters of a definition's docstring kept (the first paragraphs): an answer stays a few KB."""


@cache
def _fields() -> dict[str, str]:
    """Each field of :class:`OverlapReport` and its sentence, from the class docstring's ``Attributes:`` section."""
    doc = inspect.getdoc(OverlapReport) or ""
    body = doc.split("Attributes:", 1)[-1].split("\n\n", 1)[0]
    out: dict[str, str] = {}
    name = ""
    for line in body.splitlines():
        m = re.match(r"^    (\w+): (.*)", line)
        if m:
            name = m.group(1)
            out[name] = m.group(2)
        elif name and line.startswith("        "):
            out[name] += " " + line.strip()
    return out


@cache
def _types() -> dict[str, str]:
    """Each field of :class:`OverlapReport` and its annotation as written (``DeviceConcurrency``, ``pd.DataFrame``)."""
    return {f.name: str(f.type) for f in dataclasses.fields(OverlapReport)}


@cache
def _modules() -> dict[str, Any]:
    """Every module of :mod:`traceprobe.analysis` by dotted name (imported: they are once a report exists)."""
    import traceprobe.analysis as root

    out = {}
    for info in pkgutil.walk_packages(root.__path__, root.__name__ + "."):
        try:
            out[info.name] = importlib.import_module(info.name)
        except ImportError:  # (a module whose optional dependency is missing explains nothing)
            continue
    return out


def resolve(ref: str) -> Any:
    """The object a docstring's reference names: a dotted path, absolute (``traceprobe.analysis.device.idle_gaps``) or
    relative as the docstrings write them (``.busy.stream_busy``: the module of :mod:`traceprobe.analysis` whose name
    ends so), or a bare class name (``DeviceConcurrency``: the module defining it); None where nothing matches."""
    parts = ref.lstrip(".").split(".")
    for cut in range(len(parts), 0, -1):
        mod, rest = ".".join(parts[:cut]), parts[cut:]
        for name, module in _modules().items():
            if name == mod or name.endswith("." + mod):
                obj = module
                for attr in rest:
                    obj = getattr(obj, attr, None)
                if obj is not None:
                    return obj
    for name, module in _modules().items():  # (a bare class name: the module that defines it)
        obj = getattr(module, ref, None)
        if obj is not None and getattr(obj, "__module__", "") == name:
            return obj
    return None


def _definition(obj: Any) -> str:
    """``obj``'s docstring, and its module's where it says the definition is there (``module docstring``), cut to
    :data:`MAX_DEFINITION` characters at a paragraph's end."""
    doc = inspect.getdoc(obj) or ""
    if "module doc" in doc and not inspect.ismodule(obj):
        doc = (inspect.getdoc(inspect.getmodule(obj)) or "") + "\n\n" + doc
    return doc if len(doc) <= MAX_DEFINITION else doc[:MAX_DEFINITION].rsplit("\n\n", 1)[0] + "\n..."


def figures() -> list[str]:
    """Every figure key a trace's object of the JSON document has, in order."""
    return [f.key for f in TRACE]


def explain(name: str) -> dict[str, Any]:
    """What figure ``name`` (a key of :func:`figures`, or a what-if cause of
    :data:`traceprobe.analysis.causal.what_if_windows.LABELS`) is: its field's sentence, its JSON Schema, and the
    definition from the docstring of the function that computes it, with that function's dotted name.

    Raises:
        LookupError: no figure or cause has that name, its message listing them.
    """
    if name in LABELS:
        source = CAUSE_SOURCE.get(name, "traceprobe.analysis.host.host_classes")
        return {"cause": name, "label": LABELS[name], "do": DO_CAUSE.get(name, ""),
                "what": "a cause of the what-ifs: the window replayed on the job's dependency graph with this cause's time "
                        "removed gives back its gain",
                "definition": _definition(resolve(source)), "source": source}
    by_key = {f.key: f for f in TRACE}
    if name not in by_key:
        raise LookupError(f"no figure {name!r}; figures: {', '.join(figures())}; what-if causes: {', '.join(LABELS)}")
    computed = {f.key: f for f in COMPUTED}
    what = _fields().get(FIELD_OF.get(name, name), "")
    if name in computed:
        what = str(computed[name].schema.get("description", ""))
    refs = _REF.findall(what) or re.findall(r"\((traceprobe\.[\w.]+)\)", what)
    hint = _types().get(FIELD_OF.get(name, name), "")
    if hint[:1].isupper():  # (a field of a dataclass type of its own, DeviceConcurrency: its class says what it is)
        refs.append(hint)
    if name in computed and refs:
        refs = [refs[0] + "." + name.rsplit(".", 1)[-1], *refs]  # (the module's function of the figure's name first)
    source, obj = "", None
    for ref in refs:
        obj = resolve(ref)
        if obj is not None and inspect.getdoc(obj):
            source = f"{getattr(obj, '__module__', '') or ''}.{getattr(obj, '__qualname__', '')}".strip(".") \
                if not inspect.ismodule(obj) else obj.__name__
            break
        obj = None
    return {"figure": name, "what": what, "schema": by_key[name].schema,
            "definition": _definition(obj) if obj is not None else "", "source": source,
            "units": "times in int nanoseconds (*_ns), fractions 0..1, null where undefined"}
