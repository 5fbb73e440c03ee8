"""The memory a window's replay takes, and the budget it is replayed within: measured as :data:`NODE_BYTES` an event of
the ranks' traces beside :data:`BASE_BYTES`; the budget ``--replay-memory`` sets (``overlap-report``, ``job``), by
default the larger of 2 GB and half the memory available. A window over it is not replayed, with one line saying so
(:func:`over_budget`): ``job`` from summaries (:mod:`..job.window_replay`) and every window of several ranks
(:func:`.what_if_windows.window_what_ifs`)."""

from __future__ import annotations

REPLAY_BYTES = 2 * 10**9
"""The least memory a window's replay may take, the whole report with it (bytes): the default budget
(:func:`replay_budget`) where half the memory available is less."""
BASE_BYTES = 200_000_000
"""The job report's memory beside the replay (bytes): the interpreter, its modules (numba's among them) and the
collectives of the ranks; the intercept of the fit below."""
NODE_BYTES = 62
"""The replay's memory an event of the ranks' traces (bytes; a rank of 20,000 events is about 8,000 replay nodes:
4,011 host anchors, 4,000 device ops, so about 155 bytes a node): above the largest slope of the peak resident memory
of ``traceprobe job`` on SYNTHETIC template summaries of 20,000 events a rank (``scripts/synth_job.py``, 2026-12-07):
256 ranks 0.40 GB, 512 ranks 0.72 GB, 1,024 ranks 1.33 GB, 4,096 ranks 5.04 GB, 8,192 ranks 9.96 GB (61.7, 59.6,
60.5 and 60.0 bytes an event between them; 79 before the host classes were held sparse and the graphs' indices as
int32, 87 before the replay's graph was built ahead of the what-ifs' arrays). With :data:`BASE_BYTES` it lies above
every one of them."""


REPLAY_MEMORY_ENV = "TRACEPROBE_REPLAY_MEMORY"
"""The environment variable ``--replay-memory`` sets (``overlap-report``, ``job``): the budget in bytes (an integer),
read by :func:`replay_budget` where none is given."""


def replay_budget(budget: int | None = None) -> int:
    """The memory (bytes) a window's replay may take: ``budget`` where given, else :data:`REPLAY_MEMORY_ENV` where set
    (``--replay-memory``), else the larger of :data:`REPLAY_BYTES` and half the memory available now
    (:func:`traceprobe.reading.files.available_memory`, the share ``--max-bytes``'s default takes).

    Raises:
        ValueError: :data:`REPLAY_MEMORY_ENV` is set to something other than an integer.
    """
    import os

    from ...reading.files import MEMORY_SHARE, available_memory

    if budget is not None:
        return int(budget)
    given = os.environ.get(REPLAY_MEMORY_ENV, "").strip()
    if given:
        try:
            return int(given)
        except ValueError:
            raise ValueError(f"{REPLAY_MEMORY_ENV}={given[:40]!r} is not a number of bytes (an integer)") from None
    return max(REPLAY_BYTES, int(available_memory() * MEMORY_SHARE))


def max_replay_events(budget: int) -> int:
    """The events of a window's rank traces (each report's or summary's ``event_count``, summed) that a replay within
    ``budget`` bytes takes: what it holds beyond :data:`BASE_BYTES` at :data:`NODE_BYTES` an event (2 GB: 29,032,258,
    the 1,024 ranks of 20,000 events, not 2,048)."""
    return max(budget - BASE_BYTES, 0) // NODE_BYTES


def over_budget(ranks: int, events: int, budget: int) -> str:
    """The line of a window of ``ranks`` ranks whose traces hold ``events`` events, not replayed within ``budget`` bytes
    (:func:`max_replay_events`), or "" where it fits."""
    if events <= max_replay_events(budget):
        return ""
    return (f"not replayed: its {ranks} ranks' traces hold {events:,} events, more than the {max_replay_events(budget):,} "
            f"a replay takes within {budget / 1e9:.1f} GB of memory (about {(BASE_BYTES + events * NODE_BYTES) / 1e9:.1f} GB "
            "would do; --replay-memory sets it): no what-if or critical path; or replay the ranks that "
            "matter from their summaries")
