"""The window's ranked claims on a track of their own in a native Perfetto trace (``traceprobe claims``).

The claims are each trace's first-screen claims (:func:`.actions.tops_by_path`: the JSON document's ``top_claims``, in
the same words as the text, Markdown and TSV views). They are known once every trace of a run is analysed (a window's
what-ifs replay its ranks together), after :func:`.perfetto.write_perfetto` wrote the trace where it was analysed; so
they go on a packet sequence of their own (:data:`CLAIMS_SEQ`, with its own interned names) after the rest of the file
(:func:`add_claims` appends them; :func:`.perfetto.write_perfetto` writes them last where it is given them): one slice
per claim over the window, ranked (the first outermost), with the debug annotations ``rank`` (1 first), ``do`` (its
action), ``figure`` (its figure per step), ``gain_ns`` (what it would give back in the window) and ``value`` (that as a
share of the window). All ranks of a window in one file (``export --merge-ranks``, :mod:`.perfetto_ranks`): each rank's
claim, one slice per distinct claim (:func:`window_claims`), the largest gain first, with ``ranks`` (the ranks whose
claim it is: ``0, 1``) beside the rest.
"""

from __future__ import annotations

import gzip
import shutil
from collections.abc import Sequence
from pathlib import Path

from ..fileio import atomic_open
from .actions import Top

CLAIMS_TRACK = "traceprobe claims"
"""The name of the claims' track."""
CLAIMS_SEQ, CLAIMS_UUID = 2, 1 << 48
"""The claims' packet sequence and track uuid, apart from the rest of the file's (:mod:`.perfetto`: sequence 1, small uuids)."""
CLAIM_ANNOTATIONS = ("rank", "do", "figure", "gain_ns", "value", "ranks")
"""The debug annotations of a claim's slice (module doc; ``ranks`` only where the file holds several ranks)."""


def window_claims(by_rank: Sequence[tuple[int, Top]]) -> tuple[list[Top], list[str]]:
    """The claims of a window of several ranks, for :func:`claims_packets`: each distinct claim (its words: label,
    action, figure) once, ranked by its gain in the window (ns, the largest first; then by its first rank), and beside
    each the ranks whose claim it is (``"0, 1"``), from ``(rank, claim)`` pairs (each rank's first-screen claim,
    :func:`.actions.tops_by_path`)."""
    held: dict[tuple[str, str, str], tuple[Top, list[int]]] = {}
    for rank, top in sorted(by_rank, key=lambda x: x[0]):
        held.setdefault((top.label, top.do, top.figure), (top, []))[1].append(int(rank))
    order = sorted(held.values(), key=lambda v: (-float(v[0].gain_ns), v[1][0]))
    return [t for t, _ in order], [", ".join(map(str, r)) for _, r in order]


def claims_packets(claims: Sequence[Top], window: tuple[int, int], ranks: Sequence[str] = ()) -> bytes:
    """The serialized packets of the claims' track (module doc) over ``window`` (int ns, [start, end)); empty where there
    is no claim or no window. ``ranks``: per claim, the ranks whose claim it is (:func:`window_claims`), written as the
    ``ranks`` annotation; none: not written (one trace)."""
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb
    from perfetto.trace_builder.proto_builder import TraceProtoBuilder

    lo, hi = int(window[0]), int(window[1])
    if not claims or hi <= lo:
        return b""
    builder = TraceProtoBuilder()
    pkt = builder.add_packet()
    pkt.trusted_packet_sequence_id = CLAIMS_SEQ
    pkt.sequence_flags = pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
    ids = {n: i + 1 for i, n in enumerate(CLAIM_ANNOTATIONS) if n != "ranks" or ranks}
    for n, iid in ids.items():
        pkt.interned_data.debug_annotation_names.add(iid=iid, name=n)
    pkt.track_descriptor.uuid = CLAIMS_UUID
    pkt.track_descriptor.name = CLAIMS_TRACK
    for i, c in enumerate(claims):  # (the first claim outermost: opened first, closed last)
        pkt = builder.add_packet()
        pkt.timestamp, pkt.trusted_packet_sequence_id = lo, CLAIMS_SEQ
        pkt.sequence_flags = pb.TracePacket.SEQ_NEEDS_INCREMENTAL_STATE
        pkt.interned_data.event_names.add(iid=i + 1, name=c.label)
        te = pkt.track_event
        te.track_uuid, te.type, te.name_iid = CLAIMS_UUID, pb.TrackEvent.TYPE_SLICE_BEGIN, i + 1
        add = te.debug_annotations.add
        add(name_iid=ids["rank"], int_value=i + 1)
        add(name_iid=ids["do"], string_value=c.do)
        add(name_iid=ids["figure"], string_value=c.figure)
        add(name_iid=ids["gain_ns"], int_value=int(c.gain_ns))
        add(name_iid=ids["value"], double_value=float(c.share))
        if ranks:
            add(name_iid=ids["ranks"], string_value=str(ranks[i]))
    for _ in claims:
        pkt = builder.add_packet()
        pkt.timestamp, pkt.trusted_packet_sequence_id = hi, CLAIMS_SEQ
        pkt.sequence_flags = pb.TracePacket.SEQ_NEEDS_INCREMENTAL_STATE
        pkt.track_event.track_uuid, pkt.track_event.type = CLAIMS_UUID, pb.TrackEvent.TYPE_SLICE_END
    return builder.serialize()


def add_claims(path: str | Path, claims: Sequence[Top], window: tuple[int, int]) -> int:
    """Append the claims' track (module doc) to the Perfetto trace at ``path``, atomically (the file is written again
    through a temporary one: its bytes, then the claims' packets, a gzip member of their own where the name ends in
    ``.gz``); the number of claims written (0: none, nothing written).

    Raises:
        WriteError: the file could not be written (the old one is intact).
        OSError: it could not be read.
    """
    data = claims_packets(claims, window)
    if not data:
        return 0
    p = Path(path)
    if p.name.endswith(".gz"):
        data = gzip.compress(data, mtime=0)
    with atomic_open(p, compress=False) as f, open(p, "rb") as old:
        shutil.copyfileobj(old, f)
        f.write(data)
    return len(claims)
