#!/usr/bin/env python3
"""Write a SYNTHETIC distributed job: one Kineto trace per rank, with matching collectives.

Nothing here was recorded on a GPU; every trace says ``synthetic: ...`` in its
``traceName`` (see ``scripts/synth_trace.py``, which writes each rank).

What makes the ranks one job:

- one clock: every rank's events are placed on the same ``t0`` (as ranks of one
  job share the wall clock Kineto timestamps come from);
- matching collectives: the NCCL kernels of every rank, in time order, are the
  same list of collectives (same count, order, kind, ``In msg nelems``/``Out msg
  nelems``, ``dtype``, process group), with the args torch 2.x's Kineto writes on
  NCCL kernels: ``Collective name``, ``In msg nelems``, ``Out msg nelems``,
  ``Group size``, ``dtype``, ``In split size``, ``Out split size``, ``Process
  Group Name``, ``Process Group Description``, ``Process Group Ranks``. Process
  group ``0`` (``default_pg``) holds every rank; with an even number of ranks, 4 or more, a fifth of
  the collectives run in group ``1`` (``pairs``: ranks ``2i`` and ``2i+1``);
- collective sizes: each collective's whole tensor is drawn once, the same at any
  group size (an all-reduce's buffer, an all-gather's output, a reduce-scatter's
  input; the parts are the whole over the group size), as a model's parameters and
  gradients are whatever the ranks;
- collective timing: collective ``k`` ends at the same time on every rank of its
  group, ``transfer_k`` (5 µs and the whole tensor at :data:`BANDWIDTH`) after the last rank arrives (a rank arrives when its kernel
  could start on its NCCL stream); ranks that arrive earlier wait inside the
  kernel, so their kernel is longer, as NCCL kernels are;
- skew: every rank runs the same program (one compute timeline) and arrives at
  each collective within ``JITTER_NS`` of the others, except the ``skewed`` ranks
  (the last ones), which arrive late by ``skew_ns`` on average (uniform in
  [0.5, 1.5] x ``skew_ns``);
- ``distributedInfo``: ``rank``, ``world_size`` and ``pg_config``.

Each rank has one GPU (device 0) and at least 2 streams; the last stream runs
only NCCL kernels (other kernels drawn there move to a stream of their own).

Usage::

    python scripts/synth_trace.py --ranks 8 --events 100000 --skewed 2 -o /tmp/job8
"""

from __future__ import annotations

import os
import sys
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import synth_trace as st  # noqa: E402

COLLECTIVES = [  # Collective name, NCCL kernel (index into st.NCCL_KERNELS), share; the whole tensor (drawn) is an
    ("allreduce", 0, 0.6),  # all-reduce's In and Out, an all-gather's Out (its In: the whole / group size), a reduce-scatter's In
    ("allgather", 1, 0.2),
    ("reduce_scatter", 2, 0.2),
]
JITTER_NS = 20_000
"""Arrival at each collective varies by up to this much between ranks (ns)."""
BANDWIDTH = 100.0
"""Bytes per ns (GB/s) of a collective's transfer after the last rank arrives."""


def _has_pairs(ranks: int) -> bool:
    return ranks >= 4 and ranks % 2 == 0


def _groups(ranks: int, rank: int) -> list[dict]:
    pgs = [{"pg_name": "0", "pg_desc": "default_pg", "backend_config": "cuda:nccl", "pg_size": ranks, "ranks": list(range(ranks))}]
    if _has_pairs(ranks):
        pair = [rank - rank % 2, rank - rank % 2 + 1]
        pgs.append({"pg_name": "1", "pg_desc": "pairs", "backend_config": "cuda:nccl", "pg_size": 2, "ranks": pair})
    return pgs


def _args_text(name: str, n_in: int, n_out: int, pg: dict) -> str:
    return (f'"Collective name": "{name}", "In msg nelems": {n_in}, "Out msg nelems": {n_out}, "Group size": {pg["pg_size"]}, '
            f'"dtype": "BFloat16", "In split size": "[]", "Out split size": "[]", "Process Group Name": "{pg["pg_name"]}", '
            f'"Process Group Description": "{pg["pg_desc"]}", "Process Group Ranks": "{pg["ranks"]}"')


@dataclass
class JobPlan:
    """What every rank of a SYNTHETIC job shares, and each rank's collective times (:func:`plan_job`)."""

    cfg: st.Config
    timeline: st.Timeline
    t0_ns: int
    idx: np.ndarray
    """Rows of the timeline that are the NCCL kernels, in time order (one per collective)."""
    kind: np.ndarray
    n_in: np.ndarray
    n_out: np.ndarray
    in_pairs: np.ndarray
    arrive: np.ndarray
    """(ranks, collectives) arrival at each collective (ns from t0)."""
    end: np.ndarray
    """(ranks, collectives) end of each collective kernel (ns from t0)."""
    late: np.ndarray
    """(ranks, collectives) the skew in ``arrive`` (ns; 0 but on the ``skewed`` ranks)."""

    def start(self, r: int) -> np.ndarray:
        """Rank ``r``'s collective kernels' starts (ns from t0): its arrival, or the end of its previous collective."""
        return np.maximum(self.arrive[r], self._prev_end(r))

    def delay(self, r: int) -> np.ndarray:
        """How much later rank ``r``'s collective kernels started for its skew (ns, >= 0): its start minus what it
        would have been without the skew (its arrival less the skew, or the end of its previous collective)."""
        return self.start(r) - np.maximum(self.arrive[r] - self.late[r], self._prev_end(r))

    def _prev_end(self, r: int) -> np.ndarray:
        return np.concatenate([[np.iinfo(np.int64).min], self.end[r, :-1]])


def plan_job(cfg: st.Config, ranks: int, skewed: int = 1, skew_ns: int = 500_000) -> JobPlan:
    """The shared program and the collective times of every rank of a job (module docstring; :func:`write_job`).

    Raises:
        ValueError: as :func:`write_job`.
    """
    if ranks < 1 or not 0 <= skewed <= ranks:
        raise ValueError("--ranks must be at least 1 and --skewed between 0 and --ranks")
    cfg = replace(cfg, devices=1, streams=max(cfg.streams, 2), world_size=ranks)
    p = st.plan(cfg)
    if p.nccl == 0:
        raise ValueError("whole-job mode needs NCCL kernels: raise --nccl-share or --events")
    rng = np.random.default_rng([cfg.seed, 2])
    t0_ns = int(rng.integers(1_000_000_000_000_000, 5_000_000_000_000_000))
    K = p.nccl
    kind = rng.choice(len(COLLECTIVES), K, p=[c[2] for c in COLLECTIVES])
    # each collective's whole tensor (elements) is the same at any group size, as a model's parameters and gradients are:
    # at thousands of ranks an all-gather gathers the same tensor in smaller parts, it does not grow with the group
    whole = np.left_shift(1, rng.integers(14, 25, K)).astype(np.int64)
    in_pairs = (rng.random(K) < 0.2) if _has_pairs(ranks) else np.zeros(K, dtype=bool)
    size = np.where(in_pairs, 2, ranks)
    part = np.maximum(whole // size, 1)
    n_in, n_out = np.where(kind == 1, part, whole), np.where(kind == 2, part, whole)
    transfer = (5_000 + whole * 2 / BANDWIDTH).astype(np.int64)  # bf16: 2 bytes per element; a ring's time barely grows with its group

    # each rank's timeline; the NCCL kernels' arrival times, in time order
    tl = st.build_timeline(cfg, p)  # every rank runs the same program
    nccl = tl.dev_name >= len(st.KERNELS)
    tl.dev_stream = np.where(~nccl & (tl.dev_stream == st.stream_id(0, cfg.streams - 1)), st.stream_id(0, cfg.streams), tl.dev_stream)
    idx = np.flatnonzero(nccl)
    idx = idx[np.argsort(tl.dev_start[idx], kind="stable")]
    late = np.zeros((ranks, K))
    if skewed:
        late[ranks - skewed :] = rng.uniform(0.5, 1.5, (skewed, K)) * skew_ns
    late = late.astype(np.int64)
    arrive = tl.dev_start[idx][None, :] + rng.integers(0, JITTER_NS, (ranks, K)) + late

    # collective k ends transfer_k after its group's last arrival, and not before k-1 ended (one NCCL stream)
    end = np.empty((ranks, K), np.int64)
    prev = np.full(ranks, np.iinfo(np.int64).min)
    for k in range(K):  # a max-plus recurrence over collectives, vectorized over ranks
        s = np.maximum(arrive[:, k], prev)
        s = np.repeat(np.maximum(s[0::2], s[1::2]), 2) if in_pairs[k] else np.full(ranks, s.max())
        end[:, k] = s + transfer[k]
        prev = end[:, k]

    return JobPlan(cfg, tl, t0_ns, idx, kind, n_in, n_out, in_pairs, arrive, end, late)


def write_job(cfg: st.Config, ranks: int, folder: str | Path, skewed: int = 1, skew_ns: int = 500_000,
              gz: bool = True, gzip_level: int = 1, jobs: int | None = None) -> list[Path]:
    """Write ``ranks`` rank traces of ``cfg.events`` events each into ``folder`` (``rank<R>.pt.trace.json[.gz]``).

    The ranks are written by ``jobs`` processes (default: one per CPU). ``cfg.seed`` seeds the job. Every rank runs the same program (one timeline);
    ranks differ in their arrival at each collective (up to :data:`JITTER_NS`, plus
    the skew of the skewed ranks), hence in the NCCL kernels' start and duration,
    and in ``distributedInfo``.

    Raises:
        ValueError: fewer than 1 rank, more skewed ranks than ranks, or a ``cfg``
            with no NCCL kernel (``nccl_share`` 0) or one stream.
    """
    jp = plan_job(cfg, ranks, skewed, skew_ns)
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    n = max(1, min(jobs or os.cpu_count() or 1, ranks))
    for lo in range(0, ranks, WRITE_CHUNK):  # (each rank's timeline is made for its write: a chunk of them held at once)
        paths += _write_ranks(jp, range(lo, min(lo + WRITE_CHUNK, ranks)), ranks, out, gz, gzip_level, n)
    return paths


WRITE_CHUNK = 256
"""Ranks whose timelines :func:`write_job` holds at once (4,096 ranks of 20,000 events held together were killed for
memory on a 23 GB machine: every task's timeline was pickled at once for the pool)."""


def _write_ranks(jp: JobPlan, ranks_of: range, ranks: int, out: Path, gz: bool, gzip_level: int, n: int) -> list[Path]:
    """Write the traces of the ranks ``ranks_of`` of the job ``jp`` (:func:`write_job`) with ``n`` processes."""
    cfg, t0_ns, idx, kind, n_in, n_out, in_pairs, end = jp.cfg, jp.t0_ns, jp.idx, jp.kind, jp.n_in, jp.n_out, jp.in_pairs, jp.end
    K = idx.size
    paths, writes = [], []
    for r in ranks_of:
        tl = replace(jp.timeline)
        start = jp.start(r)
        tl.dev_start = tl.dev_start.copy()
        tl.dev_dur = tl.dev_dur.copy()
        tl.dev_start[idx] = start
        tl.dev_dur[idx] = end[r] - start
        tl.dev_name = tl.dev_name.copy()
        tl.dev_name[idx] = len(st.KERNELS) + np.array([c[1] for c in COLLECTIVES])[kind]
        pgs = _groups(ranks, r)
        texts = [_args_text(COLLECTIVES[kind[k]][0], int(n_in[k]), int(n_out[k]), pgs[1 if in_pairs[k] else 0]) for k in range(K)]
        tl.dev_comm = np.full(len(tl.dev_start), -1, np.int64)
        tl.dev_comm[idx] = np.arange(K)
        tl.trace_end = max(tl.trace_end, int(end[r].max()))
        path = out / f"rank{r}.pt.trace.json{'.gz' if gz else ''}"
        writes.append((replace(cfg, rank=r), path, tl, t0_ns, texts, pgs, gzip_level))
        paths.append(path)
    if n == 1:
        for w in writes:
            _write_rank(w)
    else:
        with ProcessPoolExecutor(n) as pool:
            list(pool.map(_write_rank, writes))
    return paths


TEMPLATES = 4
"""Rank traces written and analysed for a job of summaries (:func:`write_summaries`): the last is late when any rank is."""


def write_summaries(cfg: st.Config, ranks: int, folder: str | Path, skewed: int = 1, skew_ns: int = 500_000,
                    job: str = "synthetic-job") -> list[Path]:
    """Write a SYNTHETIC job of ``ranks`` rank summaries (``rank<R>.summary.json``, traceprobe's summary format) into ``folder``.

    Nothing is recorded and only :data:`TEMPLATES` ranks are real traces: a job of that many ranks is written
    (:func:`write_job`, same ``cfg``, so the same program and the same collectives) and analysed; every rank of the
    big job takes the summary of one of them (a late one for the ``skewed`` last ranks, else one of the others in
    turn). What the cross-rank analysis reads of a rank is then made to follow the big job's plan (:func:`plan_job`:
    arrival jitter, skew, each collective ending together on its group):

    - ``rank``, and its collective kernels' start and end (``tables.collectives``; ``group_size`` of group ``0``:
      ``ranks``);
    - its exposed collective communication (``tables.exposed_comm``): the whole of each of its collective kernels, as
      if the rank ran nothing beside them; so its exposed wait and exposed transfer (:mod:`traceprobe.analysis.job.causes`)
      are its wait (until the last rank of the group arrives) and its transfer (after) in the plan;
    - on a skewed rank, the compute that made it late: before each collective, :meth:`JobPlan.delay` ns more compute
      (how much later its kernel started for its skew), added to the compute of the step its kernel starts in (by the
      template's steps' GPU intervals; ``tables.breakdown_steps``), of its window (``tables.breakdown``), and to its
      compute kernel with the most time (``tables.kernels``: ``total_ns``, ``mean_ns``).

    Everything else in a rank's summary is its template's (its steps, the other kernels and breakdown figures, among them
    ``exposed_comm_ns``, its idle causes, findings and headline): the per-rank distributions come from the templates.
    A rank costs a few list copies (no DataFrame): 1,024 ranks are written in a few seconds.

    Raises:
        ValueError: as :func:`write_job`.
    """
    import tempfile

    import msgspec

    from traceprobe.analysis.job.summaries import to_summary
    from traceprobe.analysis.per_trace import overlap_report
    from traceprobe.reading import load_trace
    from traceprobe.summary_file import encode

    big = plan_job(cfg, ranks, skewed, skew_ns)
    t = min(TEMPLATES, ranks)
    if _has_pairs(ranks) != _has_pairs(t):  # the templates hold the same process groups as the job
        t = 4 if ranks >= 4 else ranks
    late = 1 if skewed else 0
    with tempfile.TemporaryDirectory() as tmp:
        paths = write_job(cfg, t, tmp, skewed=late, skew_ns=skew_ns, gz=False, jobs=1)
        docs = [to_summary(overlap_report(load_trace(p)), job, source="") for p in paths]
    normal = list(range(t - late)) or [0]
    K = big.idx.size
    colls = []
    for d in docs:  # each template's collectives, with the job's group size
        c = d.tables["collectives"]
        if len(_col(c, "pg")) != K:
            raise ValueError(f"template holds {len(_col(c, 'pg'))} collectives, the job {K}")
        colls.append(_with(c, group_size=[ranks if g == "0" else n for g, n in zip(_col(c, "pg"), _col(c, "group_size"))]))
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for r in range(ranks):
        i = t - 1 if late and r >= ranks - skewed else normal[r % len(normal)]
        d = docs[i]
        start = big.t0_ns + big.start(r)
        s, e = start.tolist(), (big.t0_ns + big.end[r]).tolist()
        members = {"0": ",".join(map(str, range(ranks))), "1": f"{r - r % 2},{r - r % 2 + 1}"}  # (the job's groups, not the template's)
        listed = [members.get(g, "") for g in _col(colls[i], "pg")]  # (each group's members once: the summary's pg_members)
        uniq = list(dict.fromkeys(listed))
        pg_ranks = {"pg_ranks": [uniq.index(m) for m in listed]} if "pg_ranks" in colls[i].columns else {}
        more = {"pg_members": type(colls[i])(["pg_ranks"], ["object"], [uniq])} if pg_ranks else {}
        tables = {**d.tables, **more, "collectives": _with(colls[i], rank=[r] * K, start_ns=s, end_ns=e, **pg_ranks),
                  "exposed_comm": type(colls[i])(["device", "start_ns", "end_ns"], ["int64"] * 3, [_col(colls[i], "device"), s, e])}
        if big.late[r].any():
            tables.update(_more_compute(d.tables, start, big.delay(r)))
        path = out / f"rank{r}.summary.json"
        path.write_bytes(encode(msgspec.structs.replace(d, rank=r, tables=tables)))
        written.append(path)
    return written


def _col(t, name: str) -> list:
    """Column ``name`` of a summary's table (:class:`traceprobe.summary_file.Table`)."""
    return t.data[t.columns.index(name)]


def _with(t, **cols: list):
    """Summary table ``t`` with the columns named replaced by the lists given."""
    return type(t)(t.columns, t.dtypes, [cols.get(c, v) for c, v in zip(t.columns, t.data)])


def _more_compute(tables: dict, start_ns: np.ndarray, delay: np.ndarray) -> dict:
    """A skewed rank's ``breakdown_steps``, ``breakdown`` and ``kernels`` (its template's: one device) with ``delay[k]``
    ns more compute before its collective ``k``, which starts at ``start_ns[k]`` (:func:`write_summaries`)."""
    from traceprobe.reading.comm_kernels import COMM_KERNEL_RE

    steps, bs, b, k = (tables[n] for n in ("steps", "breakdown_steps", "breakdown", "kernels"))
    gpu_start = np.asarray(_col(steps, "gpu_start_ns"), np.int64)
    on = gpu_start >= 0  # (-1: a step that launched no device work)
    at = np.maximum(np.searchsorted(gpu_start[on], start_ns, side="right") - 1, 0)  # (before the first step: the first)
    per_step = dict(zip(np.asarray(_col(steps, "step"))[on].tolist(), np.bincount(at, delay, minlength=int(on.sum())).astype(np.int64).tolist()))
    more = int(delay.sum())
    total, count = list(_col(k, "total_ns")), _col(k, "count")
    j = max((i for i, (kind, name) in enumerate(zip(_col(k, "kind"), _col(k, "name")))
             if kind == "kernel" and not COMM_KERNEL_RE.search(name)), key=lambda i: total[i])
    total[j] += more
    mean = list(_col(k, "mean_ns"))
    mean[j] = total[j] // count[j]
    return {"breakdown_steps": _with(bs, compute_ns=[c + per_step.get(s, 0) for s, c in zip(_col(bs, "step"), _col(bs, "compute_ns"))]),
            "breakdown": _with(b, compute_ns=[c + more for c in _col(b, "compute_ns")]),
            "kernels": _with(k, total_ns=total, mean_ns=mean)}


def _write_rank(w: tuple) -> None:
    cfg, path, tl, t0_ns, texts, pgs, gzip_level = w
    st.write(cfg, path, gzip_level=gzip_level, timeline=tl, t0_ns=t0_ns, collectives=texts, pg_config=pgs)


def main(argv: list[str] | None = None) -> int:
    """``python scripts/synth_job.py --ranks N --summaries -o FOLDER``: a SYNTHETIC job of N rank summaries
    (:func:`write_summaries`); without ``--summaries``, N rank traces (:func:`write_job`, as ``synth_trace.py --ranks``)."""
    import argparse
    import time

    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("--ranks", type=int, required=True)
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--summaries", action="store_true", help="write summaries (rank<R>.summary.json), not traces")
    ap.add_argument("--events", type=int, default=20_000, help="events per rank trace (of each template with --summaries)")
    ap.add_argument("--skewed", type=int, default=1, help="ranks that arrive late at every collective")
    ap.add_argument("--skew-us", type=float, default=500.0, help="mean late arrival of the skewed ranks, µs")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    cfg = st.Config(events=a.events, seed=a.seed)
    t = time.perf_counter()
    if a.summaries:
        paths = write_summaries(cfg, a.ranks, a.output, skewed=a.skewed, skew_ns=int(a.skew_us * 1000))
    else:
        paths = write_job(cfg, a.ranks, a.output, skewed=a.skewed, skew_ns=int(a.skew_us * 1000))
    size = sum(p.stat().st_size for p in paths)
    print(f"wrote {len(paths)} {'summaries' if a.summaries else 'traces'} ({size / 1e6:,.1f} MB) to {a.output} "
          f"in {time.perf_counter() - t:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
