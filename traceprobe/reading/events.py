"""The structs the JSON of a trace's events is decoded into (``msgspec``): only the fields traceprobe reads.

Strict structs (:data:`_STRICT`): ``ph`` a tagged union, every phase but X, B and E an empty struct, each field of
the type Kineto writes; tolerant ones (:data:`_TOLERANT`) for a piece the strict ones refuse, every field ``Any``,
checked later column by column (:mod:`.decode`). ``ts`` and ``dur`` are kept as their JSON text.
"""

from __future__ import annotations

from functools import reduce
from operator import attrgetter, or_
from typing import Any

import msgspec

from .columns import NO_ID, PH_CODES

_EMPTY_RAW = msgspec.Raw(b"")
_ARGS = [  # (field, JSON key, strict type, default): the args traceprobe reads
    ("device", "device", int | str, NO_ID), ("stream", "stream", int | str, NO_ID),  # ids are ints; a label (ROCm's
    ("correlation", "correlation", int | str, NO_ID), ("bytes", "bytes", int | str, NO_ID),  # "stream": "0x0") is no id
    ("external_id", "External id", int | str, NO_ID),
    # collectives (torch's record_param_comms, and NCCL kernels of newer torch)
    ("collective", "Collective name", str | None, None), ("in_nelems", "In msg nelems", int, NO_ID),
    ("out_nelems", "Out msg nelems", int, NO_ID), ("group_size", "Group size", int, NO_ID), ("dtype", "dtype", str | None, None),
    ("pg_name", "Process Group Name", str | None, None),
    ("src_rank", "Src Rank", int, NO_ID), ("dst_rank", "Dst Rank", int, NO_ID),  # point-to-point: the peer (group rank)
    ("direction", "direction", Any, None),  # MTIA's dma_request: HOST_TO_DEVICE, DEVICE_TO_HOST, ...
    # cuda_sync: the cudaEventRecord call an event wait or sync waited for, and its stream (-1 where Kineto did not know)
    ("wait_correlation", "wait_on_cuda_event_record_corr_id", int | str, NO_ID), ("wait_stream", "wait_on_stream", int | str, NO_ID),
    # a host op's recorded shapes (record_shapes=True) and Kineto's FLOPs (with_flops=True): kept as JSON text, read once per
    # distinct tuple (:data:`OP_ARGS`), and only in pieces that hold them
    ("input_dims", "Input Dims", msgspec.Raw, _EMPTY_RAW), ("input_type", "Input type", msgspec.Raw, _EMPTY_RAW),
    ("input_strides", "Input Strides", msgspec.Raw, _EMPTY_RAW), ("concrete", "Concrete Inputs", msgspec.Raw, _EMPTY_RAW),
    ("flops", "flops", msgspec.Raw, _EMPTY_RAW),
    # autograd's link from a backward op to the forward op that recorded it (read where shapes were recorded)
    ("seq", "Sequence number", int | str, NO_ID), ("fwd_thread", "Fwd thread id", int | str, NO_ID),
]
OP_ARGS = ("input_dims", "input_type", "input_strides", "concrete", "flops")
"""The args of a host op that say what work it did: ``Input Dims``, ``Input type``, ``Input Strides``, ``Concrete Inputs``
(``record_shapes=True``) and ``flops`` (``with_flops=True``), each as its JSON text (``b""`` where absent)."""
_OP_ARGS_OF = attrgetter(*OP_ARGS)
_MARKS = attrgetter("input_dims", "flops")
_NO_MARKS = (_EMPTY_RAW, _EMPTY_RAW)
_TS, _DUR = attrgetter("ts"), attrgetter("dur")
_EVENT = [("cat", str, ""), ("name", str, ""), ("pid", int | str, -1), ("tid", int | str, -1)]


def _args(name: str, strict: bool) -> Any:
    return msgspec.defstruct(name, [(f, t if strict else Any, msgspec.field(default=d, name=key)) for f, key, t, d in _ARGS], gc=False)


_Args, _AnyArgs = _args("_Args", True), _args("_AnyArgs", False)
_TIMES = [("ts", msgspec.Raw, _EMPTY_RAW), ("dur", msgspec.Raw, _EMPTY_RAW)]
_KEPT = {ph: msgspec.defstruct(f"_Event{ph}", [*_EVENT, *_TIMES, ("args", _Args | None, None)], tag_field="ph", tag=ph, gc=False)
         for ph in PH_CODES}
"""The strict struct of each kept ``ph`` (X, B, E): every field traceprobe reads; ``ts``/``dur`` as their JSON text."""
_SKIPPED = {  # every other phase of the Chrome trace format: decoded to an empty struct, skipped
    ph: msgspec.defstruct(f"_Skip{i}", [], tag_field="ph", tag=ph, gc=False)
    for i, ph in enumerate(["i", "I", "C", "b", "n", "e", "s", "t", "f", "P", "O", "N", "D", "M", "R", "(", ")", "c", "S", "T", "F", "p", "a"])
}
_PH_OF_TYPE = {t: PH_CODES[ph] for ph, t in _KEPT.items()} | {t: 0 for t in _SKIPPED.values()}
_STRICT = msgspec.json.Decoder(list[reduce(or_, [*_KEPT.values(), *_SKIPPED.values()])])  # type: ignore[misc]
_AnyEvent = msgspec.defstruct("_AnyEvent", [("ph", Any, ""), *[(f, Any, d) for f, _, d in _EVENT], *_TIMES, ("args", _AnyArgs | None, None)],
                              gc=False)
"""The tolerant struct of any event: types checked later, column by column."""
_TOLERANT = msgspec.json.Decoder(list[_AnyEvent])  # type: ignore[valid-type]  (a struct made at run time)
