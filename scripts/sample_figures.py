"""The figures sample_traces/README.md quotes of the folders the samples' summary holds (the top level's manifests and
copies, ``stream-wait/``, ``sync-log/``, ``efficiency/``): each table and sentence written from the tool's reports and
from the recordings' own files (``manifest.json``, ``injected.jsonl``, ``fixes.jsonl``), never typed. scripts/readme.py
registers them (its ``FIGURES``); tests/test_table.py checks them against the tool in the default run.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

SAMPLES = Path(__file__).resolve().parents[1] / "sample_traces"


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def under(summary, folder: Path) -> SimpleNamespace:
    """The part of ``summary`` that is ``folder``'s: its what-ifs (``what_ifs``) and its traces (``reports``), as
    :func:`traceprobe.collect.analyze_paths` of that folder alone gives them (what scripts/matrix_table.py reads)."""
    here = folder.resolve()
    return SimpleNamespace(what_ifs=[w for w in summary.what_ifs if Path(w.run).resolve() == here],
                           reports=[r for r in summary.reports if Path(r.path).parent.resolve() == here])


def _tops(summary) -> dict:
    from traceprobe.report.actions import top_findings

    return top_findings(summary)


def manifests(summary) -> list[str]:
    """What the manifests of ``h100-1gpu/`` and ``h200-4gpu/`` say was recorded and skipped, and why."""
    out = []
    for folder, words in (("h100-1gpu", "one H100"), ("h200-4gpu", "four H200s")):
        variants = json.loads((SAMPLES / folder / "manifest.json").read_text())["variants"]
        ok = [v for v in variants if v.get("status") == "ok"]
        skipped = [v for v in variants if v.get("status") == "skipped"]
        reasons = sorted({str(v.get("reason", "")) for v in skipped})
        why = f" (\"{'; '.join(reasons)}\")" if reasons else ""
        out.append(f"On {words} (`{folder}/manifest.json`): {len(ok)} of {len(variants)} variants recorded, "
                   f"{len(skipped)} skipped{why}.")
    return [" ".join(out)]


def pageable(summary) -> list[str]:
    """The bandwidth of ``compute-copy.sequential``'s blocking copies to pageable memory: their bytes over their time."""
    r = next(r for r in summary.reports if Path(r.path).name == "compute-copy.sequential.pt.trace.json.gz"
             and Path(r.path).parent.resolve() == SAMPLES.resolve())
    row = r.copy_overlap[r.copy_overlap["direction"] == "DtoH"].iloc[0]
    return [f"The blocking copies of `compute-copy.sequential` do go to pageable memory: {row['bytes'] / 1e9:.1f} GB in "
            f"{row['copy_ns'] / 1e9:.2f} s, {row['bytes'] / row['copy_ns']:.1f} GB/s."]


def stream_wait(summary) -> list[str]:
    """``stream-wait/``: each run's built-in wait as its ``injected.jsonl`` measured it, its top what-if and where its
    critical path ran (the tool's words)."""
    out = ["| run | built in (measured in the run) | top what-if | critical path |", "| --- | --- | --- | --- |"]
    for f in sorted(_jsonl(SAMPLES / "stream-wait" / "injected.jsonl"), key=lambda f: f["folder"]):
        built = f"{f['cause']}: {f['injected_ms_per_step']:.1f} ms/step"
        if "side_ms_per_step" in f:
            built += f" (side stream {f['side_ms_per_step']:.1f} ms/step, main stream {f['main_ms_per_step']:.1f})"
        if "work_ms_per_step" in f:
            built += f", behind {f['work_ms_per_step']:.1f} ms/step of products"
        if not f.get("sync_events", True):
            built += "; no sync events recorded"
        w = next(iter(under(summary, SAMPLES / "stream-wait" / f["folder"]).what_ifs), None)
        label = (w.label() if w is not None else "") or "no what-if above the noise floor"
        path = w.path_line().removeprefix("critical path: ") if w is not None else ""
        out.append(f"| `{f['folder']}` | {built} | {label} | {path} |")
    return out


WORK = {"gemm_flops_per_step": "{:.2f} TFLOP of GEMMs a step", "full_attention_flops_per_step": "{:.2f} TFLOP of attention a step",
        "weight_bytes_per_step": "{:.1f} GB of weights read a step", "model_flops_per_step": "{:.2f} TFLOP of model GEMMs a step"}
"""The work of a step ``fixes.jsonl`` counts by hand, in words (FLOPs in TFLOP, bytes in GB)."""


def _work(f: dict) -> str:
    parts = [fmt.format(f[k] / 1e12 if "flops" in k else f[k] / 1e9) for k, fmt in WORK.items() if isinstance(f.get(k), (int, float))]
    if isinstance(f.get("weight_bytes_per_step"), (int, float)):
        fastest = min(v["ms_per_step"] for v in f["variants"].values())
        parts.append(f"{f['weight_bytes_per_step'] / fastest / 1e9:.1f} TB/s")
    return ", ".join(parts)


def efficiency(summary) -> list[str]:
    """``efficiency/``: each scenario's fix (``fixes.jsonl``), its variants' step times there (unprofiled, and profiled in
    brackets), the work of a step it counts, and the first screen's top finding of each variant's folder."""
    facts = {f["scenario"]: f for f in _jsonl(SAMPLES / "efficiency" / "fixes.jsonl")}
    folders = sorted(p.name for p in (SAMPLES / "efficiency").iterdir() if p.is_dir())
    tops = _tops(summary)
    out = ["| scenario | fix | variants: ms/step unprofiled (profiled) | work of a step | the first screen's top finding |",
           "| --- | --- | --- | --- | --- |"]
    scenarios = sorted({next((s for s in facts if name.startswith(s + "-")), name) for name in folders})
    for scenario in scenarios:
        f = facts.get(scenario)
        times = ", ".join(f"{v} {t['ms_per_step']:.3g} ({t['profiled_ms_per_step']:.3g})" for v, t in f["variants"].items()) if f else \
            "(trace only)"
        found = []
        order = list(f["variants"]) if f else []
        mine = [n for n in folders if n == scenario or n.startswith(scenario + "-")]
        for name in sorted(mine, key=lambda n: (order.index(n.removeprefix(scenario + "-")) if n.removeprefix(scenario + "-") in order
                                                else len(order), n)):
            view = under(summary, SAMPLES / "efficiency" / name)
            top = next((tops[id(r)] for r in view.reports if id(r) in tops), None)
            variant = name.removeprefix(scenario + "-") if name != scenario else name
            found.append(f"{variant}: {top.label.split(' (-')[0] if top else 'no claim'}")
        out.append(f"| `{scenario}` | {f['fix'] if f else '-'} | {times} | {_work(f) if f else ''} | {'; '.join(found)} |")
    return out


def record_shapes(summary) -> list[str]:
    """What ``record_shapes=True`` cost each variant of ``efficiency/`` (``fixes.jsonl``: the profiled step with shapes
    less the profiled step without), those beyond half a millisecond named."""
    moved = []
    for f in _jsonl(SAMPLES / "efficiency" / "fixes.jsonl"):
        for v, t in f["variants"].items():
            moved.append((t["shapes_ms_per_step"] - t["profiled_ms_per_step"], f"{f['scenario']}/{v}"))
    big = sorted((m for m in moved if abs(m[0]) > 0.5), key=lambda m: -abs(m[0]))
    small = max(abs(d) for d, _ in moved if abs(d) <= 0.5)
    named = ", ".join(f"{name} {d:+.1f} ms" for d, name in big)
    return [f"`record_shapes=True` against the same profiled loop without it: within {small:.1f} ms a step in "
            f"{len(moved) - len(big)} of {len(moved)} variants" + (f"; {named}." if big else ".")]
