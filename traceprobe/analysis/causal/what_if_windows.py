"""What each window of a run would give back, in words: its ranks replayed together (:func:`.what_if.what_if`), the
top cause above the window's noise floor, its one action, and the window's critical path (:mod:`.critical_path`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..host.python_frames import short_frame
from ..host.warmup_notes import first_step
from ..host.warmup_notes import runs_before as runs_before_of
from ..memo import empty_frame
from .critical_path import PATH_LABELS, critical_path, path_shares
from .dependency_graph import RankGraph
from .packed import give_back_freed
from .replay_memory import over_budget, replay_budget
from .unseen_peers import in_step, unseen_waits
from .what_if import STEP_COLUMNS, _finish, swept, what_ifs, window_job
from .what_if_advice import LABELS, advice, short_name
from .what_if_order import COLUMNS, EXPOSING_SHARE, HOST_WORK, path_first
from .what_if_steps import first_calls_merged, measured_anchors, one_time_slow

NOISE_SHARE, NOISE_PER_STEP_NS = 0.01, 500_000
"""A what-if gives a finding only above its window's noise floor: 1% of the window (from its first device work to its
last work, or its steps' span where longer: a step that spends 13 s compiling before 2 µs of device work is 13 s long)
and 0.5 ms per step."""


UNRECORDED_HOST = "host between launch calls"
"""The ``host`` cause's name in a window whose traces recorded no host ops (:attr:`.dependency_graph.RankGraph.host_ops`)
or kept only some (sampled, :data:`SAMPLED_DENSITY`): its time is between the calls they recorded, in ops or not."""


SAMPLED_DENSITY = 0.01
"""A window whose ranks' runtime calls hold fewer than this share of the correlation ids they span is sampled
(:attr:`.dependency_graph.RankGraph.id_density`: HTA's ``sampled`` traces hold 0.46%; the recorded samples 3-100%)."""
LINKED_MIN = 0.5
"""A window that links fewer than this share of its device ops to launches in the trace is sampled or cut short."""


@dataclass(frozen=True)
class WindowWhatIf:
    """The what-ifs of one window: its ranks replayed together (module docstring).

    Attributes:
        run, window: labels of the run and window; ``path`` the trace for a window of one trace (else ``""``).
        ranks: the ranks replayed (empty for one unranked trace).
        steps: the most steps a rank of the window has (0 without steps).
        window_ns: from the first device work (or host anchor, without device work) to the latest end of work of the
            window's ranks (int ns).
        step_ns: the mean step of the rank with the longest steps (int ns, 0 without steps).
        critical_path: the window's critical path (:func:`.critical_path.critical_path`).
        linked: the share of the window's device ops whose launch is in the trace (a sampled or truncated trace
            links few: its what-ifs cover the linked part only, and its finding says so); ``id_density`` the least
            :attr:`.dependency_graph.RankGraph.id_density` of its ranks (under 1%: sampled, and the finding says so; the recorded samples hold 3-100%); ``ranked``
            whether its traces name their ranks (the finding names a rank only then).
        table: :func:`.what_if.what_if`'s table.
        top: the first row above the noise floor (:data:`NOISE_SHARE`, :data:`NOISE_PER_STEP_NS`) as a dict, None
            where no cause gives back that much; ``floor_ns`` that floor (int ns).
        stack_frames: the most Python frames a rank of the window recorded per step (``with_stack=True``; 0 without
            stacks): recording them slows the host, so the finding of a host-side cause says its gain is an upper bound.
        backend, replays: the first rank's device runtime, and whether a rank replays device graphs (the advice on
            launch-bound dispatch reads them, :func:`advice`).
        host_ops: whether every rank's trace recorded host ops (else the ``host`` cause is named
            :data:`UNRECORDED_HOST`, and its advice says the trace cannot tell what held it).
        by_step: each row of :attr:`table` step by step (:func:`.what_if.what_ifs`: ``rank``, ``cause``, ``step``,
            ``gain_ns``).
        runs_before: the steps or runs of the program before the window (:func:`..host.warmup_notes.runs_before`, the most
            of its ranks): where some ran, its first calls are no start-up to record after (:func:`.what_if_advice.advice`).
        graph_of_step: per rank replayed (and every rank, -1), launch-bound dispatch and the host time around it
            (:data:`AROUND_LAUNCHES`) removed at once: what a CUDA graph of the step gives back at most (the columns of
            :attr:`table`, ``cause`` :data:`GRAPH_OF_STEP`; a figure beside the causes, not one of them).
        unseen_wait_ns: for a window of one ranked trace whose collectives' peers it does not hold, their waits for
            those ranks in all (:func:`.unseen_peers.unseen_waits`, int ns); -1 otherwise. At most :attr:`floor_ns`:
            :attr:`alike`; more: the rank's own rows say what they are (the cause removed on it alone, the others as
            they arrived) and that the trace cannot tell what the others would give.
    """

    run: str
    window: str
    path: str
    ranks: tuple[int, ...]
    steps: int
    window_ns: int
    table: pd.DataFrame
    top: dict | None
    step_ns: int = 0
    critical_path: pd.DataFrame = field(default_factory=pd.DataFrame)
    linked: float = 1.0
    id_density: float = 1.0
    ranked: bool = True
    floor_ns: int = 0
    stack_frames: int = 0
    backend: str = "cuda"
    replays: bool = False
    by_step: pd.DataFrame = field(default_factory=lambda: pd.DataFrame({c: [] for c in STEP_COLUMNS}))
    host_ops: bool = True
    graph_of_step: pd.DataFrame = field(default_factory=lambda: pd.DataFrame({c: [] for c in COLUMNS}))
    runs_before: int = 0
    unseen_wait_ns: int = -1

    @property
    def alike(self) -> bool:
        """Whether the window is one rank of a job in step with the ranks its collectives wait for
        (:func:`.unseen_peers.in_step` of :attr:`unseen_wait_ns`): its rows of every rank (``rank`` -1) take those ranks to run
        alike, the cause removed on each (:func:`.unseen_peers.alike_job`), and say so."""
        return in_step(self.unseen_wait_ns, self.floor_ns)

    @property
    def unrecorded_host(self) -> str:
        """``"none"`` where a rank's trace recorded no host ops, ``"sampled"`` where the window is sampled
        (:data:`SAMPLED_DENSITY`), else ``""``: the host time between recorded calls is then not known to be outside ops."""
        return "none" if not self.host_ops else "sampled" if self.id_density < SAMPLED_DENSITY else ""

    def cause_label(self, cause: str) -> str:
        """The short name of a what-if cause (:data:`LABELS`; ``host`` is :data:`UNRECORDED_HOST` where the host ops are
        not all recorded, :attr:`unrecorded_host`), or of a cause of the critical path (:data:`.critical_path.PATH_LABELS`)."""
        return UNRECORDED_HOST if cause == "host" and self.unrecorded_host else LABELS.get(cause) or PATH_LABELS.get(cause, cause)

    def step_tops(self) -> pd.DataFrame:
        """Per step, the first row of :attr:`table` of one rank (not every rank) that gives back at least the window's
        noise floor per step in that step (:attr:`by_step`; the floor over the steps): which rank and cause bound the
        step. Columns ``step``, ``rank`` (int64), ``cause`` (str), ``gain_ns`` (int64); steps where none does are left out."""
        b = self.by_step
        if b.empty or self.table.empty:
            return empty_frame({"step": np.int64, "rank": np.int64, "cause": object, "gain_ns": np.int64})
        order = self.table[["rank", "cause"]].assign(_k=np.arange(len(self.table)))
        ok = (b["rank"].to_numpy(np.int64) >= 0) & (b["gain_ns"].to_numpy(np.int64) >= self.floor_ns // max(self.steps, 1))
        best = pd.DataFrame(b[ok]).merge(order, on=["rank", "cause"]).sort_values(["step", "_k"], kind="stable").drop_duplicates("step")
        return pd.DataFrame(best[["step", "rank", "cause", "gain_ns"]]).reset_index(drop=True)

    def rank_top(self, rank: int) -> dict | None:
        """The first row of :attr:`table` for ``rank`` alone (not every rank) that gives back at least the window's noise
        floor (:attr:`floor_ns`: :data:`NOISE_SHARE` of the window, :data:`NOISE_PER_STEP_NS` a step), as a dict; None
        where none does (or the rank was not replayed alone)."""
        t = self.table
        ok = t[(t["rank"] == rank).to_numpy() & (t["gain_ns"] >= self.floor_ns).to_numpy()]
        return ok.iloc[0].to_dict() if len(ok) else None

    def named_cause(self, row: dict) -> str:
        """The cause a row of :attr:`table` is named by: a slow call seen in fewer than every step but one is a first
        call (``warmup``), whatever its shape, unless the window has no steps and the program ran before it
        (:attr:`runs_before`: one run cannot tell a one-time call); else the row's own."""
        return "warmup" if row["cause"] == "slow_call" and one_time_slow(int(row["steps_with"]), self.steps, self.runs_before) \
            else str(row["cause"])

    def label(self, row: dict | None = None) -> str:
        """The top what-if (or ``row``, a row of :attr:`table` as a dict) in a few words, ``""`` without one: e.g.
        ``rank 3 host outside ops -17.5 ms/step``."""
        t = self.top if row is None else row
        if t is None:
            return ""
        cause = self.named_cause(t)
        return f"{self._who(t)} {self.cause_label(cause)} {self._figure(t)}".lstrip()

    @property
    def every_rank(self) -> str:
        """Who a row of every rank (``rank`` -1) is, in words: ``every rank``, or ``every rank (if alike)`` where the
        window is one rank of a job that takes the others to run alike (:attr:`alike`)."""
        return "every rank (if alike)" if self.alike else "every rank"

    def _who(self, row) -> str:
        """Whose cause a row is, in words: ``rank 3``, ``every rank``, or ``every rank beyond rank 2`` (a row that tells
        what removing the cause on every rank adds beyond one rank's own row: ``beyond``); ``""`` for an unranked trace."""
        if row["rank"] >= 0:
            return f"rank {row['rank']}" if self.ranked else ""
        beyond = int(row.get("beyond", -1)) if hasattr(row, "get") else -1
        return f"every rank beyond rank {beyond}" if beyond >= 0 else self.every_rank

    def _figure(self, row) -> str:
        """A row's gain for a sentence: per step where the window has steps, else in all, e.g. ``-17.5 ms/step``."""
        per, unit = (row["per_step_ns"], "/step") if self.steps else (row["gain_ns"], "")
        more = " more" if hasattr(row, "get") and int(row.get("beyond", -1)) >= 0 else ""
        return f"-{per / 1e6:,.1f} ms{unit}{more}"

    def path_line(self) -> str:
        """Where the window's critical path ran, in words: its parts (:func:`.critical_path.path_shares`) of at least
        :data:`PATH_SHARE`, two at most, e.g. ``critical path: 89% compute on cuda:0 stream 13 (sm80_xmma_gemm…), 6%
        compute on cuda:0 stream 7``; ``""`` without a path."""
        shares = path_shares(self.critical_path) if len(self.critical_path) else None
        if shares is None or shares.empty:
            return ""
        parts = []
        for r in shares[shares["share"] >= PATH_SHARE].head(2).itertuples(index=False):
            who = f"rank {r.rank} " if self.ranks and self.ranked else ""
            where = f" on {who}{r.lane}" if r.lane != "host" else f" on {who[:-1]}'s host" if who else ""
            name = short_frame(str(r.name), brief=True) if r.cause == "host" else str(r.name)
            name = short_name(name)
            named = (f" {name}" if name.startswith("(") else f" ({name})") if name else ""  # ("(a wait the trace does not show)")
            parts.append(f"{r.share:.0%} {self.cause_label(str(r.cause))}{where}{named}")
        return "critical path: " + ", ".join(parts) if parts else ""

    def finding(self, row: dict | None = None) -> str:
        """The top what-if (or ``row``, a row of :attr:`table` as a dict) in words, ``""`` without one: e.g. ``rank 3:
        host outside ops: -17.5 ms/step (52% of the step) if removed; host time outside any op ...``."""
        t = self.top if row is None else row
        if t is None:
            return ""
        who = f"{self._who(t)}: " if self._who(t) else ""
        per = t["per_step_ns"] if self.steps else t["gain_ns"]
        step = max(self.step_ns, self.window_ns // max(self.steps, 1))
        share = f" ({per / step:.0%} of a step)" if self.steps and step > 0 else \
            f" ({t['gain_ns'] / max(self.window_ns, 1):.0%} of the window)"
        cause = self.named_cause(t)
        partial = (f"the trace links only {self.linked:.0%} of its device work to launches (sampled or cut short): "
                   "what follows is of that part; ") if self.linked < LINKED_MIN else ""
        if self.id_density < SAMPLED_DENSITY:
            partial = (f"the trace holds {self.id_density:.2%} of the correlation ids its runtime calls span (sampled): "
                       "what follows is of the events it kept; ")
        if self.alike and t["rank"] < 0:
            partial += ("the trace holds one rank of the job, and its collectives wait for ranks it does not: those are taken "
                        "to run alike, with this cause too, arriving as late against it as they did; ")
        elif self.unseen_wait_ns > self.floor_ns and t["rank"] >= 0:
            partial += (f"the trace holds one rank of the job, whose collectives waited {self.unseen_wait_ns / 1e6:,.1f} ms in all "
                        "for ranks it does not hold: this is the cause removed on this rank alone, the others arriving as "
                        "they did; what removing it on them too would give, the trace cannot tell; ")
        return (f"{partial}{who}{self.cause_label(cause)}: {self._figure(t)}{share} if removed{self._as_much(t)}; "
                f"{advice(cause, t['top'], t['steps_with'], self.steps, self.backend, self.replays, self.unrecorded_host, self.runs_before)}"
                f"{self._exposed(t)}{self._around(t)}{self._stacks(cause)}")

    def partial(self) -> str:
        """What part of the job the what-ifs cover, in a few words for the first screen: ``sampled trace`` (under
        :data:`SAMPLED_DENSITY` of the correlation ids), ``13% of the work linked`` (under :data:`LINKED_MIN` of the
        device ops linked to a launch: sampled or cut short), else ``""``."""
        if self.id_density < SAMPLED_DENSITY:
            return "sampled trace"
        return f"{self.linked:.0%} of the work linked" if self.linked < LINKED_MIN else ""

    def _stacks(self, cause: str) -> str:
        """For a host-side cause in a trace recorded with stacks: that they slow the host, in a clause."""
        if cause not in HOST_WORK or self.stack_frames <= 0:
            return ""
        per = "a step" if self.steps else "in the trace"
        return (f"; recorded with Python stacks ({self.stack_frames:,} frames {per} on a rank), whose recording slows the "
                "host: the gain is an upper bound, confirm it on a run without with_stack")

    def _around(self, t: dict) -> str:
        """For launch-bound dispatch: the other host time of its rank that a CUDA graph of the step (or a compiled,
        graph-replayed region) removes with the launches, each cause of :data:`AROUND_LAUNCHES` whose own what-if gives
        back at least the window's noise floor, removed alone, then all of it with the launches at once
        (:attr:`graph_of_step`), in a clause; ``""`` where none."""
        if t["cause"] != "dispatch":
            return ""
        tb = self.table
        rows = tb[(tb["rank"] == t["rank"]).to_numpy() & tb["cause"].isin(AROUND_LAUNCHES).to_numpy()
                  & (tb["gain_ns"] >= max(self.floor_ns, 1)).to_numpy() & _whole(tb)]
        if rows.empty:
            return ""
        parts = [f"{self.cause_label(str(r['cause']))} {self._figure(r)}" for _, r in rows.iterrows()]
        g = self.graph_of_step
        whole = g[(g["rank"] == t["rank"]).to_numpy()]
        at_once = f"; all of it at once, {self._figure(whole.iloc[0])}" if len(whole) else ""
        return (f"; a graph of the step also takes the host time around the launches off the path ({', '.join(parts)}, each "
                f"alone{at_once})")

    def _as_much(self, t: dict) -> str:
        """The other causes of the row's rank whose own what-if gives back the same, to the ns (at least the window's
        noise floor), in a clause; ``""`` where none. Equal gains of different causes are no coincidence of their
        times: removing either lets the window end where other work bounds it (the device's own work, or collectives
        waiting for ranks the trace lacks), so the gain is that bound, reached by each, and the row named first (the
        table's order) is no better a lever than they are."""
        tb = self.table
        rows = tb[(tb["rank"] == t["rank"]).to_numpy() & (tb["cause"] != t["cause"]).to_numpy()
                  & (tb["gain_ns"] == t["gain_ns"]).to_numpy() & (tb["gain_ns"] >= max(self.floor_ns, 1)).to_numpy() & _whole(tb)]
        if rows.empty:
            return ""
        names = [self.cause_label(str(c)) for c in rows["cause"]]
        either = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"
        return (f", as much as {either} removed instead (the same to the ns: from there other work bounds the window, "
                "not this cause's own time)")

    def _exposed(self, t: dict) -> str:
        """For a sync: the host work of its rank that removing it would give back at least
        :data:`.what_if_order.EXPOSING_SHARE` of its gain (the work the sync exposes: it drained the queue before it); for
        host work: the syncs of its rank that would give back that much (the other lever), in a clause; ``""`` where
        none."""
        host_work = t["cause"] in HOST_WORK
        if not host_work and t["cause"] != "sync":
            return ""
        tb = self.table
        other = (tb["cause"] == "sync") if host_work else tb["cause"].isin(HOST_WORK)
        rows = tb[(tb["rank"] == t["rank"]).to_numpy() & other.to_numpy() & (tb["gain_ns"] >= EXPOSING_SHARE * t["gain_ns"]).to_numpy()
                  & _whole(tb)]
        if rows.empty:
            return ""
        r = rows.iloc[0]
        figure = self._figure(r)
        if host_work:
            return (f"; it runs after a sync ({short_name(str(r['top']))}) that drained the device's queue: without the sync it "
                    f"would run under queued work, {figure}")
        name = short_frame(str(r["top"]), brief=True) if r["cause"] == "host" else short_name(str(r["top"]))
        return (f"; the sync drains the device's queue, so the host work after it ({self.cause_label(str(r['cause']))}"
                f"{', ' + name if name else ''}: {figure} if removed) runs with the device idle")


GRAPH_OF_STEP = "graph_of_step"
"""The name of :attr:`WindowWhatIf.graph_of_step`'s rows."""

AROUND_LAUNCHES = ("host", "optimizer", "cpu_op")
"""The host causes a CUDA graph of a launch-bound step removes with its launches (:meth:`WindowWhatIf._around`): the
Python between the ops, the optimizer's own host time and the ops that launch nothing inside the captured step."""

PATH_SHARE = 0.10
"""A part of the critical path (a rank's lane and cause) is named in :meth:`WindowWhatIf.path_line` from this share on."""


def window_what_if(run: str, window: str, path: str, graphs: list[RankGraph], per_rank: pd.DataFrame | None,
                   runs_before: int | None = None) -> WindowWhatIf:
    """One window's what-ifs: its graphs (one per rank) replayed with its cross-rank instances (:func:`window_instances`,
    None for one rank), causes under the window's noise floor (:data:`NOISE_SHARE` of it, :data:`NOISE_PER_STEP_NS` a
    step) neither replayed nor its top; ``runs_before`` the steps or runs of the program before it
    (:attr:`WindowWhatIf.runs_before`; None: as its graphs' first steps say)."""
    if runs_before is None:
        runs_before = max((runs_before_of(first_step(g.steps)) for g in graphs), default=0)
    steps = max((len(g.steps) for g in graphs), default=0)
    # (from the first device work: a trace's host events can start long before, at 0 ns in some)
    lo = min((int(g.start.min() if g.start.size else g.t.min()) for g in graphs if g.start.size or g.t.size), default=0)
    counted = measured_anchors(graphs)  # (the same after the first calls are merged below: they move no program work)
    at = np.cumsum([0] + [g.t.size for g in graphs])
    hi = max((_finish(g.t, g.end, counted[a:b]) for g, a, b in zip(graphs, at[:-1], at[1:])), default=0)
    span = max(hi - lo, 0)
    stepped = max((int(g.step_bounds[1].max() - g.step_bounds[0].min()) for g in graphs if g.step_bounds[0].size), default=0)
    floor = max(int(NOISE_SHARE * max(span, stepped)), NOISE_PER_STEP_NS * max(steps, 1))
    graphs = [first_calls_merged(g, steps, floor, runs_before) for g in graphs]  # (the path names a one-time slow call as the table does)
    job = window_job(graphs, per_rank)  # (once: the path and the what-ifs read it alike)
    job.counted = counted
    if len(graphs) > 1:  # (the replay's graph, whose edges go once it is built, built before the path and the what-ifs hold
        swept(job)  # their arrays: where memory counts; one trace builds it at its first replay, where it has one)
    cp = critical_path(graphs, per_rank, job)
    give_back_freed()  # (the path's arrays, before the what-ifs take theirs)
    index = {g.rank: i for i, g in enumerate(graphs)}
    on_path = {index[r] for r in cp["rank"].unique().tolist() if r in index} if len(graphs) > 1 and len(cp) else None
    table, by_step = what_ifs(graphs, per_rank, min_ns=floor, only=on_path,  # (a cause that removes less cannot give back the floor)
                              groups={GRAPH_OF_STEP: ("dispatch", *AROUND_LAUNCHES)}, before=runs_before, job=job)
    grouped = (table["cause"] == GRAPH_OF_STEP).to_numpy()
    table, graph_of_step = path_first(pd.DataFrame(table[~grouped]), cp), pd.DataFrame(table[grouped]).reset_index(drop=True)
    by_step = pd.DataFrame(by_step[(by_step["cause"] != GRAPH_OF_STEP).to_numpy()]).reset_index(drop=True)
    ok = table[table["gain_ns"] >= floor]
    step_ns = max((int(g.steps["duration_ns"].mean()) for g in graphs if len(g.steps)), default=0)
    return WindowWhatIf(run, window, path, tuple(g.rank for g in graphs) if len(graphs) > 1 else (), steps, span, table,
                        ok.iloc[0].to_dict() if len(ok) else None, step_ns, cp,
                        _linked(graphs), min((g.id_density for g in graphs), default=1.0), any(g.ranked for g in graphs), floor,
                        max((g.stack_frames // max(len(g.steps), 1) for g in graphs), default=0),
                        graphs[0].backend if graphs else "cuda", any(g.replays for g in graphs), by_step,
                        all(g.host_ops for g in graphs), graph_of_step, runs_before,
                        unseen_waits(job, graphs)[0])


def _linked(graphs: list[RankGraph]) -> float:
    ops = sum(g.anchor.size for g in graphs)
    return sum(int((g.anchor >= 0).sum()) for g in graphs) / ops if ops else 1.0


def window_instances(c) -> pd.DataFrame | None:
    """The cross-rank instances of a window: its matched collectives and its paired point-to-point transfers (each a
    group of member kernels: ``pg``, ``seq``, ``rank``, ``start_ns``)."""
    if c is None:
        return None
    parts = [t.reindex(columns=["pg", "seq", "rank", "start_ns"]) for t in (c.per_rank, c.p2p) if t is not None and len(t)]
    return pd.concat(parts, ignore_index=True) if parts else None


def window_what_ifs(runs, collectives, budget: int | None = None) -> tuple[list[WindowWhatIf], list[str]]:
    """The what-ifs of every window of ``runs`` (:class:`.run.Run`): a window of two or more ranks is replayed as one
    job with its matched collectives (``collectives``: :class:`.collectives.WindowCollectives` by run and window)
    where it fits the memory ``budget`` (bytes; :func:`.replay_memory.replay_budget`'s default where None), else it
    gets a line, ``<run> <window>: not replayed: ...`` (:func:`.replay_memory.over_budget`); every other trace on its
    own. Reports without a graph (read from summaries) are left out. Returns ``(what-ifs, lines)``."""
    by_key = {(c.run, c.window): c for c in collectives}
    out, lines = [], []
    budget = replay_budget(budget)
    for run in runs:
        for w in run.windows:
            ranked = [(r, rep) for r, rep in zip(w.ranks, w.reports) if r is not None and rep.graph is not None]
            if len({r for r, _ in ranked}) >= 2 and len({r for r, _ in ranked}) == len(ranked):
                if note := over_budget(len(ranked), sum(int(rep.event_count) for _, rep in ranked), budget):
                    lines.append(f"{run.name} {w.label}: {note}")
                    continue
                c = by_key.get((run.name, w.label))
                out.append(window_what_if(run.name, w.label, "", [rep.graph for _, rep in ranked], window_instances(c),
                                          max(report_runs_before(rep) for _, rep in ranked)))
                continue
            out += [window_what_if(run.name, w.label, rep.path, [rep.graph], None, report_runs_before(rep))
                    for rep in w.reports if rep.graph is not None]
    return out, lines


def report_runs_before(rep) -> int:
    """The steps or runs of the program before the window of one trace's report (:func:`..host.warmup_notes.runs_before`):
    its graph's first step, else its manifest facts (``rep.info``)."""
    g = getattr(rep, "graph", None)
    return runs_before_of(first_step(g.steps if g is not None else getattr(rep, "steps", None)), getattr(rep, "info", None))


def _whole(table: pd.DataFrame) -> np.ndarray:
    """Per row of a what-if table: whether its gains are its cause's whole (not what it adds beyond one rank's own row,
    ``beyond``): the rows another row's clause may quote."""
    return (table["beyond"] < 0).to_numpy() if "beyond" in table.columns else np.ones(len(table), bool)
