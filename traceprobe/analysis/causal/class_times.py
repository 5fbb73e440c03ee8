"""The host time before each anchor by host class, held sparse: :class:`ClassTimes`.

A rank's dependency graph splits the host time before each anchor among the host classes
(:data:`.dependency_graph.HOST_CLASSES`, 14): most of an anchor's time lies in one or two of them (HTA's real
``df_index_resolver`` trace: 1.27 classes an anchor, 9% of the table; the template summaries of the job benchmarks:
12%). As a dense table of int32 it was 56 bytes an anchor, the graph's largest array (a fifth of the 1,024-rank
job's peak). Held here as each class's non-zero entries: 8 bytes an entry where they fit int32 (12 where a time
does not), about 10-15 bytes an anchor. Every figure read from it is the dense table's to the ns.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .sweep import fits_int32, index_type


@dataclass(frozen=True, eq=False)
class ClassTimes:
    """A (C, A) table of int64 ns (host classes x anchors) held by its non-zero entries, class by class.

    Attributes:
        n: A, the anchors.
        off: (C + 1,) int64: class ``c``'s entries are ``at[off[c]:off[c + 1]]``, ``ns[off[c]:off[c + 1]]``.
        at: (E,) the anchor of each entry, increasing within a class (int32; int64 where A passes int32).
        ns: (E,) its time, never 0 (int32 where every entry fits, else int64: sums are taken in int64).
    """

    n: int
    off: np.ndarray
    at: np.ndarray
    ns: np.ndarray

    @classmethod
    def of(cls, dense: Any) -> ClassTimes:
        """The table ``dense`` ((C, A) integers; a :class:`ClassTimes` is returned as it is) held sparse.

        Raises:
            ValueError: ``dense`` is not two-dimensional.
        """
        if isinstance(dense, ClassTimes):
            return dense
        m = np.asarray(dense)
        if m.ndim != 2:
            raise ValueError(f"host class times of shape {m.shape}, not (classes, anchors)")
        c, at = np.nonzero(m)  # (row-major: by class, then anchor)
        ns = m[c, at].astype(np.int64, copy=False)
        off = np.zeros(m.shape[0] + 1, np.int64)
        np.cumsum(np.bincount(c, minlength=m.shape[0]), out=off[1:])
        return cls(int(m.shape[1]), off, at.astype(index_type(m.shape[1])), ns.astype(np.int32) if fits_int32(ns) else ns)

    @property
    def shape(self) -> tuple[int, int]:
        """(C, A)."""
        return (self.off.size - 1, self.n)

    @property
    def nbytes(self) -> int:
        """Bytes held."""
        return self.off.nbytes + self.at.nbytes + self.ns.nbytes

    def dense(self) -> np.ndarray:
        """The (C, A) table, int64 ns."""
        out = np.zeros(self.shape, np.int64)
        out[np.repeat(np.arange(self.off.size - 1), np.diff(self.off)), self.at] = self.ns
        return out

    def row(self, c: int) -> np.ndarray:
        """(A,) int64: class ``c``'s time before each anchor."""
        return self.rows((c,))

    def rows(self, classes: Any) -> np.ndarray:
        """(A,) int64: the time of the classes ``classes`` (indices) before each anchor, summed."""
        out = np.zeros(self.n, np.int64)
        for c in classes:
            lo, hi = int(self.off[c]), int(self.off[c + 1])
            out[self.at[lo:hi]] += self.ns[lo:hi]  # (an anchor is at most one entry of a class)
        return out

    def total(self, c: int) -> int:
        """Class ``c``'s time over every anchor (ns)."""
        return int(self.ns[int(self.off[c]):int(self.off[c + 1])].sum(dtype=np.int64))

    def held(self, c: int) -> bool:
        """Whether class ``c`` holds any time (a non-zero entry)."""
        return int(self.off[c + 1]) > int(self.off[c])

    def over(self, lo: int, hi: int) -> np.ndarray:
        """(C,) int64: each class's time before the anchors ``lo .. hi - 1``, summed (0 where ``hi <= lo``)."""
        out = np.zeros(self.off.size - 1, np.int64)
        if hi <= lo or self.at.size == 0:
            return out
        key = self._keys()
        base = np.arange(self.off.size - 1, dtype=np.int64) * (self.n + 1)
        a, b = np.searchsorted(key, base + lo), np.searchsorted(key, base + hi)
        for c in np.flatnonzero(b > a).tolist():
            out[c] = int(self.ns[a[c]:b[c]].sum(dtype=np.int64))
        return out

    def _keys(self) -> np.ndarray:
        """(E,) int64 ``class * (A + 1) + anchor`` of each entry, increasing (built at the first :meth:`over`, kept)."""
        key = self.__dict__.get("_key")
        if key is None:
            key = np.repeat(np.arange(self.off.size - 1, dtype=np.int64) * (self.n + 1), np.diff(self.off)) + self.at
            object.__setattr__(self, "_key", key)
        return key

    def moved(self, src: int, dst: int) -> ClassTimes:
        """This table with class ``src``'s time given to class ``dst`` (added to it, anchor by anchor; ``src`` left 0)."""
        if src == dst or not self.held(src):
            return self
        m = self.dense()
        m[dst] += m[src]
        m[src] = 0
        return ClassTimes.of(m)

    def __eq__(self, other: object) -> bool:
        """The same table, held alike (the entries' dtypes too)."""
        return isinstance(other, ClassTimes) and self.n == other.n and all(
            x.dtype == y.dtype and np.array_equal(x, y) for x, y in ((self.off, other.off), (self.at, other.at), (self.ns, other.ns)))

    __hash__ = None  # type: ignore[assignment]

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "_key"}  # (the search keys are rebuilt where read)



def window_rows(tables: Sequence[ClassTimes], a_rank: np.ndarray, classes: Iterable[int], ranks: Iterable[int]) -> np.ndarray:
    """(W,) int64: the time of the classes ``classes`` before each anchor of a window of ranks (their tables ``tables``;
    ``a_rank``: (W,) each anchor's index into them, the ranks' anchors concatenated in their order), summed, for the ranks
    ``ranks`` (indices into ``tables``), 0 at every other rank's anchors. Each class's entries are written where they
    lie, a run of ranks at a time (:data:`ROWS_BLOCK` entries or so): no rank's row is built (one a rank and class took
    22,532 rows of 4,011 anchors in the 1,024-rank job), nor the window's entries at once (a replay's transient arrays:
    the run's are a few MB)."""
    at = np.searchsorted(a_rank, np.arange(len(tables) + 1)).tolist()
    out = np.zeros(a_rank.size, np.int64)
    classes, ranks = tuple(classes), ranks if isinstance(ranks, (list, tuple, range)) else list(ranks)
    where: list[np.ndarray] = []
    ns: list[np.ndarray] = []
    held = 0

    def write() -> None:
        if where:
            out[np.concatenate(where)] += np.concatenate(ns)  # (an anchor is at most one entry of a class, one class a write)
            where.clear()
            ns.clear()

    for c in classes:
        for a, n in rank_entries(tables, at, c, ranks):
            where.append(a)
            ns.append(n)
            held += a.size
            if held >= ROWS_BLOCK:
                write()
                held = 0
        write()
        held = 0
    return out


def rank_entries(tables: Sequence[ClassTimes], first: Sequence[int], c: int, ranks: Iterable[int]) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Class ``c``'s entries of each rank of ``ranks`` (indices into ``tables``) that holds any, in their order: its
    anchors in the window (int64: ``first[i]``, rank ``i``'s first anchor there, added) and their times (ns)."""
    for i in ranks:
        t = tables[i]
        lo, hi = int(t.off[c]), int(t.off[c + 1])
        if hi > lo:
            yield np.add(t.at[lo:hi], first[i], dtype=np.int64), t.ns[lo:hi]  # (int64: a window may pass int32 anchors)


ROWS_BLOCK = 1 << 17
"""Entries :func:`window_rows` writes at a time."""
