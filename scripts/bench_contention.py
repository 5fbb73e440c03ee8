#!/usr/bin/env python3
"""The contention relief's slowdowns at scale: CPU time and output size against the ranks, where every rank is late
somewhere.

Builds SYNTHETIC arrays of a window (made up, not recorded) of ``--ranks`` ranks, each running ``--collectives``
all-reduces on its NCCL stream and ``--kernels`` compute kernels of a few names on its compute stream between them;
each collective's last arrival is a random rank (jitter only, no straggler: the case where the pairs of ranks, the
one charged a wait and the one that waited, grow as the ranks squared), and the waiting ranks' kernels under a wait
run 20% slower. Times :func:`traceprobe.analysis.causal.contention.slowdowns` (and, with ``--reference``, the first
version's pass per pair of ranks, ``tests/contention_reference.py``, up to the ranks given) and checks that both give
the same slowdowns.

Usage::

    python scripts/bench_contention.py --ranks 64 256 1024 4096 --reference 256
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def window(ranks: int, collectives: int, kernels: int, seed: int = 0) -> tuple:
    """``(start, end, d, code, k_rank, comm, lane, waits)`` of the SYNTHETIC window (module docstring), ops by rank."""
    from traceprobe.analysis.causal.contention import wait_spans

    rng = np.random.default_rng(seed)
    step = 10_000_000  # (10 ms between collectives)
    per = kernels // collectives
    c_start = np.arange(collectives, dtype=np.int64) * step
    arrive = c_start[None, :] + rng.integers(0, 2_000_000, (ranks, collectives))  # (each rank's arrival, ns)
    last = arrive.max(axis=0)
    c_end = last + 500_000
    k_start = c_start[:, None] - step + 1_000_000 + np.arange(per, dtype=np.int64)[None, :] * (step // (per + 1))
    k_start = np.broadcast_to(k_start.ravel(), (ranks, collectives * per)) + rng.integers(0, 1_000, (ranks, collectives * per))
    k_code = np.tile(np.arange(collectives * per) % 4, (ranks, 1))
    k_d = np.full(k_start.shape, 400_000, np.int64) + rng.integers(0, 10_000, k_start.shape)
    k_d = np.where(k_start % step > 9_000_000 - 2_000_000, (k_d * 1.2).astype(np.int64), k_d)  # (slowed beside a wait)
    start = np.concatenate([np.concatenate([k_start[r], arrive[r]]) for r in range(ranks)]).astype(np.int64)
    d = np.concatenate([np.concatenate([k_d[r], c_end - arrive[r]]) for r in range(ranks)]).astype(np.int64)
    end = start + d
    n = collectives * per + collectives
    k_rank = np.repeat(np.arange(ranks, dtype=np.int64), n)
    comm = np.tile(np.r_[np.zeros(collectives * per, bool), np.ones(collectives, bool)], ranks)
    code = np.concatenate([np.concatenate([k_code[r], np.full(collectives, 4)]) for r in range(ranks)]).astype(np.int64)
    lane = k_rank * 2 + comm
    mem_op = np.flatnonzero(comm)
    mem_group = np.tile(np.arange(collectives, dtype=np.int64), ranks)
    return start, end, d, code, k_rank, comm, lane, wait_spans(start, end, k_rank, mem_op, mem_group)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, nargs="+", default=[64, 256, 1024])
    ap.add_argument("--collectives", type=int, default=100, help="collectives a rank")
    ap.add_argument("--kernels", type=int, default=2000, help="compute kernels a rank")
    ap.add_argument("--reference", type=int, default=0, help="also time the pass per pair of ranks up to this many ranks")
    a = ap.parse_args(argv)
    from traceprobe.analysis.causal.contention import slowdowns

    sys.path.insert(0, str(HERE.parent / "tests"))
    print(f"{'ranks':>6} {'waits':>9} {'pairs':>9} {'slowed':>9} {'one pass s':>11} {'per pair s':>11}")
    for r in a.ranks:
        start, end, d, code, k_rank, comm, lane, w = window(r, a.collectives, a.kernels)
        t = time.process_time()
        got = slowdowns(start, end, d, code, k_rank, comm, w, lane)
        one = time.process_time() - t
        pairs = len(set(zip(w[3].tolist(), k_rank[w[0]].tolist())))
        ref = "-"
        if r <= a.reference:
            from contention_reference import slowdowns_by_pair  # pyright: ignore[reportMissingImports]

            t = time.process_time()
            want = slowdowns_by_pair(start, end, d, code, k_rank, comm, w)
            ref = f"{time.process_time() - t:.2f}"
            if sorted(want) != sorted(set(got.rank.tolist())) or any(got[i].tolist() != v.tolist() for i, v in want.items()):
                print(f"{r} ranks: the one pass and the pass per pair differ")
                return 1
        print(f"{r:>6} {w[0].size:>9,} {pairs:>9,} {got.ns.size:>9,} {one:>11.2f} {ref:>11}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
