"""The local-SGD model (runtime_model/prediction/local_sgd.py) next to published DiLoCo-family compute utilizations.

Why: a check, never a target. Every input is a setting the source states (model size, step time, H,
fragments, wire precision, bandwidth); nothing is chosen so that a row fits. Where an input had to be
derived from a published result, the row says so and is left out of the score.

Sources (cited per row; compiled in the issue-30 notes):
- Streaming DiLoCo, Douillard et al. 2025, arXiv 2501.18512v1, Table 4 (appendix) and Sec. 3.1/3.3.2:
  Gbit/s needed for CU 50/80/90/95/99 % at 1B/10B/100B (step 0.1/0.8/4.9 s, 8/16/36 fragments, H = 100).
  Assumed from the source: M = 2 replicas (Sec. 3.2 "We use 2 DiLoCo replicas"; the authors' public
  simulator defaults to M = 2 datacenters); only the inter-datacenter link ("we consider only the
  bandwidth between datacenters"); tau = 1 ("In our main experiments, we used 1 step"); bf16 payload;
  FP4 = E3M0, 4 bits; nominal parameter counts 1e9/1e10/1e11.
- Scaling Laws for DiLoCo, Charles et al. 2025, arXiv 2503.09799v1, Table 6 (10B, 0.8 s, H = 1..300),
  simulated with the same simulator; bf16 (Sec. 3), M = 2 assumed as above.
- INTELLECT-1, arXiv 2412.01152: 10B params, H = 100, int8 ring all-reduce, 38 min per 100 inner steps,
  median all-reduce 103/382/469 s -> CU 95.7/85.6/83.0 % (Table 2 as quoted by a secondary write-up),
  bandwidth "500 Mb/s to 4 Gb/s", 4 to 14 nodes.
- OpenDiLoCo, arXiv 2407.07852 (abstract): "90-95% compute utilization"; 1.1B, H = 500, fp16, 4 workers
  (secondary write-up: all-reduce "6.9%" of the time). No bandwidth or step time is published.

The tables' bandwidths are points of a log-spaced grid (consecutive values in ratio ~1.207, close to
np.logspace(-1, 3, 50); printed to one decimal, so 0.4 may stand for 0.37-0.45): the first grid point
whose simulated CU reaches the target. A row is scored by the model's CU at the printed bandwidth minus the
target (points); `bracketed` says whether the target lies between the model's CU one grid step lower
(printed / 1.207) and at the printed bandwidth (the model would then list the same grid point).
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

import numpy as np

from runtime_model.core.scenario import Bucket, BucketLayout, ClusterShape, Compute, Link, Network, Scenario
from runtime_model.prediction.iteration import allreduce_prediction
from runtime_model.prediction.local_sgd import LocalSgd, local_sgd_prediction

GRID_RATIO = 10 ** (4 / 49)  # the tables' grid step: np.logspace(-1, 3, 50), ~1.207
CU_TARGETS = (50.0, 80.0, 90.0, 95.0, 99.0)  # Table 4 / Table 6 columns, percent
BUCKETS = 128  # Douillard's simulator: each payload in 128 buckets released through the backward
REPLICAS = 2  # M: Streaming DiLoCo Sec. 3.2 and the simulator's default
CRITERION_POINTS = 10.0  # issue 30: published utilizations within 10 points
FAST_LINK = Link(0.0, 1e15)  # inside a "node" (one GPU each here: never used by a ring)

POINT, BRACKET, DERIVED, UNCHECKED = "point", "bracket", "derived", "unchecked"

STREAMING, SCALING = "arXiv 2501.18512 Table 4", "arXiv 2503.09799 Table 6"
INTELLECT, OPENDILOCO = "arXiv 2412.01152", "arXiv 2407.07852"


@dataclass(frozen=True)
class Method:
    """One table row's algorithm: None for Data-Parallel, else the local-SGD options it stands for."""

    label: str
    options: LocalSgd | None


@dataclass(frozen=True)
class TableRow:
    """A published row: one method at one model scale and the Gbit/s listed for each CU target."""

    source: str
    scale: str
    params: float
    step_s: float
    method: Method
    gbps: tuple[float, ...]  # per CU_TARGETS, as printed


@dataclass(frozen=True)
class Check:
    """One published utilization next to the model's. For a POINT row `model_cu` is at the listed
    bandwidth and `lower_cu` one grid point lower; for a BRACKET row they are the model's CU at the most
    and the least favourable stated setting."""

    source: str
    case: str
    kind: str
    target: float  # published CU, percent
    model_cu: float
    lower_cu: float = math.nan
    note: str = ""

    @property
    def scored(self) -> bool:
        """Rows whose inputs are all stated settings (DERIVED rows use a published result as input)."""
        return self.kind in (POINT, BRACKET)

    @property
    def bracketed(self) -> bool:
        """POINT: lower_cu < target <= model_cu; BRACKET: the target inside the model's range."""
        if self.kind == POINT:
            return self.lower_cu < self.target <= self.model_cu
        return self.lower_cu <= self.target <= self.model_cu

    @property
    def error_points(self) -> float:
        """Model minus published, in points (BRACKET: distance to the model's range, 0 inside it)."""
        if self.kind == UNCHECKED:
            return math.nan
        if self.kind == BRACKET:
            if self.target < self.lower_cu:
                return self.lower_cu - self.target
            return min(0.0, self.model_cu - self.target)
        return self.model_cu - self.target


# Both simulators overlap every (outer) gradient reduction with the backward of the step that makes it:
# "For all methods, the reduction of gradients or outer gradients is overlapped over the backward pass
# computation" (arthurdouillard.com/diloco); arXiv 2501.18512 Sec. 3.1's DAG has per-layer reduction nodes
# after each layer's backward. The stated setting, hence backward_overlap=True for their rows.
SIMULATED = {"replica": "gpu", "backward_overlap": True}


def methods(fragments: int) -> list[Method]:
    """Table 4's five rows for a model cut in `fragments` 3-layer fragments (H = 100, tau = 1, FP4)."""
    return [
        Method("data-parallel", None),
        Method("diloco", LocalSgd(100, **SIMULATED)),
        Method("streaming", LocalSgd(100, 0, fragments, **SIMULATED)),
        Method("streaming+overlap", LocalSgd(100, 1, fragments, **SIMULATED)),
        Method("streaming+overlap+fp4", LocalSgd(100, 1, fragments, 4, **SIMULATED)),
    ]


def streaming_table4() -> list[TableRow]:
    """arXiv 2501.18512v1 Table 4, verbatim (data/streaming_diloco_table4.csv; step times from its
    caption/appendix text)."""
    text = resources.files("rtmodel_literature.data").joinpath("streaming_diloco_table4.csv").read_text()
    rows = csv.DictReader(line for line in text.splitlines() if not line.startswith("#"))
    out = []
    for row in rows:
        method = {m.label: m for m in methods(int(row["fragments"]))}[row["method"]]
        gbps = tuple(float(row[f"gbps_cu{t:g}"]) for t in CU_TARGETS)
        out.append(
            TableRow(STREAMING, row["scale"], float(row["params"]), float(row["step_s"]), method, gbps)
        )
    return out


def scaling_table6() -> list[TableRow]:
    """arXiv 2503.09799v1 Table 6, the 10B / 0.8 s block (its first row is 'DP & H=1': both checked)."""
    dp_h1 = (104.8, 184.2, 222.3, 222.3, 390.7)
    rows = [TableRow(SCALING, "10B", 1e10, 0.8, Method("data-parallel", None), dp_h1)]
    per_h = {
        1: dp_h1,
        10: (16.0, 49.4, 86.8, 152.6, 222.3),
        50: (3.0, 11.0, 23.3, 41.0, 126.5),
        100: (1.4, 6.2, 13.3, 23.3, 86.8),
        300: (0.5, 2.0, 4.3, 9.1, 41.0),
    }
    for h, gbps in per_h.items():
        rows.append(
            TableRow(SCALING, "10B", 1e10, 0.8, Method(f"diloco H={h}", LocalSgd(h, **SIMULATED)), gbps)
        )
    return rows


def link_scenario(params: float, step_s: float, gbps: float, nodes: int = REPLICAS, wire_bytes: int = 2):
    """`nodes` sites of one GPU each (a site's whole step), joined by one link of `gbps`, zero latency;
    forward step/3, backward 2/3 (the simulator's split), no optimizer time, 128 equal buckets ready
    through the backward; the gradient's elements `wire_bytes` each (bf16: 2)."""
    size = round(params * wire_bytes / BUCKETS)
    buckets = tuple(Bucket(size, (k + 1) / BUCKETS) for k in range(BUCKETS))
    network = Network(intra=FAST_LINK, inter=Link(0.0, gbps * 1e9 / 8), nics_per_node=1)
    compute = Compute(step_s / 3, 2 * step_s / 3, 0.0)
    return Scenario(ClusterShape(nodes, 1), network, compute, BucketLayout(buckets, buckets, wire_bytes))


def model_cu(row: TableRow, gbps: float) -> float:
    """The model's compute utilization (percent) for `row`'s method at `gbps`."""
    scenario = link_scenario(row.params, row.step_s, gbps)
    if row.method.options is None:
        return 100 * scenario.compute.compute_s / allreduce_prediction(scenario).mean_s
    return 100 * local_sgd_prediction(scenario, row.method.options).compute_utilization


def table_checks(rows: list[TableRow]) -> list[Check]:
    """Each (row, CU target): the model's CU at the listed grid point and one point lower."""
    checks = []
    for row in rows:
        for target, gbps in zip(CU_TARGETS, row.gbps, strict=True):
            listed, lower = gbps, gbps / GRID_RATIO
            checks.append(
                Check(
                    source=row.source,
                    case=f"{row.scale} {row.method.label} CU{target:.0f} @{gbps:g}",
                    kind=POINT,
                    target=target,
                    model_cu=model_cu(row, listed),
                    lower_cu=model_cu(row, lower),
                )
            )
    return checks


INTELLECT_PARAMS = 10e9
INTELLECT_PERIOD_S = 38 * 60  # "38 minutes" for 100 inner steps
INTELLECT_NODES = (4, 14)  # "from 4 to 14 nodes"
INTELLECT_GBPS = (0.5, 4.0)  # "500 Mb/s to 4 Gb/s"
INTELLECT_RUNS = (("USA", 103.0, 95.7), ("USA+Europe", 382.0, 85.6), ("Global", 469.0, 83.0))


def intellect_cu(nodes: int, gbps: float) -> float:
    """INTELLECT-1 on the model: `nodes` sites (one 'GPU' each: its 8-H100 node's measured step),
    H = 100 steps of 22.8 s, int8 ring all-reduce of 10B elements over a `gbps` link per site."""
    scenario = link_scenario(INTELLECT_PARAMS, INTELLECT_PERIOD_S / 100, gbps, nodes=nodes)
    return 100 * local_sgd_prediction(scenario, LocalSgd(100, bits=8, replica="gpu")).compute_utilization


def implied_gbps(nodes: int, allreduce_s: float) -> float:
    """The link speed at which the model's int8 ring all-reduce over `nodes` sites takes `allreduce_s`
    (the model's time at 1 Gbit/s over `allreduce_s`: the bandwidth term is the only one, latency 0)."""
    scenario = link_scenario(INTELLECT_PARAMS, INTELLECT_PERIOD_S / 100, 1.0, nodes=nodes)
    return local_sgd_prediction(scenario, LocalSgd(100, bits=8, replica="gpu")).outer_comm_s / allreduce_s


def intellect_checks() -> list[Check]:
    """Bracket (stated inputs only): the model's CU over 4-14 nodes x 0.5-4 Gbit/s against each reported
    CU. Derived: the link speed each median all-reduce implies (14 nodes), and the model's CU there."""
    worst = intellect_cu(max(INTELLECT_NODES), min(INTELLECT_GBPS))
    best = intellect_cu(min(INTELLECT_NODES), max(INTELLECT_GBPS))
    checks = []
    for name, _allreduce_s, target in INTELLECT_RUNS:
        note = "stated: 10B int8, H=100, 38 min/100 steps, 4-14 nodes, 0.5-4 Gbit/s"
        checks.append(Check(INTELLECT, f"{name} CU in stated range", BRACKET, target, best, worst, note=note))
    for name, allreduce_s, target in INTELLECT_RUNS:
        gbps = implied_gbps(max(INTELLECT_NODES), allreduce_s)
        low = implied_gbps(min(INTELLECT_NODES), allreduce_s)
        note = (
            f"derived link {gbps:.2f} Gbit/s at 14 nodes ({low:.2f} at 4) from the median {allreduce_s:g} s"
        )
        cu = intellect_cu(max(INTELLECT_NODES), gbps)
        checks.append(Check(INTELLECT, f"{name} median all-reduce", DERIVED, target, cu, note=note))
    return checks


OPEN_PARAMS, OPEN_WORKERS, OPEN_H = 1.1e9, 4, 500  # 1.1B Llama, 4 workers, H = 500, fp16 all-reduce
OPEN_RANGE = (90.0, 95.0)  # abstract: "90-95% compute utilization"
OPEN_ALLREDUCE_SHARE = 6.9  # secondary write-up: "the all-reduce bottleneck only accounts for 6.9%"


def opendiloco_gbit_s_products() -> dict[float, float]:
    """Gbit/s x step seconds the model needs for each CU of the published range (and 100 - 6.9): no step
    time is published, so only the product is fixed. Zero latency makes the all-reduce time scale as
    1/bandwidth: read it at 1 Gbit/s and a 1 s step, then confirm the CU at the product found."""
    opts = LocalSgd(OPEN_H, replica="gpu")
    scenario = link_scenario(OPEN_PARAMS, 1.0, 1.0, nodes=OPEN_WORKERS)
    comm_s = local_sgd_prediction(scenario, opts).outer_comm_s
    products = {}
    for cu in (*OPEN_RANGE, 100 - OPEN_ALLREDUCE_SHARE):
        product = comm_s / (OPEN_H * (100 / cu - 1))
        check = link_scenario(OPEN_PARAMS, 1.0, product, nodes=OPEN_WORKERS)
        if abs(100 * local_sgd_prediction(check, opts).compute_utilization - cu) > 1e-6:
            raise RuntimeError("the outer all-reduce no longer scales as 1/bandwidth: recompute the products")
        products[cu] = product
    return products


def opendiloco_checks() -> list[Check]:
    """What OpenDiLoCo's published numbers allow: no bandwidth and no step time, so nothing is scored."""
    share_cu = 100 - OPEN_ALLREDUCE_SHARE
    products = opendiloco_gbit_s_products()
    lo, hi = products[OPEN_RANGE[0]], products[OPEN_RANGE[1]]
    share_note = f"arithmetic only: {share_cu:.1f}% lies in {OPEN_RANGE[0]:g}-{OPEN_RANGE[1]:g}%"
    need = f"model: {lo:.2f}/T-{hi:.2f}/T Gbit/s for a T-second step (93.1%: {products[share_cu]:.2f}/T)"
    return [
        Check(OPENDILOCO, "6.9% all-reduce share vs 90-95%", UNCHECKED, share_cu, math.nan, note=share_note),
        Check(OPENDILOCO, "90-95% needs Gbit/s x step s", UNCHECKED, math.nan, math.nan, note=need),
    ]


def source_disagreement() -> list[tuple[str, float, float, float]]:
    """(method, CU target, Table 4 Gbit/s, Table 6 Gbit/s) where the two papers list different bandwidths
    for the same simulated setting (10B, 0.8 s, M = 2; Data-Parallel and DiLoCo H = 100): how far the
    sources themselves are apart, in the same units as the model's error."""
    t4 = {r.method.label: r.gbps for r in streaming_table4() if r.scale == "10B"}
    t6 = {r.method.label: r.gbps for r in scaling_table6()}
    pairs = (("data-parallel", "data-parallel"), ("diloco", "diloco H=100"))
    return [
        (a, target, x, y)
        for a, b in pairs
        for target, x, y in zip(CU_TARGETS, t4[a], t6[b], strict=True)
        if x != y
    ]


@lru_cache(maxsize=1)
def all_checks() -> tuple[Check, ...]:
    """Every check (cached: about half a minute of model evaluations)."""
    rows = streaming_table4() + scaling_table6()
    return tuple(table_checks(rows) + intellect_checks() + opendiloco_checks())


@dataclass(frozen=True)
class Summary:
    """The error over scored rows, and the issue's criterion (every scored row within 10 points)."""

    rows: int
    mean_abs_points: float
    max_abs_points: float
    within: int  # scored rows within CRITERION_POINTS
    bracketed: int  # scored rows whose target lies in the model's bracket

    @property
    def criterion_met(self) -> bool:
        """Every scored row within CRITERION_POINTS of its published utilization."""
        return self.max_abs_points <= CRITERION_POINTS


def summary(checks=None) -> Summary:
    """Mean and max |model - published| in points over the scored rows."""
    scored = [c for c in (all_checks() if checks is None else checks) if c.scored]
    errors = np.abs([c.error_points for c in scored])
    return Summary(
        rows=len(scored),
        mean_abs_points=float(errors.mean()),
        max_abs_points=float(errors.max()),
        within=int((errors <= CRITERION_POINTS).sum()),
        bracketed=sum(c.bracketed for c in scored),
    )


def format_table(checks) -> str:
    """A compact table (< 100 columns): target, model at the listed and the lower grid point, error."""
    lines = [f"{'case':40} {'kind':8} {'target':>6} {'model':>6} {'lower':>6} {'err':>6} in"]
    for c in checks:
        cells = (c.target, c.model_cu, c.lower_cu, c.error_points)
        nums = " ".join("     -" if math.isnan(v) else f"{v:6.1f}" for v in cells)
        mark = ("y" if c.bracketed else "n") if c.kind in (POINT, BRACKET) else ""
        lines.append(f"{c.case[:40]:40} {c.kind:8} {nums} {mark}")
        if c.note:
            lines.append(f"    {c.note[:95]}")
    return "\n".join(lines)


def main() -> None:
    """python -m rtmodel_literature.published_local_sgd: every check, the sources' own disagreement, the score."""
    checks = all_checks()
    for source in (STREAMING, SCALING, INTELLECT, OPENDILOCO):
        print(f"== {source}")
        print(format_table([c for c in checks if c.source == source]))
    print("== the two papers' tables on the same simulated setting (10B, 0.8 s, M = 2) disagree:")
    for method, target, t4, t6 in source_disagreement():
        print(f"    {method:14} CU{target:.0f}: Table 4 {t4:g} vs Table 6 {t6:g} Gbit/s")
    for source in (STREAMING, SCALING, INTELLECT, None):
        part = [c for c in checks if source is None or c.source == source]
        s = summary(part)
        print(
            f"{source or 'all scored'}: {s.rows} rows, |err| mean {s.mean_abs_points:.1f} max "
            f"{s.max_abs_points:.1f}; {s.within} within {CRITERION_POINTS:g}; {s.bracketed} in"
        )
    verdict = "met" if summary(checks).criterion_met else "NOT met"
    print(f"criterion (every scored row within {CRITERION_POINTS:g} points): {verdict}")


if __name__ == "__main__":
    main()
