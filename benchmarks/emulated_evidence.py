"""Speedup evidence for the nccl-tests and step-anchor source classes from the emulated cluster's kept runs.

Why: the margin stated per source class of inputs must come from measured errors of that class
(rtmodel_literature/speedup_evidence.py). A user with `--nccl-tests FILE` had no evidence of their own.
The emulated clusters (benchmarks/accuracy.py) kept, per cluster, a profile (benchmarks/results/runs/
<cluster>.profile.json) and real DDP and Decent-DP runs (<cluster>.validations.jsonl). Here each cluster
is measured as a user would measure theirs, and advised from that alone:

- the network: an `all_reduce_perf` output across 2 of its nodes (benchmarks/results/emulated-evidence/
  <cluster>.nccl-tests.txt), whose rows are the profile's own measured `two-nodes` pattern
  (rtmodel_documents/profile_patterns.py: one group of the first two nodes' 2k ranks, all-reducing 4 KiB ..
  4 MiB, 9 repetitions): per size the mean of that group's own samples, as nccl-tests prints the mean
  time of its iterations (nccl-tests src/common.cu, BenchTime). Nothing in a row is a model value;
- the compute (kind "nccl-tests"): your own model (--param-mb, --bucket-cap-mb as the workload ran) with
  --compute-ms and --optimizer-ms, an unslowed rank's measured forward + backward and optimizer step
  (from each rank's mean in the profile's compute section: user_compute), and the variation a user's
  per-GPU step logs show: --compute-cv (the ranks' mean coefficient of variation of forward + backward)
  and --straggler FACTOR:COUNT where the first COUNT ranks are measured >= 10 % slower;
- the compute (kind "step-anchor"): the same, but --step-ms, the cluster's measured DDP iteration (the
  mean over its validation records of DDP's measured mean iteration), in place of --compute-ms
  (rtmodel_inputs/step.py).

The inputs are resolved by `rtmodel_inputs.sources.resolve_inputs` (what `rtmodel advise` runs), and
the rows predicted as benchmarks/accuracy.py predicts them (allreduce_prediction, gossip_prediction on
the resolved scenario), so the tuned-DDP re-answer (gradient_as_bucket_view) is not in play: the runs
used DDP's default bucket copy. The measured speedup of a topology is its record's DDP mean over its
Decent-DP mean (as benchmarks/accuracy.py). The emulated cluster runs gloo on CPUs, not NCCL: the
nccl-tests route costs shapes it did not measure by NCCL's ring or tree (the user's defaults), which is
part of what these errors measure.

    python -m benchmarks.emulated_evidence           # the table and the errors per kind
    python -m benchmarks.emulated_evidence --write   # (re)write the nccl-tests files from the profiles
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rtmodel_documents.profile_document import ProfileDocument
from rtmodel_documents.profile_file import read_profile

if TYPE_CHECKING:
    from rtmodel_validation.results import ValidationResult

RESULTS_DIR = Path(__file__).resolve().parent / "results"
RUNS_DIR = RESULTS_DIR / "runs"
EVIDENCE_DIR = RESULTS_DIR / "emulated-evidence"
KINDS = ("nccl-tests", "step-anchor")
PATTERN = "two-nodes"  # the profile's group of two whole nodes: what all_reduce_perf on 2 nodes runs
SLOW_RANK_RATIO = 1.10  # a rank this much slower than the median is a straggler a user's logs show
# The algorithm the user says their collectives run (--nccl-algo): the emulated cluster's gloo all-reduces
# by a flat ring (torch ProcessGroupGloo -> gloo::allreduce, ring unless told otherwise; the project's
# calibration/inversion.py and runtime_model/prediction/collectives.py model it so), never by NCCL's
# tree. Left to the default ("auto"), the route inverts a 2-node run as NCCL's tree, which this backend
# never ran: main() prints that route's errors too (USER_DEFAULT_ALGO), never as the evidence.
NCCL_ALGO = "ring"
USER_DEFAULT_ALGO = None


def clusters(runs_dir: Path = RUNS_DIR) -> list[str]:
    """The emulated clusters with both a profile and validations kept."""
    return sorted(
        p.name.removesuffix(".profile.json")
        for p in runs_dir.glob("*.profile.json")
        if (runs_dir / p.name.replace(".profile.json", ".validations.jsonl")).exists()
    )


def load_profile_doc(cluster: str, runs_dir: Path = RUNS_DIR) -> ProfileDocument:
    """The cluster's kept profile, read through its type (rtmodel_documents.profile_file)."""
    return read_profile(runs_dir / f"{cluster}.profile.json")


def two_node_times_us(doc: ProfileDocument) -> dict[int, float]:
    """Per message size, the mean (us) of the first group's own samples of the profile's two-node pattern
    (an alias `same_as` resolved to the pattern measured): one all_reduce_perf run on nodes 0 and 1."""
    patterns = {p.pattern: p for p in doc.communication.patterns}
    pattern = patterns[PATTERN]
    measured = patterns[pattern.same_as] if pattern.same_as else pattern
    group = list(measured.groups[0])
    if group != list(pattern.groups[0]):
        raise ValueError(f"{PATTERN}'s first group {pattern.groups[0]} is not {measured.pattern}'s {group}")
    times = {}
    for result in measured.results:
        samples = result.group_samples_s
        own = samples[0] if samples else result.samples_s  # older profiles: the max over groups
        times[int(result.bytes)] = statistics.fmean(own) * 1e6
    return times


def nccl_tests_text(doc: ProfileDocument, cluster: str) -> str:
    """The all_reduce_perf output (nccl-tests v2.13+ layout: src/common.cu's header, `#  Rank` lines,
    rows, footer) of the profile's two-node all-reduce times. In-place and #wrong cells are N/A: the
    profiler timed out-of-place all-reduces only and checked no results (nccl-tests `-c 0` prints N/A)."""
    shape = doc.shape
    k = shape.ranks_per_node
    group = next(p for p in doc.communication.patterns if p.pattern == PATTERN).groups[0]
    ranks = len(group)
    names = shape.node_names or [f"node{r // k:02d}" for r in range(shape.world_size)]
    times = two_node_times_us(doc)
    factor = 2 * (ranks - 1) / ranks
    lines = [
        f"# nThread 1 nGpus 1 minBytes {min(times)} maxBytes {max(times)} step: 2(factor) warmup iters: 1 "
        f"iters: {doc.communication.reps} validation: 0",
        f"# emulated cluster {cluster}: rtmodel profile's '{PATTERN}' all-reduces ({shape.backend or ''} on "
        f"{shape.device or ''}), mean of its first group's samples; in-place not timed",
        "#",
        "# Using devices",
    ]
    for i, rank in enumerate(group):
        lines.append(
            f"#  Rank {i:2d} Group  0 Pid {1000 + i:6d} on {names[rank]:>10} device {rank % k:2d} [0x{i:02x}] "
            f"emulated {shape.device or 'cpu'}"
        )
    lines += [
        "#",
        "#                                                              out-of-place                       in-place          ",
        "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong",
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       ",
    ]
    busbw_sum = 0.0
    for nbytes, t_us in sorted(times.items()):
        algbw = nbytes / 1e9 / (t_us * 1e-6)
        busbw_sum += algbw * factor
        lines.append(
            f"{nbytes:12d} {nbytes // 4:13d}     float     sum      -1 {t_us:8.1f} {algbw:7.4f} {algbw * factor:7.4f}"
            f"    N/A      N/A     N/A     N/A    N/A"
        )
    lines += [
        "# Out of bounds values : 0 OK",
        f"# Avg bus bandwidth    : {busbw_sum / len(times):.6f} ",
        "#",
        "# Collective test concluded: all_reduce_perf",
        "",
    ]
    return "\n".join(lines)


def nccl_tests_path(cluster: str, evidence_dir: Path = EVIDENCE_DIR) -> Path:
    return evidence_dir / f"{cluster}.nccl-tests.txt"


def write_inputs(runs_dir: Path = RUNS_DIR, evidence_dir: Path = EVIDENCE_DIR) -> list[Path]:
    """Write every cluster's nccl-tests file from its profile; the paths written."""
    evidence_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for cluster in clusters(runs_dir):
        path = nccl_tests_path(cluster, evidence_dir)
        path.write_text(nccl_tests_text(load_profile_doc(cluster, runs_dir), cluster))
        written.append(path)
    return written


@dataclass(frozen=True)
class UserCompute:
    """What a user's per-GPU step logs say (the profile's compute section, per rank)."""

    compute_ms: (
        float  # an unslowed rank's forward + backward (median over the ranks within 10 % of the fastest)
    )
    optimizer_ms: float
    compute_cv: float  # mean over ranks of each rank's forward + backward CV
    straggler: str | None  # FACTOR:COUNT for the first COUNT ranks >= SLOW_RANK_RATIO x the unslowed


def user_compute(doc: ProfileDocument) -> UserCompute:
    """The --compute-ms, --optimizer-ms, --compute-cv and --straggler a user reads off per-GPU logs: the
    reference is the median of the ranks within SLOW_RANK_RATIO of the fastest, so half a cluster slowed
    (a whole node) does not pull it up."""
    c = doc.compute
    per_rank = [
        [f + b for f, b in zip(fw, bw, strict=True)] for fw, bw in zip(c.forward_s, c.backward_s, strict=True)
    ]
    means = [statistics.fmean(r) for r in per_rank]
    unslowed = statistics.median(m for m in means if m < SLOW_RANK_RATIO * min(means))
    cv = statistics.fmean(statistics.stdev(r) / statistics.fmean(r) for r in per_rank)
    optimizer = statistics.median(statistics.fmean(r) for r in c.optimizer_s)
    slow = [i for i, m in enumerate(means) if m >= SLOW_RANK_RATIO * unslowed]
    straggler = None
    if slow:
        if slow != list(range(len(slow))):  # --straggler slows the first ranks, node 0 first
            raise ValueError(f"slow ranks {slow} are not the first ranks: --straggler cannot say so")
        factor = statistics.fmean(means[i] for i in slow) / unslowed
        straggler = f"{factor:.3f}:{len(slow)}"
    return UserCompute(unslowed * 1e3, optimizer * 1e3, cv, straggler)


def validations(cluster: str, runs_dir: Path = RUNS_DIR) -> list[ValidationResult]:
    """The cluster's validation records, typed, the last per topology (a retried run may have written twice)."""
    from rtmodel_validation.results import read_results

    records, _ = read_results(runs_dir / f"{cluster}.validations.jsonl")
    return list({rec.topology: rec for rec in records}.values())


def measured_ddp_ms(records: list[ValidationResult]) -> float:
    """The cluster's DDP iteration as one figure: the mean of its records' measured DDP means."""
    return statistics.fmean(r.allreduce.measured.mean_s for r in records) * 1e3


def user_options(
    cluster: str,
    kind: str,
    runs_dir: Path = RUNS_DIR,
    evidence_dir: Path = EVIDENCE_DIR,
    nccl_algo: str | None = NCCL_ALGO,
) -> dict:
    """`rtmodel advise`'s options (by name) a user of this cluster gives for `kind`."""
    if kind not in KINDS:
        raise ValueError(f"kind {kind!r}: one of {', '.join(KINDS)}")
    doc = load_profile_doc(cluster, runs_dir)
    shape, workload = doc.shape, doc.workload
    compute = user_compute(doc)
    opts = {
        "gpus": shape.world_size,
        "gpus_per_node": shape.ranks_per_node,
        "param_mb": workload.param_bytes / 2**20,
        "bucket_cap_mb": workload.bucket_cap_mb,
        "optimizer_ms": compute.optimizer_ms,
        "compute_cv": compute.compute_cv,
        "straggler": compute.straggler,
        "nccl_tests": str(nccl_tests_path(cluster, evidence_dir)),
        "nccl_algo": nccl_algo,
        "local_sgd_h": 0,
    }
    if kind == "nccl-tests":
        opts["compute_ms"] = compute.compute_ms
    else:
        opts["step_ms"] = measured_ddp_ms(validations(cluster, runs_dir))
    return opts


@dataclass(frozen=True)
class Check:
    """One topology of one cluster: measured and predicted iteration times and the speedup over DDP."""

    cluster: str
    topology: str
    allreduce_meas_ms: float
    allreduce_pred_ms: float
    topology_meas_ms: float
    topology_pred_ms: float

    @property
    def measured_x(self) -> float:
        return self.allreduce_meas_ms / self.topology_meas_ms

    @property
    def predicted_x(self) -> float:
        return self.allreduce_pred_ms / self.topology_pred_ms

    @property
    def error(self) -> float:
        """predicted / measured - 1 (rtmodel_literature.speedup_evidence.SpeedupCheck.error)."""
        return self.predicted_x / self.measured_x - 1.0


def resolved_scenario(options: dict):
    """The scenario `rtmodel advise` predicts on for these options (rtmodel_inputs.sources.resolve_inputs);
    its warnings (stderr lines) are the ones advise prints."""
    from rtmodel_inputs.sources import resolve_inputs

    return resolve_inputs(options).scenario


def cluster_checks(
    cluster: str,
    kind: str,
    runs_dir: Path = RUNS_DIR,
    evidence_dir: Path = EVIDENCE_DIR,
    nccl_algo: str | None = NCCL_ALGO,
) -> list[Check]:
    """Every validated topology of the cluster against the prediction from `kind`'s inputs; a refusal of
    those inputs (runtime_model.core.errors.UserError, e.g. a step shorter than the route's own
    exchange) propagates, as advise would print it."""
    from runtime_model.prediction.iteration import allreduce_prediction, gossip_prediction
    from runtime_model.topology.registry import build_schedule

    scenario = resolved_scenario(user_options(cluster, kind, runs_dir, evidence_dir, nccl_algo))
    ar_pred_ms = allreduce_prediction(scenario).mean_s * 1e3
    out = []
    for rec in validations(cluster, runs_dir):
        schedule = build_schedule(rec.topology, scenario.shape)
        out.append(
            Check(
                cluster,
                rec.topology,
                rec.allreduce.measured.mean_s * 1e3,
                ar_pred_ms,
                rec.decentralized.measured.mean_s * 1e3,
                gossip_prediction(scenario, schedule).mean_s * 1e3,
            )
        )
    return out


def all_checks(
    kind: str, runs_dir: Path = RUNS_DIR, evidence_dir: Path = EVIDENCE_DIR, nccl_algo: str | None = NCCL_ALGO
) -> tuple[list[Check], dict[str, str]]:
    """(checks of every cluster that answers, {cluster: the one-line refusal} of those that do not)."""
    from runtime_model.core.errors import UserError

    rows, refused = [], {}
    for cluster in clusters(runs_dir):
        try:
            rows += cluster_checks(cluster, kind, runs_dir, evidence_dir, nccl_algo)
        except UserError as exc:
            refused[cluster] = str(exc)
    return rows, refused


def checks(kind: str) -> list[tuple[str, str, float, float]]:
    """(source = cluster, topology, measured speedup over DDP, predicted speedup) for kind "nccl-tests"
    or "step-anchor", from the files committed under benchmarks/results; a cluster whose inputs advise
    refuses contributes none (main() names it)."""
    return [(c.cluster, c.topology, c.measured_x, c.predicted_x) for c in all_checks(kind)[0]]


def summary(rows: list[Check]) -> dict:
    speedup = [abs(c.error) for c in rows]
    times = [abs(c.allreduce_pred_ms / c.allreduce_meas_ms - 1) for c in rows] + [
        abs(c.topology_pred_ms / c.topology_meas_ms - 1) for c in rows
    ]
    return {
        "speedups": len(speedup),
        "speedup_mean_abs_error": statistics.fmean(speedup),
        "speedup_max_abs_error": max(speedup),
        "time_mean_abs_error": statistics.fmean(times),
        "time_max_abs_error": max(times),
    }


def table(kind: str, rows: list[Check]) -> str:
    head = (
        f"{kind}\n{'cluster':48s} {'topology':22s} {'AR meas':>8s} {'AR pred':>8s} {'topo meas':>9s} "
        f"{'topo pred':>9s} {'x meas':>6s} {'x pred':>6s} {'error':>7s}"
    )
    body = [
        f"{c.cluster:48s} {c.topology:22s} {c.allreduce_meas_ms:8.1f} {c.allreduce_pred_ms:8.1f} "
        f"{c.topology_meas_ms:9.1f} {c.topology_pred_ms:9.1f} {c.measured_x:6.3f} {c.predicted_x:6.3f} {c.error:+7.1%}"
        for c in rows
    ]
    s = summary(rows)
    foot = (
        f"{kind}: {s['speedups']} speedups, mean |error| {s['speedup_mean_abs_error']:.1%}, max "
        f"{s['speedup_max_abs_error']:.1%}; iteration times mean |error| {s['time_mean_abs_error']:.1%}, max "
        f"{s['time_max_abs_error']:.1%}"
    )
    per_cluster = []
    for cluster in dict.fromkeys(c.cluster for c in rows):
        errs = [abs(c.error) for c in rows if c.cluster == cluster]
        per_cluster.append(
            f"  {cluster:48s} n={len(errs)} mean |error| {statistics.fmean(errs):.1%} max {max(errs):.1%}"
        )
    return "\n".join([head, *body, foot, *per_cluster])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--write", action="store_true", help="(re)write the nccl-tests files from the profiles first"
    )
    args = ap.parse_args(argv)
    if args.write:
        for path in write_inputs():
            print(f"wrote {path}")
    for kind in KINDS:
        for algo in (NCCL_ALGO, USER_DEFAULT_ALGO):
            start = time.perf_counter()
            rows, refused = all_checks(kind, nccl_algo=algo)
            label = f"{kind}, --nccl-algo {algo or 'not given (auto)'}"
            if algo == NCCL_ALGO:
                print(table(label, rows))
            else:  # the sensitivity only: the summary line
                print(table(label, rows).splitlines()[-1 - len({c.cluster for c in rows})])
            for cluster, why in refused.items():
                print(f"  refused: {cluster}: {why}")
            print(f"  ({time.perf_counter() - start:.1f} s)\n")


if __name__ == "__main__":
    main()
