"""Communication kernels whose peers the window does not hold: their end is bound by ranks the trace does not show.

A collective or point-to-point kernel runs until its peers arrive: its recorded time holds its wait for them. Where
the window holds the peers' traces, the kernel is a member of a cross-rank instance (:mod:`.what_if`), and the replay
moves its end with the last arrival. Where it does not (one rank's trace of a larger job, or a collective the
matching left unpaired) of a trace that names its rank (one process of a distributed job: its peers are other
processes; ``nn.DataParallel``'s one process holds every device's kernels, and names no rank), the replay cannot know when the peers would arrive: it keeps them where the trace shows
them, so such a kernel starts no earlier than it started in the trace (``fixed``, :mod:`.sweep`): a what-if that
moves its rank's host earlier gives the kernel no earlier end, which only the peers could give (HTA's
``trace_diff/control`` rank 3 of 8: without this, its ``SendRecv`` kernels moved earlier with its host, and a what-if
gave back more than all of the device's idle time in the window). The replay of the trace's own times is unchanged:
each such kernel starts at its recorded start there.
"""

from __future__ import annotations

import numpy as np


def pinned_fixed(fixed: np.ndarray, start: np.ndarray, comm: np.ndarray, dep: np.ndarray, mem_op: np.ndarray) -> np.ndarray:
    """``fixed`` (int64 ns per device op of the window, the ranks' ops concatenated) with each communication kernel
    of a ranked trace (``comm``, bool: the caller gives only those) that has no dependency edge (``dep`` -1) and is no member of a cross-rank instance (``mem_op``,
    indices of members) raised to its recorded ``start`` (module docstring). Returns a new int64 array."""
    out = np.asarray(fixed, np.int64).copy()
    alone = np.asarray(comm, bool) & (np.asarray(dep) < 0)
    alone[np.asarray(mem_op, np.int64)] = False
    out[alone] = np.maximum(out[alone], np.asarray(start, np.int64)[alone])
    return out
