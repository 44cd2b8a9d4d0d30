"""The gossip max-plus recurrence of several schedules at once, on one set of compute draws.

Why a module of its own: the advisor runs the recurrence (iteration.py's module doc) for every topology at
every n of a sweep, and its cost was Python overhead per iteration (a dozen numpy calls on tiny arrays at
small n) and scatter/gather on (n, 2) rows at large n. Here
- every schedule at the same n shares one stream of compute draws (common random numbers: each topology's
  own run drew the same numbers from the same seed), drawn in blocks of iterations where the stream allows;
- a rank's state is one flat vector [with communication | free communication] (2n), so a round's peer max
  is one 1-D `take` (pairs) or take + reduceat + take (groups) or one gather over the offsets (static);
- the measured window is recorded into one array and summarised at the end.
Every float operation is the one the per-schedule loop did (max is exact; the additions are the same), so
results are identical to it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from runtime_model.core.scenario import Compute
from runtime_model.prediction.recurrence_draws import compute_draws, shared_stream_key, step_draws_of
from runtime_model.topology.schedule import Schedule

CACHE_ROUNDS = 256  # distinct iterations' merged steps at most (they repeat with the periods' lcm)
CACHE_ENTRIES = 1 << 21  # array entries the kept steps may hold (16 MiB); beyond, each job steps alone


class FlatPeers:
    """max over each rank's group (or static neighbourhood) on the flat layout [column 0, column 1] (2n),
    or [column 0] alone (n) with `columns` 1 (a run that reads means alone: run_jobs).

    kind "pairs" (every round pairs and singletons): out = max(x, x.take(partner)), one gather that
    several schedules' rounds can share (run_jobs concatenates them); "static": the max over the
    neighbourhood's gathers; "groups": a segmented max (reduceat) over the ranks sorted by group, read back
    by each rank's group (reduceat costs per segment, so pairs never take this path).
    """

    def __init__(
        self,
        schedule: Schedule,
        offset: int = 0,
        kind: str | None = None,
        made: dict | None = None,
        columns: int = 2,
    ):
        """`offset`: where the flat state starts in a side-by-side state (the arrays index that one).
        A round object met again (a reduced system plays its small rounds in the full order, a batch's
        jobs share a schedule) is laid out once: `made` holds the layouts at offset 0 by round and kind."""
        n = schedule.n
        self.n, self.columns = n, columns
        graph = schedule.static_graph
        self.rounds: list[tuple[np.ndarray, ...]] = []
        self.kind = kind or self.kind_of(schedule)
        if graph is not None:
            flat = np.arange(columns * n)
            col, rank = np.divmod(flat, n)
            offsets = sorted({off % n for off in graph.peer_offsets} - {0})  # a max needs each peer once
            near = [col * n + (rank + off) % n + offset for off in (0, *offsets)]
            self.rounds.append((np.stack(near),))
            return
        made = {} if made is None else made
        shifted: dict[int, tuple[np.ndarray, ...]] = {}
        for r in schedule.rounds:
            if id(r) not in shifted:
                key = (id(r), self.kind, columns)
                if key not in made:
                    made[key] = (r, self._arrays(r, n))  # the round kept: its id stays its own
                gather, *rest = made[key][1]
                shifted[id(r)] = (gather + offset, *rest)  # only the gather indexes the state
            self.rounds.append(shifted[id(r)])

    def _arrays(self, r, n: int) -> tuple[np.ndarray, ...]:
        """The round's gather (into a state at offset 0) and, for groups, its segments and read-back."""
        order, starts = r.sorted_groups
        cols = range(self.columns)
        if self.kind == "pairs":
            partner = np.arange(n)
            two = starts[r.group_sizes() == 2]  # groups in label order, as sorted_groups starts them
            partner[order[two]], partner[order[two + 1]] = order[two + 1], order[two]
            return (np.concatenate([partner + c * n for c in cols]),)
        g = starts.size  # labels are 0..g-1 in sorted order (Round.validate: no empty group)
        src = np.concatenate([order + c * n for c in cols])
        return (
            src,
            np.concatenate([starts + c * n for c in cols]),
            np.concatenate([r.labels + c * g for c in cols]),
        )

    @staticmethod
    def kind_of(schedule: Schedule) -> str:
        if schedule.static_graph is not None:
            return "static"
        rounds = {id(r): r for r in schedule.rounds}.values()  # a reduced system replays its rounds
        pairs = all(r.group_sizes().max() <= 2 for r in rounds)
        return "pairs" if pairs else "groups"

    def __call__(self, x: np.ndarray, t: int) -> np.ndarray:
        """x: the flat state (2n,); returns a new array."""
        arrays = self.rounds[t % len(self.rounds)]
        if self.kind == "pairs":
            return np.maximum(x, x.take(arrays[0]))
        if self.kind == "static":
            return x.take(arrays[0]).max(axis=0)
        src, starts, dst = arrays
        return np.maximum.reduceat(x.take(src), starts).take(dst)


@dataclass(frozen=True)
class Job:
    """One schedule's recurrence: comm_per_round[r] is each rank's gossip time (+ the last bucket's
    optimizer step) in round r; the run is `warmup` iterations, then `measured` (a whole number of periods)."""

    schedule: Schedule
    comm_per_round: Sequence[np.ndarray]
    warmup: int
    measured: int
    compute: Compute
    gpus_per_node: int
    step_share: float = 0.0  # the share of the step after the last wait (it follows that exchange)

    def batch_key(self) -> tuple:
        """Jobs with equal keys run in one batch (run_jobs): they draw from one stream."""
        return ("recurrence", self.schedule.n, self.gpus_per_node, shared_stream_key(self.compute))

    @staticmethod
    def run_batch(jobs: Sequence[Job], seed: int, with_free: bool = True) -> list[Growth]:
        return run_jobs(jobs, seed, 2 if with_free else 1)


@dataclass(frozen=True)
class Growth:
    """What one run of the recurrence measured; se_s is the Monte-Carlo standard error of mean_s
    (batch means over whole periods of the measured window; 0 without variance)."""

    mean_s: float
    free_s: float
    samples_s: np.ndarray
    se_s: float


def batch_se(marks: Sequence[float], period: int) -> float:
    """Standard error of the growth rate from the mean positions at period boundaries (batch means)."""
    per_period = np.diff(np.asarray(marks)) / period
    if per_period.size < 2:
        return 0.0
    return float(per_period.std(ddof=1) / np.sqrt(per_period.size))


def _computes(jobs: Sequence[Job]) -> list[int]:
    """Per job, the index of its compute among the batch's distinct ones (their draws are made once)."""
    distinct: list[Compute] = []
    out = []
    for j in jobs:
        same = next((u for u, c in enumerate(distinct) if c is j.compute or c == j.compute), None)
        if same is None:
            distinct.append(j.compute)
            same = len(distinct) - 1
        out.append(same)
    return out


def run_jobs(jobs: Sequence[Job], seed: int, columns: int = 2) -> list[Growth]:
    """Run every job (all of one batch_key) on one stream of draws; each result is its own run's.

    The state is every job's flat [comm | free] vector side by side ([comm] alone with `columns` 1,
    where only means are read: the columns never mix, so the comm column is the same bit for bit; free_s
    and se_s are NaN and no window is recorded, so no samples). Per iteration the pair schedules share
    one gather and the group schedules one segmented max (_Steps), and only the jobs still running step;
    the measured windows are recorded together when that costs at most twice the memory of recording
    each one alone."""
    n = jobs[0].schedule.n
    if any(j.schedule.n != n for j in jobs):
        raise ValueError("jobs of one batch share n (they share the draws)")
    kinds, order = _batch_order(jobs)
    which = _computes(jobs)
    jobs, kinds, which = [jobs[i] for i in order], [kinds[i] for i in order], [which[i] for i in order]
    steps = _Steps(jobs, kinds, n, columns)
    count = len(jobs)
    ends = [j.warmup + j.measured for j in jobs]
    recorded = columns > 1  # a run for means alone keeps no window: no samples, no standard error
    first, joint, rec, hist, events = _windows(jobs, n, recorded)
    start, last = [np.empty(0)] * count, [np.empty(0)] * count
    x, new = np.zeros((count, columns * n)), np.empty((count, columns * n))
    distinct = [
        next(j.compute for j, u in zip(jobs, which, strict=True) if u == v) for v in range(max(which) + 1)
    ]
    draws = compute_draws(distinct, n, jobs[0].gpus_per_node, seed)
    spread = step_draws_of(distinct, n, seed)  # (computes, n) per iteration
    share, of_job = np.array([j.step_share for j in jobs])[:, None], np.array(which)
    one_compute = len(distinct) == 1
    live, stop = list(range(count)), max(ends)
    x3, new3 = x.reshape(count, columns, n), new.reshape(count, columns, n)
    for t in range(stop):
        c = next(draws)
        live = [i for i in live if t < ends[i]]
        lo, hi = live[0], live[-1] + 1  # the finished jobs' slots are not stepped (nobody reads them)
        p = steps.peer_max(x.reshape(-1), t, live)
        p3 = p.reshape(count, columns, n)
        if spread is not None:  # the step's deviation: all of it after computing, its share after waiting
            d = next(spread)
            c = c + d
            p3[lo:hi, 0] += share[lo:hi] * d[of_job[lo:hi]]
        # each job's own compute on both of its columns: one addition for the batch, whatever its computes
        np.add(x3[lo:hi], (c[0] if one_compute else c[of_job[lo:hi]][:, None, :]), out=new3[lo:hi])
        np.maximum(new3[lo:hi], p3[lo:hi], out=new3[lo:hi])
        if joint and t >= first:
            if t == first:
                rec[0] = x[:, :n]
            rec[t - first + 1] = new[:, :n]
        for i in events.get(t, ()):
            w = t - jobs[i].warmup
            if w == 0:
                start[i] = x[i].copy()
            if recorded and not joint:
                if w == 0:
                    hist[i][0] = x[i, :n]
                hist[i][w + 1] = new[i, :n]
            if w + 1 == jobs[i].measured:
                last[i] = new[i].copy()
        x, new, x3, new3 = new, x, new3, x3
    out = [_growth(job, last[i], start[i], hist[i], n) for i, job in enumerate(jobs)]
    return [out[order.index(i)] for i in range(count)]


def _batch_order(jobs: Sequence[Job]) -> tuple[list[str], list[int]]:
    """(each job's kind, the order its slots take): each kind side by side, so its steps merge (the
    computes are added in one call whatever their order); in a kind the longest runs last, so the jobs
    still running are one short range of slots (run_jobs steps those alone)."""
    kind_by_schedule: dict[int, str] = {}  # a batch's jobs often share one schedule object
    for j in jobs:
        if id(j.schedule) not in kind_by_schedule:
            kind_by_schedule[id(j.schedule)] = FlatPeers.kind_of(j.schedule)
    kinds = [kind_by_schedule[id(j.schedule)] for j in jobs]
    rank = ("pairs", "groups", "static")
    order = sorted(range(len(jobs)), key=lambda i: (rank.index(kinds[i]), jobs[i].warmup + jobs[i].measured))
    return kinds, order


def _windows(jobs: Sequence[Job], n: int, recorded: bool) -> tuple:
    """(first, joint, rec, hist, events): where each job's measured window is recorded (side by side in
    `rec` when that costs at most twice the memory of recording each alone; nowhere unless `recorded`),
    and the iterations at which a window starts, is recorded, ends."""
    count, ends = len(jobs), [j.warmup + j.measured for j in jobs]
    first, stop = min(j.warmup for j in jobs), max(ends)
    joint = recorded and (stop - first) * count <= 2 * sum(j.measured + 1 for j in jobs)
    rec = np.empty((stop - first + 1, count, n)) if joint else None
    hist = [
        rec[j.warmup - first : j.warmup - first + j.measured + 1, i]
        if joint
        else np.empty((j.measured + 1 if recorded else 0, n))
        for i, j in enumerate(jobs)
    ]
    events: dict[int, list[int]] = {}
    for i, job in enumerate(jobs):
        every = recorded and not joint
        window = range(job.warmup, ends[i]) if every else (job.warmup, ends[i] - 1)
        for at in sorted(set(window)):
            events.setdefault(at, []).append(i)
    return first, joint, rec, hist, events


class _Steps:
    """Each iteration's peer max + communication for every job of a batch, in few numpy calls: the pair
    jobs' gathers concatenated into one, the group jobs' segmented maxima into one (offsets are fixed
    for the rounds in play, so the concatenation of each combination is cached while it is small; else
    every job steps alone, with its rounds' steps made once)."""

    def __init__(self, jobs: Sequence[Job], kinds: Sequence[str], n: int, columns: int = 2):
        self.n, self.count, width = n, len(jobs), columns * n
        self.width = width
        made: dict = {}  # each round's layout, shared by the jobs that play it (FlatPeers)
        self.peers = [
            FlatPeers(j.schedule, i * width, kind, made, columns)
            for i, (j, kind) in enumerate(zip(jobs, kinds, strict=True))
        ]
        free = [np.zeros(n)] * (columns - 1)  # the free column pays no communication
        self.cost = [[_slot_cost(c, n, free) for c in j.comm_per_round] for j in jobs]
        periods = [len(p.rounds) for p in self.peers] + [len(c) for c in self.cost]
        self.lcm = math.lcm(*periods)
        self.slices = [slice(i * width, (i + 1) * width) for i in range(self.count)]
        self.kinds = {
            kind: [i for i, p in enumerate(self.peers) if p.kind == kind] for kind in ("pairs", "groups")
        }
        size = sum(a.size for p in self.peers for a in p.rounds[0]) + self.count * width
        small = self.lcm <= CACHE_ROUNDS and size * self.lcm <= CACHE_ENTRIES  # else rebuilt every iteration
        self.cache: dict[int, list] | None = {} if small else None
        # each job's own steps per round and per cost, offsets into the side-by-side state made once
        self.own = [[(p.kind, self.slices[i], *r) for r in p.rounds] for i, p in enumerate(self.peers)]
        self.own_cost = [  # the free column's cost is zero: only the first n entries of a slot
            [("cost", slice(i * width, i * width + n), c[:n]) for c in cost]
            for i, cost in enumerate(self.cost)
        ]
        self.out = np.empty(self.count * width)

    def peer_max(self, x: np.ndarray, t: int, live: Sequence[int]) -> np.ndarray:
        """max over each rank's peers of x (all jobs' flat states, side by side), plus its communication;
        unmerged, only the `live` jobs step (the others' slots keep stale values nobody reads)."""
        if self.cache is None:
            plan = [self.own[i][t % len(self.own[i])] for i in live]
            plan += [self.own_cost[i][t % len(self.own_cost[i])] for i in live]
        else:
            plan = self.cache.get(t % self.lcm)
            if plan is None:
                plan = self.cache[t % self.lcm] = self._merged(t)
        out = self.out
        for kind, where, *arrays in plan:
            if kind == "pairs":
                np.maximum(x[where], x.take(arrays[0]), out=out[where])
            elif kind == "groups":
                src, starts, dst = arrays
                out[where] = np.maximum.reduceat(x.take(src), starts).take(dst)
            elif kind == "static":
                out[where] = x.take(arrays[0]).max(axis=0)
            else:
                out[where] += arrays[0]
        return out

    def _merged(self, t: int) -> list:
        """The steps of iteration t with each kind's jobs (side by side in the state) merged into one."""
        width = self.width
        own = [o[t % len(o)] for o in self.own]
        plan: list = []
        for kind, members in self.kinds.items():
            if not members:
                continue
            where = slice(members[0] * width, (members[-1] + 1) * width)
            if kind == "pairs":
                plan.append((kind, where, np.concatenate([own[i][2] for i in members])))
                continue
            src, starts, dst, at_src, at_seg = [], [], [], 0, 0
            for i in members:
                _, _, s_i, st_i, d_i = own[i]
                src.append(s_i)
                starts.append(st_i + at_src)
                dst.append(d_i + at_seg)
                at_src, at_seg = at_src + s_i.size, at_seg + st_i.size
            plan.append((kind, where, np.concatenate(src), np.concatenate(starts), np.concatenate(dst)))
        plan.extend(own[i] for i, p in enumerate(self.peers) if p.kind == "static")
        costs = [c[t % len(c)] for c in self.cost]
        plan.append(("cost", slice(None), np.concatenate(costs)))
        return plan


def _slot_cost(comm, n: int, free: list[np.ndarray]) -> np.ndarray:
    """A round's communication over a job's slot: [comm | 0] with the free column, else the round's own
    n values (only ever read: no copy)."""
    if free:
        return np.concatenate([np.broadcast_to(comm, (n,)), *free])
    return comm if np.shape(comm) == (n,) else np.broadcast_to(comm, (n,))


def _growth(job: Job, last: np.ndarray, start: np.ndarray, hist: np.ndarray, n: int) -> Growth:
    """The summary of one run, with the per-schedule loop's own expressions (so equal to the last bit);
    an unrecorded window (a run for means alone) gives no samples and a NaN standard error."""
    period = len(job.comm_per_round)
    comm, free = column_growth(last.reshape(-1, n), start.reshape(-1, n), job.measured)
    if hist.shape[0] == 0:
        return Growth(comm, free, np.empty(0), math.nan)
    marks = hist[::period].mean(axis=1)  # row by row, as the loop's x[:, 0].mean() at each period's start
    samples = (hist[1:] - hist[:-1]).reshape(-1)
    return Growth(comm, free, samples, batch_se(marks, period))


def column_growth(last: np.ndarray, start: np.ndarray, measured: int) -> tuple[float, float]:
    """(comm, free) growth per iteration from the (columns, ranks) states at a window's ends; free is NaN
    where only the comm column ran. Summed as a (ranks, 2) array whatever the columns: numpy sums a column
    of two in another order than a lone one, and the comm column's mean must not depend on whether free
    ran (the recurrence and complete's reduced system both summarise this way)."""
    two = [*range(last.shape[0]), 0][:2]  # one column: the comm column again
    growth = (np.stack([last[c] for c in two], axis=1) - np.stack([start[c] for c in two], axis=1)).mean(
        axis=0
    )
    growth = growth / measured
    return float(growth[0]), float(growth[1]) if last.shape[0] > 1 else math.nan
