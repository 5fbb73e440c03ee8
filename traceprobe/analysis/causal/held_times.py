"""The time each cause holds on each rank of a window, every rank at once: what :func:`.what_if.what_ifs` reads of a
cause before it replays it (its ranks, their time, the steps it held, its time in the first step).

A host class's time lies in few of a rank's anchors (:mod:`.class_times`: 1.27 classes an anchor of 14), so a cause's
time is read as its entries (window anchor, ns), never as one array an anchor per rank and cause: the 1,024-rank job
built 13 dense rows a rank (a loop of 13,312 rows) and counted each rank's steps over every anchor. The figures are
the per-rank rows' to the ns: sums in int64 in anchor order, a step's time summed in float64 in anchor order, as
:func:`.what_if_steps.steps_with` sums it (a zero adds nothing to a float sum).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from .class_times import rank_entries
from .dependency_graph import RankGraph


@dataclass(frozen=True)
class Held:
    """A cause's time on each rank of a window (R ranks).

    Attributes:
        ns: (R,) int64: its time on each rank (ns).
        steps: (R,) int64: the steps of each rank in which it adds up to more than the floor (-1: a rank without steps).
        first: (R,) int64: its time before anchors within each rank's first step (ns; 0 without steps).
    """

    ns: np.ndarray
    steps: np.ndarray
    first: np.ndarray


class WindowSteps:
    """Each anchor of a window's ranks by its rank's step (:func:`.what_if_steps.steps_with`'s rule: the last step
    starting at or before it, none past the last step's end), its rank's first anchor, and whether it lies within its
    rank's first step (:func:`.what_if_steps.first_step`), so that any cause's :class:`Held` is read from its entries.

    Args:
        graphs: the window's ranks, in the order of its anchors (``job.a_rank``).
        first: per graph, its anchors within its first step (masks, :func:`.what_if_steps.first_step`).
        floor: the noise floor (ns): a step counts where the cause's time in it is above ``max(floor, 0)``.
    """

    def __init__(self, graphs: Sequence[RankGraph], first: Sequence[np.ndarray], floor: int) -> None:
        n = [g.t.size for g in graphs]
        self.at = np.zeros(len(graphs) + 1, np.int64)
        np.cumsum(n, out=self.at[1:])
        bounds = [g.step_bounds for g in graphs]
        n_steps = np.array([lo.size for lo, _ in bounds], np.int64)
        base = np.zeros(len(graphs) + 1, np.int64)
        np.cumsum(n_steps, out=base[1:])
        key = np.full(int(self.at[-1]), -1, np.int64 if base[-1] > np.iinfo(np.int32).max else np.int32)
        for i, (g, (lo, hi)) in enumerate(zip(graphs, bounds)):
            if lo.size:
                s = np.searchsorted(lo, g.t, "right") - 1
                ok = (s >= 0) & (g.t <= int(hi[-1]))
                key[int(self.at[i]):int(self.at[i + 1])] = np.where(ok, s + base[i], -1)
        self.key = key  # (W,) each anchor's step of the window (its rank's steps numbered after the ranks' before), -1: none
        self.step_rank = np.repeat(np.arange(len(graphs), dtype=np.int64), n_steps)
        self.no_steps = n_steps == 0
        self.first = list(first)  # (per rank: joined a block at a time, :meth:`held`)
        self.floor = max(floor, 0)

    def held(self, parts: Iterator[tuple[np.ndarray, np.ndarray]]) -> Held:
        """The :class:`Held` of a cause whose time is given as ``parts``: ``(at, ns)`` pairs, window anchors (increasing,
        each once; anchors not given hold none) and their int64 ns, each part the anchors of whole ranks, in the ranks'
        order (so that a step's time is summed in anchor order, as :func:`.what_if_steps.steps_with` sums it): one a run
        of :meth:`_blocks`."""
        n = self.no_steps.size
        ns_sum, first = np.zeros(n, np.int64), np.zeros(n, np.int64)
        per = np.zeros(self.step_rank.size, np.float64)
        for (r0, r1), (at, ns) in zip(self._blocks(), parts):
            key = self.key[at]
            ok = key >= 0
            per += np.bincount(key[ok].astype(np.int64), weights=ns[ok].astype(np.float64), minlength=per.size)  # (+0.0 elsewhere)
            ns_sum += self._sums(at, ns)
            in_first = np.concatenate(self.first[r0:r1]) if r1 > r0 else np.zeros(0, bool)
            first += self._sums(at, np.where(in_first[at - int(self.at[r0])], ns, 0))
        steps = np.bincount(self.step_rank[per > self.floor], minlength=n).astype(np.int64)
        steps[self.no_steps] = -1
        return Held(ns_sum, steps, first)

    def _sums(self, at: np.ndarray, ns: np.ndarray) -> np.ndarray:
        """(R,) int64: ``ns`` summed rank by rank (``at`` increasing: the ranks' runs in order)."""
        total = np.zeros(at.size + 1, np.int64)
        np.cumsum(ns, out=total[1:])
        cut = np.searchsorted(at, self.at)
        return total[cut[1:]] - total[cut[:-1]]

    def _blocks(self) -> Iterator[tuple[int, int]]:
        """Runs of whole ranks ``(first, last + 1)`` of about :data:`BLOCK` anchors each (one rank of more is a run)."""
        bounds = np.unique(np.searchsorted(self.at, np.arange(0, int(self.at[-1]) + BLOCK, BLOCK), "right") - 1).tolist()
        bounds = sorted({0, *bounds, self.at.size - 1})
        yield from zip(bounds[:-1], bounds[1:])

    def of_classes(self, graphs: Sequence[RankGraph], classes: Sequence[int], extra: tuple[np.ndarray, np.ndarray] | None = None) -> Held:
        """The :class:`Held` of the host classes ``classes`` (indices) of every rank, summed, with ``extra`` (window
        anchors, increasing, and int64 ns) added where given; read a block of ranks at a time (:data:`BLOCK`)."""
        tables, first = [g.class_ns for g in graphs], self.at.tolist()

        def parts() -> Iterator[tuple[np.ndarray, np.ndarray]]:
            for r0, r1 in self._blocks():
                at_parts, ns_parts = [], []
                for c in classes:
                    for a, n in rank_entries(tables, first, c, range(r0, r1)):
                        at_parts.append(a)
                        ns_parts.append(n)
                mixed = len(classes) > 1
                if extra is not None and extra[0].size:
                    i, j = np.searchsorted(extra[0], self.at[[r0, r1]])
                    at_parts.append(extra[0][i:j])
                    ns_parts.append(extra[1][i:j])
                    mixed = mixed or j > i
                at = np.concatenate(at_parts).astype(np.int64, copy=False) if at_parts else np.zeros(0, np.int64)
                ns = np.concatenate(ns_parts).astype(np.int64, copy=False) if ns_parts else np.zeros(0, np.int64)
                if mixed and at.size:  # (several lists of anchors: one, in anchor order, each anchor once)
                    order = np.argsort(at, kind="stable")
                    at, ns = at[order], ns[order]
                    new = np.ones(at.size, bool)
                    new[1:] = at[1:] != at[:-1]
                    starts = np.flatnonzero(new)
                    at, ns = at[starts], np.add.reduceat(ns, starts)
                yield at, ns
        return self.held(parts())

    def of_dense(self, ns: np.ndarray) -> Held:
        """The :class:`Held` of a cause whose time is ``ns`` (W,) int64, one value an anchor of the window."""
        def parts() -> Iterator[tuple[np.ndarray, np.ndarray]]:
            for r0, r1 in self._blocks():
                lo, hi = int(self.at[r0]), int(self.at[r1])
                at = np.flatnonzero(ns[lo:hi]) + lo
                yield at, ns[at]
        return self.held(parts())


BLOCK = 1 << 17
"""Anchors of the window read at a time (a run of whole ranks): a cause's entries, their steps and weights are
transient arrays of about 40 bytes an entry, a few MB a block, not the window's (190 MB more than the per-rank rows at
the 1,024-rank job's high-water mark, when read all at once)."""
