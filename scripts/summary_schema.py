#!/usr/bin/env python3
"""Write docs/summary_schema.json: the JSON Schema of traceprobe's summaries, generated from their msgspec structs
(:func:`traceprobe.summary_file.json_schema`). tests/test_summaries.py checks the file is current.

Usage::

    python scripts/summary_schema.py [--output docs/summary_schema.json]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from traceprobe.fileio import atomic_write
from traceprobe.summary_file import json_schema


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--output", default=str(Path(__file__).resolve().parent.parent / "docs" / "summary_schema.json"))
    args = ap.parse_args()
    atomic_write(args.output, json.dumps(json_schema(), indent=1) + "\n")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
