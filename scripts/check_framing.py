"""Check the framing of every trace under some folders: backend names, training words, the verdicts' floor, warnings.

    python scripts/check_framing.py /path/to/TraceLens/tests/traces /path/to/HolisticTraceAnalysis/tests/data

For each trace that loads, the verdicts and notes of its report are checked:

- no device is named ``cuda:N`` on a ROCm or MTIA trace (``Trace.backend``);
- no training word (DDP, bucket, FSDP, optimizer, backward, gradient, DataParallel) on a trace that shows no
  training (:func:`traceprobe.analysis.host.training.training_evidence`);
- no copy, communication or stream-concurrency verdict on work under the floor
  (:func:`traceprobe.analysis.advice.verdicts.too_small`), read back from the figures the verdict judged;
- no Python warning while loading and analysing (warnings are turned into errors).

Prints one line per problem and exits 1 if there is any; files that are not traces are counted, not checked.
"""

from __future__ import annotations

import argparse
import re
import sys
import warnings
from pathlib import Path

from traceprobe import TraceFormatError, load_trace, overlap_report
from traceprobe.analysis.advice import verdicts as vd

TRAINING_WORDS = re.compile(r"DDP|DistributedDataParallel|FSDP|bucket|gradient|backward|optimizer|DataParallel", re.IGNORECASE)


def problems(path: Path) -> list[str]:
    """What is wrong with the framing of one trace (module doc); raises TraceFormatError for a file that is no trace."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        trace = load_trace(path)
        r = overlap_report(trace)
    out = []
    texts = [v.text for v in r.verdicts] + list(r.notes)
    if trace.backend != "cuda":
        out += [f"cuda device name on a {trace.backend} trace: {t[:160]}" for t in texts if re.search(r"\bcuda:\d", t)]
    if not r.training:
        out += [f"training word on a trace without training: {t[:160]}" for t in texts if TRAINING_WORDS.search(t)]
    busy = {int(d): int(b) for d, b in zip(r.devices.devices["device"], r.devices.devices["busy_ns"])}
    subject_device = {f"{r.backend}:{d}": d for d in busy}
    for v in r.verdicts:
        d = subject_device.get(v.subject.split(" ")[0])
        if v.figure == "stream_concurrency" and d is not None:
            row = r.stream_concurrency[r.stream_concurrency["device"] == d].iloc[0]
            judged, against = int(row["side_busy_ns"]), int(row["busy_ns"])
        elif v.figure == "copy_overlap" and d is not None:
            direction = v.subject.split(" ")[1]
            co = r.copy_overlap
            judged, against = int(co.loc[(co["device"] == d) & (co["direction"] == direction), "copy_ns"].to_numpy()[0]), busy.get(d, 0)
        elif v.figure == "comm_overlap" and d is not None:
            judged, against = int(r.comm_overlap.loc[r.comm_overlap["device"] == d, "comm_ns"].to_numpy()[0]), busy.get(d, 0)
        else:
            continue
        if vd.too_small(judged, against):
            out.append(f"verdict under the floor: {v.figure} {v.subject} on {judged} ns of {against} ns")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path, help="folders searched for *.json and *.json.gz (recursively)")
    args = parser.parse_args(argv)
    files = sorted(p for f in args.folders for p in f.rglob("*") if p.is_file() and p.name.endswith((".json", ".json.gz")))
    found, skipped = 0, 0
    for p in files:
        try:
            lines = problems(p)
        except TraceFormatError:
            skipped += 1
            continue
        except Warning as w:  # (turned into an error above)
            lines = [f"Python warning: {type(w).__name__}: {w}"]
        found += len(lines)
        for line in lines:
            print(f"{p}: {line}")
    print(f"{len(files) - skipped} traces checked, {skipped} files not traces, {found} problem(s)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
