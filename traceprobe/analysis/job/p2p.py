"""Point-to-point transfers (send/recv) across ranks: which kernel ran which transfer, and the pairs.

Pipeline parallelism moves activations and gradients between stages with ``send``/``recv``; torch issues
them through NCCL's grouped calls (``batch_isend_irecv``, ``nccl:coalesced``), so one ``SendRecv`` kernel may
run several transfers, and its name says neither the peer nor the direction. The host op says both: torch's
``record_param_comms`` of a point-to-point call carries ``Collective name`` (``send`` / ``recv``) and the peer
(a send's ``Dst Rank``, a receive's ``Src Rank``: the peer's rank in the process group, mapped to its global rank
through the group's ``pg_config`` members, in increasing order as ``new_group`` numbers them).

Definitions (quoted by docs/measures.md):

- a kernel's *transfers*: the point-to-point host ops of its launching thread that started after the launch of
  the thread's previous point-to-point kernel and at or before its own launch (torch records each call's op, then
  launches the group's one kernel); written ``send:3;recv:1`` (direction and global peer) in the collective
  table's ``p2p`` column.
- *pairing* (NCCL's rule: the operations between two ranks of a communicator complete in the order they were
  issued): within each process group, the n-th send of rank a to rank b and the n-th receive of rank b from rank
  a are one transfer. A kernel of either side cannot end before both have started: the receive waits for its
  sender (a pipeline bubble where the sender's stage is late), the send for its receiver. Where the two ranks of a
  direction hold different counts, that direction is not paired.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...reading import Trace
from ..device.busy import host_thread_codes
from ..host.launch_links import first_match, launch_rows
from ..memo import host_column

P2P_TYPES = ("send", "recv")
"""``Collective name`` values of point-to-point host ops."""

PAIR_COLUMNS = ["pg", "seq", "rank", "start_ns", "end_ns"]


def kernel_transfers(trace: Trace, rows: np.ndarray, pg_members: dict[str, list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """Per device row in ``rows`` (communication kernels), its transfers (module docstring) as ``send:3;recv:1``
    (str, ``""`` where none: a collective, or a trace without point-to-point args), and their process group's name
    (str, ``""`` where none)."""
    out = np.full(rows.size, "", dtype=object)
    group = np.full(rows.size, "", dtype=object)
    a = trace.collective_args
    if a.empty or rows.size == 0 or "dst_rank" not in a.columns:
        return out, group
    kind = a["collective"].to_numpy(dtype=object)
    peer = np.where(kind == "send", a["dst_rank"].to_numpy(np.int64), a["src_rank"].to_numpy(np.int64))
    ops = np.flatnonzero((a["side"].to_numpy(dtype=object) == "host") & np.isin(kind, P2P_TYPES) & (peer >= 0))
    if ops.size == 0:
        return out, group
    host_row = first_match(host_column(trace, "external_id"), a["external_id"].to_numpy(np.int64)[ops])
    ops, host_row = ops[host_row >= 0], host_row[host_row >= 0]
    launch = launch_rows(trace)[rows]
    if ops.size == 0 or not (launch >= 0).any():
        return out, group
    threads = host_thread_codes(trace)
    starts = host_column(trace, "start_ns")
    pgs = a["pg_name"].to_numpy(dtype=object)[ops]
    g_peer = peer[ops].copy()
    for name in set(pgs.tolist()):  # (group rank -> global rank, one pass per process group)
        m = np.asarray(pg_members.get(str(name), []), dtype=np.int64)
        sel = (pgs == name) & (g_peer >= 0) & (g_peer < m.size)
        g_peer[sel] = m[g_peer[sel]]
    text = pd.Series(kind[ops].astype(str), dtype=object) + ":" + pd.Series(g_peer.astype(str), dtype=object)
    k_thread = np.where(launch >= 0, threads[np.maximum(launch, 0)], -1)
    k_start = np.where(launch >= 0, starts[np.maximum(launch, 0)], -1)
    o_thread, o_start = threads[host_row], starts[host_row]
    kernel, op = [], []
    for th in np.unique(o_thread).tolist():  # (one pass per launching thread: a handful)
        ks = np.flatnonzero(k_thread == th)
        if ks.size == 0:
            continue
        ks = ks[np.argsort(k_start[ks], kind="stable")]
        sel = np.flatnonzero(o_thread == th)
        sel = sel[np.argsort(o_start[sel], kind="stable")]
        at = np.searchsorted(k_start[ks], o_start[sel], "left")  # the first launch at or after the op's start
        ok = at < ks.size
        kernel.append(ks[at[ok]])
        op.append(sel[ok])
    if not kernel:
        return out, group
    k_of, o_of = np.concatenate(kernel), np.concatenate(op)
    o_of = o_of[np.lexsort((o_start[o_of], k_of))]  # (each kernel's ops in the order they were called)
    k_of = np.sort(k_of, kind="stable")
    joined = pd.DataFrame({"t": text.to_numpy()[o_of], "pg": pgs[o_of].astype(str)}).groupby(k_of, sort=True).agg(
        t=("t", ";".join), pg=("pg", "last"))
    rows = joined.index.to_numpy(np.int64)
    out[rows], group[rows] = joined["t"].to_numpy(dtype=object), joined["pg"].to_numpy(dtype=object)
    return out, group


def pair_rows(k: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """The point-to-point transfers of one window's ranks, paired (module docstring).

    Args:
        k: collective table rows (:func:`.collectives.collective_table` with ``rank``) whose ``p2p`` is not empty.

    Returns:
        ``(pairs, unpaired)``: ``pairs`` one row per side of each transfer: ``pg`` (str, ``<group>:<src>-><dst>``),
        ``seq`` (int64, the transfer's number in that direction), ``rank``, ``start_ns``, ``end_ns`` (int64, the
        kernel that ran it): a :class:`.collectives.WindowCollectives` ``per_rank``-like table, two rows a transfer;
        ``unpaired`` one line per direction whose two ranks hold different counts.
    """
    if k.empty:
        return pd.DataFrame({c: pd.Series([], dtype=object if c == "pg" else np.int64) for c in PAIR_COLUMNS}), []
    parts = k["p2p"].astype(str).str.split(";")
    ex = k.assign(_t=parts).explode("_t", ignore_index=True)
    kind_peer = ex["_t"].str.split(":", n=1, expand=True)
    rank = ex["rank"].to_numpy(np.int64)
    peer = pd.Series(pd.to_numeric(kind_peer[1], errors="coerce")).fillna(-1).to_numpy(np.int64)
    send = (kind_peer[0] == "send").to_numpy()
    src, dst = np.where(send, rank, peer), np.where(send, peer, rank)
    ex = ex.assign(_src=src, _dst=dst, _send=send)
    ex = ex.sort_values(by=["rank", "start_ns"], kind="stable")
    ex["seq"] = ex.groupby(["pg", "_src", "_dst", "_send"]).cumcount().to_numpy(np.int64)
    counts = ex.groupby(["pg", "_src", "_dst", "_send"]).size().unstack("_send", fill_value=0)
    unpaired: list[str] = []
    good = set()
    sends = counts[True] if True in counts.columns else pd.Series(0, index=counts.index)
    recvs = counts[False] if False in counts.columns else pd.Series(0, index=counts.index)
    keys: list[tuple] = list(counts.index)
    for (pg, s, d), ns, nr in zip(keys, sends.tolist(), recvs.tolist()):  # (one per direction of a pair of ranks)
        if ns == nr and ns > 0:
            good.add((pg, s, d))
        else:
            unpaired.append(f"process group {pg!r}: rank {s} sent {ns} to rank {d}, which received {nr}: not paired")
    kept: pd.DataFrame = ex.loc[pd.MultiIndex.from_arrays([ex["pg"], ex["_src"], ex["_dst"]]).isin(list(good))]
    col = {c: kept[c].to_numpy() for c in ("pg", "_src", "_dst", "seq", "rank", "start_ns", "end_ns")}
    label = pd.Series(col["pg"].astype(str), dtype=object) + ":" + col["_src"].astype(str) + "->" + col["_dst"].astype(str)
    out = pd.DataFrame({"pg": label.to_numpy(dtype=object), "seq": col["seq"].astype(np.int64), "rank": col["rank"].astype(np.int64),
                        "start_ns": col["start_ns"].astype(np.int64), "end_ns": col["end_ns"].astype(np.int64)})
    return out.sort_values(by=["pg", "seq", "rank"], kind="stable").reset_index(drop=True), unpaired
