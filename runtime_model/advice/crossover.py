"""Where the verdict flips: the inter-node bandwidth, compute per iteration and compute cv at which the
option the verdict names (the pick or a too-close verdict's candidate; with All-Reduce kept outright, the
best gossip option) ties All-Reduce, found by the model itself.

Why: a preset guesses the network; a user whose cluster is not a preset must see at once whether the
verdict depends on what they do not know. One quantity is moved at a time, everything else as the
advice assumed: the NIC's bandwidth (and the per-byte part of every measured multi-node cost with it,
an nccl-tests run's table size by size too: Network.scaled),
forward + backward + optimizer scaled together, or the compute's spread across ranks and iterations.

Search: the speedup over All-Reduce on a geometric grid of 7 points (bandwidth, compute: 1/64x to 64x
the current value in factors of 4; cv: 0 to 1), the sign change of log(speedup) nearest the current
value, then regula falsi with the Illinois rule inside that bracket (_Illinois: one evaluation per
quantity per round, until the bracket is 0.1 % wide or the two tie within 0.01 %). Each grid and each
round is one batch of recurrences (recurrence.run_pending). The tie holds to well under 1 %
(tests/test_crossover.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from runtime_model.advice.memory_fit import baseline_predictor
from runtime_model.advice.run_lines import validate_line
from runtime_model.convergence.consensus_cost import HOPELESS
from runtime_model.core.distributions import EmpiricalCompute, NormalCompute
from runtime_model.core.scenario import Compute, Network, Scenario
from runtime_model.prediction.iteration import allreduce_prediction
from runtime_model.prediction.pending import run_means
from runtime_model.prediction.reduced_system import topology_model

SPAN = 64.0  # bandwidth and compute: searched from current / SPAN to current x SPAN
GRID_POINTS = 7  # 1/64 .. 64 in factors of 4 (most picks win over the whole range: this grid is the cost)
MAX_REFINEMENTS = 8  # rounds of _Illinois at most (4 or 5 on the recorded baselines)
BRACKET_TOLERANCE = 1e-3  # on the search's scale: 0.1 % of a bandwidth or compute, 0.001 of a cv
TIE_TOLERANCE = 1e-4  # |log speedup|: the option and All-Reduce within 0.01 % of each other
MAX_CV = 1.0
BANDWIDTH, COMPUTE, CV = "inter_bandwidth_gbit_s", "compute_ms", "compute_cv"


@dataclass(frozen=True)
class Crossover:
    """Where `topology`'s speedup over All-Reduce crosses 1 as `quantity` moves (None: not in range)."""

    quantity: str
    topology: str
    current: float
    at: float | None
    wins_where: str  # "above", "below" (`at`), or "everywhere" / "nowhere" in the range searched
    low: float
    high: float

    @property
    def label(self) -> str:
        return {BANDWIDTH: "inter-node bandwidth", COMPUTE: "compute", CV: "compute cv"}[self.quantity]

    @property
    def unit(self) -> str:
        return {BANDWIDTH: " Gbit/s per NIC", COMPUTE: " ms per iteration", CV: ""}[self.quantity]


def named_option(advice) -> str:
    """The option the verdict names (advisor.Recommendation.named)."""
    return advice.recommendation.named


def crossover_topology(advice) -> str | None:
    """The option the crossover is for: the one the verdict names (named_option), or with All-Reduce kept
    outright the best decentralized option the verdict weighs (advisor.pick), passed over for the next
    best where its consensus is hopeless (a verdict the network's doubt makes too close names this one as
    the option to try: one that cannot train to All-Reduce's loss must not be that option)."""
    from runtime_model.advice.advisor import pick

    name = named_option(advice)
    if name != "allreduce":
        return name
    best = pick(advice.rows, advice.margin, advice.objective)
    if best is not None and best.convergence.kind == HOPELESS:
        hopeful = [r for r in advice.rows if r.convergence is None or r.convergence.kind != HOPELESS]
        best = pick(hopeful, advice.margin, advice.objective)
    return None if best is None else best.topology


def no_crossover_reason(advice) -> str:
    """Why an advice has no option to draw a crossover for (crossover_topology is None), in one line:
    nothing decentralized applies or runs here, none fits in GPU memory, or every one that fits is hopeless."""
    rows = [r for r in advice.rows if r.applicable and r.runnable]
    if not rows:
        return "no decentralized option runs at this size"
    if not any(r.fits for r in rows):
        least = min(rows, key=lambda r: r.memory.peak_bytes)
        need, capacity = least.memory.peak_bytes / 2**30, least.memory.capacity_bytes / 2**30
        before = "" if least.memory.activations_known else " before activations"
        return (
            f"no decentralized option fits in GPU memory (the least, {least.topology}, needs "
            f"{need:,.0f} GiB of {capacity:,.0f}{before}: a full replica per rank)"
        )
    return "every decentralized option that fits has hopeless consensus: none trains to All-Reduce's loss"


def crossovers(advice) -> list[Crossover]:
    """The three crossovers of an advice's pick (empty when there is no gossip option to compare)."""
    topology = crossover_topology(advice)
    if topology is None:
        return []
    sc = advice.scenario
    model = topology_model(topology, sc.shape)
    searches = [_bandwidth_search(sc), _compute_search(sc)]
    cv = _cv_search(sc)
    if cv is not None:
        searches.append(cv)
    row = next(r for r in advice.rows if r.topology == topology)
    now_log = math.log(advice.allreduce.mean_s / row.prediction.mean_s)  # every search starts from here
    return _solve(searches, model, topology, now_log, baseline_predictor(advice.baseline))


@dataclass(frozen=True)
class _Search:
    quantity: str
    current: float
    low: float
    high: float
    log_scale: bool
    at: Callable[[float], Scenario]  # the scenario with the quantity set to a value

    def grid(self, lo: float, hi: float, points: int) -> np.ndarray:
        if self.log_scale:
            return np.geomspace(lo, hi, points)
        return np.linspace(lo, hi, points)


def _solve(
    searches: list[_Search], model, topology: str, now_log: float, baseline=allreduce_prediction
) -> list[Crossover]:
    grids = [s.grid(s.low, s.high, GRID_POINTS) for s in searches]
    logs = _grid_logs(searches, grids, model, now_log, baseline)
    brackets = [_nearest_bracket(s, g, lg) for s, g, lg in zip(searches, grids, logs, strict=True)]
    states = [_Illinois.start(s, b) if b else None for s, b in zip(searches, brackets, strict=True)]
    for _ in range(MAX_REFINEMENTS):
        live = [st for st in states if st is not None and not st.done]
        if not live:
            break
        values = _speedup_logs([st.search.at(st.next_value()) for st in live], model, baseline)
        for st, value in zip(live, values, strict=True):
            st.update(float(value))
    return [
        _crossover(s, topology, st.bracket() if st else None, now_log, lg)
        for s, st, lg in zip(searches, states, logs, strict=True)
    ]


def _grid_logs(
    searches: list[_Search], grids: list[np.ndarray], model, now_log: float, baseline=allreduce_prediction
) -> list[np.ndarray]:
    """The log speedup at every grid point, the runs in one batch; the point at the current value (the
    middle of a log grid) is the advice's own now_log, not run again."""
    here = [np.isclose(g, s.current, rtol=1e-9, atol=0.0) for s, g in zip(searches, grids, strict=True)]
    todo = [
        s.at(v)
        for s, g, h in zip(searches, grids, here, strict=True)
        for v, at in zip(g, h, strict=True)
        if not at
    ]
    values = iter(_speedup_logs(todo, model, baseline))
    return [np.array([now_log if at else float(next(values)) for at in h]) for h in here]


@dataclass
class _Illinois:
    """Regula falsi with the Illinois rule on the search's own scale (log for bandwidth and compute):
    each round evaluates the line's zero through the bracket's ends and keeps the part where the sign
    changes; an end kept twice in a row has its value halved, so both ends close in (superlinearly,
    order ~1.44) instead of one end staying put. One evaluation per search per round, where a fixed
    8-point refinement cost eight."""

    search: _Search
    lo: float  # positions (log of the value on a log scale)
    hi: float
    f_lo: float
    f_hi: float
    kept: int = 0  # the end kept last round: -1 lo, +1 hi, 0 none yet
    guess: float = math.nan
    done: bool = False

    @staticmethod
    def start(s: _Search, bracket) -> _Illinois:
        lo, hi, log_lo, log_hi = bracket
        return _Illinois(s, _pos(s, lo), _pos(s, hi), log_lo, log_hi)

    def next_value(self) -> float:
        self.guess = self.lo - self.f_lo * (self.hi - self.lo) / (self.f_hi - self.f_lo)
        return _value_at(self.search, self.guess)

    def update(self, f: float) -> None:
        if f == 0.0:
            self.lo = self.hi = self.guess
            self.f_lo = self.f_hi = 0.0
            self.done = True
            return
        if (f > 0) == (self.f_hi > 0):  # the zero lies between lo and the guess: hi moves, lo is kept
            self.hi, self.f_hi = self.guess, f
            if self.kept == -1:
                self.f_lo /= 2.0
            self.kept = -1
        else:
            self.lo, self.f_lo = self.guess, f
            if self.kept == 1:
                self.f_hi /= 2.0
            self.kept = 1
        self.done = abs(self.hi - self.lo) <= BRACKET_TOLERANCE or abs(f) <= TIE_TOLERANCE

    def bracket(self) -> tuple[float, float, float, float]:
        """(lo, hi, log at lo, log at hi) in the search's values, for _crossover's interpolation."""
        return _value_at(self.search, self.lo), _value_at(self.search, self.hi), self.f_lo, self.f_hi


def _pos(s: _Search, value: float) -> float:
    return math.log(value) if s.log_scale else value


def _value_at(s: _Search, position: float) -> float:
    return math.exp(position) if s.log_scale else position


def _speedup_logs(scenarios: list[Scenario], model, baseline=allreduce_prediction) -> np.ndarray:
    """log(baseline mean / topology mean) for each scenario, their recurrences run as one batch;
    `baseline`: scenario -> the All-Reduce-family row the verdict is against (DDP's unless it does not
    fit: memory_fit.chosen_baseline)."""
    ars = [allreduce_prediction(sc) for sc in scenarios]
    means = run_means([model.pending(sc, ar) for sc, ar in zip(scenarios, ars, strict=True)])
    refs = ars if baseline is allreduce_prediction else [baseline(sc) for sc in scenarios]
    return np.array([math.log(a.mean_s / m) for a, m in zip(refs, means, strict=True)])


def _nearest_bracket(s: _Search, grid: np.ndarray, logs: np.ndarray):
    """(lo, hi, log at lo, log at hi) of the sign change nearest the current value, or None."""
    flips = np.flatnonzero(np.sign(logs[:-1]) != np.sign(logs[1:]))
    if flips.size == 0:
        return None
    pos = _position(s, grid)
    here = _position(s, np.array([s.current]))[0]
    i = flips[np.argmin(np.abs((pos[flips] + pos[flips + 1]) / 2 - here))]
    return (float(grid[i]), float(grid[i + 1]), float(logs[i]), float(logs[i + 1]))


def _position(s: _Search, values: np.ndarray) -> np.ndarray:
    return np.log(values) if s.log_scale else values


def _crossover(s: _Search, topology: str, bracket, current_log: float, grid_logs: np.ndarray) -> Crossover:
    wins_now = current_log > 0
    if bracket is None:
        everywhere = bool(np.all(grid_logs > 0))
        return Crossover(
            s.quantity, topology, s.current, None, "everywhere" if everywhere else "nowhere", s.low, s.high
        )
    lo, hi, log_lo, log_hi = bracket
    # the zero of the line through the bracket's ends, in the search's scale (ends equal: a tie found)
    t = log_lo / (log_lo - log_hi) if log_lo != log_hi else 0.0
    if s.log_scale:
        at = float(math.exp(math.log(lo) + t * (math.log(hi) - math.log(lo))))
    else:
        at = lo + t * (hi - lo)
    above = (s.current > at) == wins_now
    return Crossover(s.quantity, topology, s.current, at, "above" if above else "below", s.low, s.high)


def bandwidth_speedups(
    scenario: Scenario, topology: str, gbit_s: np.ndarray, baseline: str = "ddp"
) -> np.ndarray:
    """`topology`'s speedup over the All-Reduce-family row `baseline` names (advice.baseline: DDP, or
    the sharded row the verdict is against) at each inter-node bandwidth (Gbit/s per NIC), everything
    else as `scenario` has it: the curve `rtmodel plot crossover` draws, against what crossovers() searched."""
    search = _bandwidth_search(scenario)
    model = topology_model(topology, scenario.shape)
    scenarios = [search.at(float(v)) for v in gbit_s]
    return np.exp(_speedup_logs(scenarios, model, baseline_predictor(baseline)))


# ---------------------------------------------------------------- the three quantities


def _bandwidth_search(sc: Scenario) -> _Search:
    gbit = sc.network.inter.bandwidth_Bps * 8 / 1e9
    return _Search(
        BANDWIDTH,
        gbit,
        gbit / SPAN,
        gbit * SPAN,
        True,
        lambda v: replace(sc, network=inter_scaled(sc.network, v / gbit)),
    )


def inter_scaled(net: Network, factor: float) -> Network:
    """The network with every NIC `factor` times as fast: the link class, its per-flow cap, and every
    measured fit that spans nodes, its table too (Network.scaled: the one rule every what-if uses)."""
    return net.scaled(inter_bandwidth=factor)


def _compute_search(sc: Scenario) -> _Search:
    ms = (sc.compute.compute_s + sc.compute.optimizer_s) * 1e3
    return _Search(COMPUTE, ms, ms / SPAN, ms * SPAN, True, lambda v: sc.compute_scaled(v / ms))


def _cv_search(sc: Scenario) -> _Search | None:
    """None where the compute's distribution cannot be re-spread (neither normal nor empirical)."""
    dist = sc.compute.distribution
    if dist.mean_s <= 0 or not isinstance(dist, NormalCompute | EmpiricalCompute):
        return None
    if isinstance(dist, EmpiricalCompute) and dist.sd_s <= 0:
        return None
    cv = dist.sd_s / dist.mean_s
    return _Search(CV, cv, 0.0, MAX_CV, False, lambda v: _with_cv(sc, v))


def _with_cv(sc: Scenario, cv: float) -> Scenario:
    gossip = None if sc.gossip_compute is None else _compute_with_cv(sc.gossip_compute, cv)
    return replace(sc, compute=_compute_with_cv(sc.compute, cv), gossip_compute=gossip)


def _compute_with_cv(compute: Compute, cv: float) -> Compute:
    """The same mean compute with its i.i.d. spread set to `cv` (an empirical one's deviations scaled)."""
    dist = compute.distribution
    if isinstance(dist, EmpiricalCompute):
        mean, k = dist.mean_s, cv * dist.mean_s / dist.sd_s if dist.sd_s > 0 else 0.0
        spread = EmpiricalCompute(tuple(max(0.0, mean + k * (x - mean)) for x in dist.samples_s))
    else:
        spread = NormalCompute(dist.mean_s, cv * dist.mean_s)
    return replace(compute, distribution=spread)


# ---------------------------------------------------------------- the line under the verdict


def crossover_sentence(found: list[Crossover]) -> str:
    """One line: where the option beats All-Reduce in each quantity, and where it flips ("" if none)."""
    if not found:
        return ""
    topology = found[0].topology
    parts = [_part(c) for c in found]
    return f"Where it flips: {topology} beats All-Reduce " + "; ".join(parts) + "."


def _part(c: Crossover) -> str:
    now = f"now {_value(c, c.current)}"
    if c.at is None:
        span = f"{_value(c, c.low)} to {_value(c, c.high)}{c.unit}"
        where = "at every" if c.wins_where == "everywhere" else "at no"
        return f"{where} {c.label} from {span} ({now})"
    return f"at {c.label} {c.wins_where} {_value(c, c.at)}{c.unit} ({now})"


def _value(c: Crossover, v: float) -> str:
    if c.quantity == CV:
        return f"{v:.2f}"
    return f"{v:,.3g}" if v < 1000 else f"{v:,.0f}"


# How far a preset's network may be from the cluster it stands for: the largest miss among the published
# checks the project keeps, the SGP paper's 10 GbE All-Reduce at >= 1,279 ms per iteration against 338 ms
# predicted (docs/networks.md; BlueFog's 25 GbE Horovod run: 25-43 %, the paper's A100 rows below their
# own NIC byte bound). A bandwidth crossover within this factor of a preset's figure is a live question.
PRESET_NETWORK_SPREAD = 4.0


def network_crossover(advice) -> Crossover | None:
    """The bandwidth crossover, where the network is a preset's guess and the crossover lies within
    PRESET_NETWORK_SPREAD of its figure: the verdict then hangs on what the preset does not know."""
    if BANDWIDTH in given_measurements(advice):
        return None
    return next(
        (
            c
            for c in advice.crossovers
            if c.quantity == BANDWIDTH
            and c.at is not None
            and max(c.at, c.current) / min(c.at, c.current) <= PRESET_NETWORK_SPREAD
        ),
        None,
    )


def given_measurements(advice) -> frozenset[str]:
    """The crossovers' quantities the user measured, so the settle line never asks for them again: read
    from the advice's provenance, as rtmodel_inputs fills it ("network": an nccl-tests run's line; a
    profile's or calibration's "inter.bandwidth_Bps" / "compute.*": "measured (...)"; "compute": a
    trace's "measured: ...", or "your ..." for --compute-ms, --step-ms and your own model; "step anchor"),
    and from the scenario's own sources where an advice carries none (a plot's)."""
    prov, sc = advice.provenance, advice.scenario
    network = (prov.get("network", ""), prov.get("inter.bandwidth_Bps", ""), sc.network.inter.source)
    compute = prov.get("compute", "")
    profiled = [v for k, v in prov.items() if k.startswith("compute.") and v.startswith("measured")]
    given = set()
    if any(line.startswith(("nccl-tests", "measured")) for line in network):
        given.add(BANDWIDTH)
    if compute.startswith(("measured", "your")) or sc.compute.source.startswith(("measured", "your")):
        given.add(COMPUTE)
    if profiled or "step anchor" in prov:
        given.add(COMPUTE)
    if compute.startswith("measured") or sc.compute.source.startswith("measured"):
        given.add(CV)  # a trace's or a profile's steps, rank by rank and iteration by iteration
    if prov.get("compute.distribution", "").startswith("measured"):
        given.add(CV)
    return frozenset(given)


def settle_line(advice) -> str:
    """The one measurement that would settle the verdict ("" when nothing in reach would flip it): the
    network when its crossover lies within PRESET_NETWORK_SPREAD of a preset's figure, else (a
    too-close verdict) the quantity whose crossover is nearest; a validation run where that quantity
    was measured already (given_measurements: never ask for what was given) or nothing flips in range."""
    c = network_crossover(advice)
    too_close = advice.recommendation.too_close_to_call
    if c is not None and (not too_close or advice.recommendation.on_network):
        return (
            f"It depends on the network: it flips at {_value(c, c.at)}{c.unit}, within {PRESET_NETWORK_SPREAD:g}x "
            f"of the preset's {_value(c, c.current)} (published clusters differ from their presets by that much). "
            f"{MEASUREMENTS[BANDWIDTH]}"
        )
    if not too_close:
        return ""
    nearest = _nearest_crossover(advice.crossovers)
    if nearest is None or nearest.quantity in given_measurements(advice):
        return f"What would settle it: {MEASUREMENTS['validation']}"
    return f"What would settle it: {MEASUREMENTS[nearest.quantity]}"


def _nearest_crossover(found: list[Crossover]) -> Crossover | None:
    """The crossover nearest the current value (a factor for bandwidth and compute, a difference for cv)."""
    found = [c for c in found if c.at is not None]
    if not found:
        return None
    return min(
        found,
        key=lambda c: (
            abs(math.log(max(c.at, 1e-9) / max(c.current, 1e-9)))
            if c.quantity != CV
            else abs(c.at - c.current)
        ),
    )


MEASUREMENTS = {
    BANDWIDTH: "run nccl-tests' all_reduce_perf across 2 of your nodes and give its output as --nccl-tests FILE.",
    COMPUTE: "your own step time: --compute-ms from your training logs, or rtmodel profile on one node.",
    CV: "the spread of your step times: rtmodel profile measures it per rank and iteration.",
    "validation": f"a short real run of both: {validate_line()}.",
}


def crossover_dict(c: Crossover) -> dict:
    """The JSON entry (report.py): the quantity, its unit, the value now, the crossover (null when the
    sign does not change in the range searched), which side the option wins on, and the range."""
    return {
        "quantity": c.quantity,
        "topology": c.topology,
        "unit": c.unit.strip(),
        "current": c.current,
        "crossover": c.at,
        "wins": c.wins_where,
        "searched": [c.low, c.high],
    }


def with_crossovers(advice):
    """The advice with its crossovers (the shell asks for them: a sweep of advices does not pay them);
    a verdict that a preset network's doubt would flip becomes too close to call (network_crossover)."""
    advice = replace(advice, crossovers=crossovers(advice))
    c = network_crossover(advice)
    if c is None or advice.recommendation.too_close_to_call:
        return advice
    return replace(advice, recommendation=too_close_on_network(advice, c.topology, _value(c, c.at) + c.unit))


def too_close_on_network(advice, topology: str, flips_at: str):
    """The verdict when a preset network's doubt would flip it (crossover.network_crossover): keep
    All-Reduce until the network is measured, naming the option to try."""
    from runtime_model.advice.advisor import keep_allreduce

    row = next(r for r in advice.rows if r.topology == topology)
    verdict = (
        f"Too close to call: {topology} is predicted at {row.speedup:.2f}x All-Reduce's speed, but that "
        f"flips at {flips_at}, within reach of what a preset network can miss by. Keep All-Reduce until "
        f"the network is measured (below), or validate ({validate_line(topology)})."
    )
    rec = keep_allreduce(advice.scenario, verdict, candidate=topology)
    return replace(rec, too_close_to_call=True, on_network=True)
