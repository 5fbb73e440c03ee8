"""One large trace decoded by several processes at once, into the columns one process reads.

:func:`read_events_shared` forks ``processes - 1`` helpers. Every process, this one included, reads, inflates and
cuts the whole file (:func:`.decode.stream_pieces`: a seventh of the reading at 10^6 events) and decodes only its
share of the pieces, every n-th one (:class:`.decode._Builder` with a share); each helper sends its share's columns
back, and this process puts the pieces back in file order (:func:`merge`), numbering names, threads and
recorded shapes in order of first appearance as one process does. Nothing else is shared, and no helper outlives
the read.

Only what one process would read the same way is taken from the shares: where any process meets a piece that does
not decode on its own (a piece cut inside a string, which one process joins to the next; not JSON; not a list of
events), any error, or a helper that dies, the trace is read again in this process (:func:`.decode.read_events`),
which gives its columns, or its error, as always. A helper does not count its reading against the command's memory
limit (:mod:`.files`): this process reads the same bytes and counts them once.

The caller decides where this pays (the command's own process, with CPUs to spare: ``traceprobe.collect``);
forking a threaded program or a notebook is not safe, so the library's own :func:`~.trace.load_trace` decodes in
one process unless asked.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import TraceFormatError
from . import files
from .columns import Codes
from .decode import Decoded, Unsplittable, _Builder, decoded, read_events, stream_pieces
from .forked import die_with_parent


@dataclass
class Share:
    """What one process decoded of a trace: its pieces' columns.

    Attributes:
        pieces: the index of each of its pieces in the event list, in order.
        parts: each piece's columns (:meth:`.decode._Builder._columns`), ``name``, ``pid``, ``tid`` and ``args``
            coded by this share's own ``names``, ``threads`` and ``op_args``, ``comm`` a row of its own
            ``collectives``.
        comm_before: the share's collectives before each of its pieces.
        collectives, names, threads, op_args, count: as :class:`.decode.Decoded` has them, for this share alone
            (``count``: its pieces' events).
    """

    pieces: list[int]
    parts: list[dict[str, np.ndarray]]
    comm_before: list[int]
    collectives: dict[str, np.ndarray]
    names: list[Any]
    threads: list[Any]
    op_args: list[Any]
    count: int


def share_of(b: _Builder) -> Share:
    """The :class:`Share` a builder with a share holds."""
    parts, b.parts = b.parts, []
    return Share(b.pieces, parts, b.comm_before, b.collectives(), b.names.values, b.threads.values, b.op_args.values, b.count)


def _recode(codes: Codes, values: list[Any], lut: np.ndarray, local: np.ndarray) -> np.ndarray:
    """A piece's codes of a share (``local``, into ``values``) as ``codes`` numbers them: the values this share meets
    for the first time are looked up in the order they first appear in the piece, so a value new to ``codes`` gets
    the number one process would have given it. ``lut`` (a share's code -> ``codes``' code, -1 where not yet seen)
    is filled as it goes."""
    if local.size == 0:
        return local
    mapped = lut[local]
    if mapped.min() >= 0:  # (most pieces: every value seen before)
        return mapped.astype(local.dtype, copy=False)
    u, first = np.unique(local, return_index=True)
    new = lut[u] < 0
    for c in u[new][np.argsort(first[new], kind="stable")].tolist():
        lut[c] = codes[values[c]]
    return lut[local].astype(local.dtype)


def merge(shares: list[Share]) -> _Builder:
    """A builder holding every share's pieces in file order, as one process that decoded them all holds them: names,
    threads and shapes numbered in order of first appearance, the collectives in order and ``comm`` pointing at
    them, the events counted."""
    out = _Builder()
    luts = [{k: np.full(len(getattr(s, k)), -1, np.int32) for k in ("names", "threads", "op_args")} for s in shares]
    for _, i, j in sorted((piece, i, j) for i, s in enumerate(shares) for j, piece in enumerate(s.pieces)):
        s, lut = shares[i], luts[i]
        part = dict(s.parts[j])
        part["name"] = _recode(out.names, s.names, lut["names"], part["name"])
        n = len(part["pid"])  # (one process codes a piece's pids, then its tids)
        both = _recode(out.threads, s.threads, lut["threads"], np.concatenate([part["pid"], part["tid"]]))
        part["pid"], part["tid"] = both[:n], both[n:]
        if (rows := np.flatnonzero(part["args"] >= 0)).size:
            part["args"] = part["args"].copy()
            part["args"][rows] = _recode(out.op_args, s.op_args, lut["op_args"], part["args"][rows])
        if (m := int((part["comm"] >= 0).sum())):
            at = s.comm_before[j]
            part["comm"] = np.where(part["comm"] >= 0, part["comm"] - at + out.n_comm, -1)
            out.comm_parts.append({k: v[at:at + m] for k, v in s.collectives.items()})
            out.n_comm += m
        out.parts.append(part)
    out.count = sum(s.count for s in shares)
    return out


class _HelperFailed(Exception):
    """A helper that sent no share (it met an error, or died)."""


def _helper(path: str | Path, max_bytes: int | None, share: tuple[int, int], conn: Any, parent: int) -> None:
    """A forked helper's work: its share of the pieces, sent back (None where anything went wrong)."""
    die_with_parent(parent)
    files._SHARED[0] = None  # (this process reads what the command's process reads and counts)
    try:
        b = _Builder(share)
        stream_pieces(path, max_bytes if max_bytes is not None else 1 << 62, b)
        got: Share | None = share_of(b)
    except BaseException:  # noqa: BLE001 - any failure is the command process's to redo: it reads the trace again
        got = None
    try:
        if got is None:
            conn.send(None)
        else:  # (the arrays out of band: written from where they lie, read into buffers of their own; no pickled copy)
            buffers: list[pickle.PickleBuffer] = []
            head = pickle.dumps(got, protocol=5, buffer_callback=buffers.append)
            conn.send((head, [b.raw().nbytes for b in buffers]))
            for b in buffers:
                conn.send_bytes(b.raw())
    finally:
        conn.close()
        os._exit(0)  # (no teardown of what the fork copied)


def _received(conn: Any) -> Share:
    """A helper's share as :func:`_helper` sends it.

    Raises:
        _HelperFailed: it sent none; EOFError, OSError: it died.
    """
    got = conn.recv()
    if got is None:
        raise _HelperFailed
    head, sizes = got
    buffers = [bytearray(n) for n in sizes]
    for b in buffers:
        conn.recv_bytes_into(b)
    return pickle.loads(head, buffers=buffers)


def read_events_shared(path: str | Path, max_bytes: int | None = None, processes: int = 2) -> Decoded:
    """:func:`.decode.read_events`, the pieces decoded by ``processes`` processes (module docstring).

    Args:
        path: a local trace file (a URL is read in one process).
        max_bytes: as :func:`.decode.read_events`.
        processes: this one and its helpers (1: :func:`.decode.read_events`).

    Returns:
        the :class:`.decode.Decoded` one process reads, array for array.

    Raises:
        TraceFormatError: as :func:`.decode.read_events` (raised by it, in this process).
    """
    if processes < 2 or files.is_url(path):
        return read_events(path, max_bytes)
    ctx = multiprocessing.get_context("fork")
    helpers = []
    for k in range(1, processes):
        recv, send = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_helper, args=(path, max_bytes, (k, processes), send, os.getpid()), daemon=True)
        proc.start()
        send.close()
        helpers.append((proc, recv))
    try:
        own = _Builder((0, processes))
        head = stream_pieces(path, max_bytes, own)
        shares = [share_of(own)]
        shares += [_received(recv) for _, recv in helpers]
    except (TraceFormatError, Unsplittable, _HelperFailed, EOFError, OSError):
        shares = None
    finally:
        for proc, recv in helpers:
            recv.close()
            if proc.is_alive():
                proc.kill()
            proc.join()
    if shares is None:  # (read again whole: its columns, or its error, as one process reads them)
        files.release()
        return read_events(path, max_bytes)
    merged = merge(shares)
    del shares  # (the pieces' columns go once joined, as one process's do)
    return decoded(path, head, merged)
