"""Traces of your own DDP training as the model's compute, buckets and All-Reduce: the scenario, the
check of it against the traced iteration, and the ranks' measured spread.

Why: the trace holds what presets guess (compute, the gradient buckets, when each is ready) measured on
your GPUs with your model and recipe. The model rebuilt from it must first reproduce the iteration it
came from (TraceCheck: the rebuilt DDP step against the measured one, and the all-reduce's exposed tail);
other n then change only what n changes: the links beyond the trace's own group (presets, or
--nccl-tests) and the wait for the slowest rank.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from calibration.trace.bucket_bytes import GradientBytes, bucket_bytes
from calibration.trace.step_breakdown import TracedStep, traced_steps
from calibration.trace.step_stats import StepStats, step_stats
from calibration.trace.trace_errors import TraceError, check_distinct, check_ranks, check_same_run
from calibration.trace.trace_events import RankTrace, read_rank_trace
from calibration.trace.trace_links import traced_network
from calibration.variation_fit import fit_variation
from runtime_model.core.distributions import NormalCompute
from runtime_model.core.physical_bounds import MAX_ALGBW_Bps
from runtime_model.core.scenario import (
    Bucket,
    BucketLayout,
    ClusterShape,
    Compute,
    Network,
    Scenario,
)
from runtime_model.core.variation import Variation


@dataclass(frozen=True)
class RankSpread:
    """Each traced rank's mean iteration and compute (forward + backward), in seconds."""

    ranks: tuple[int, ...]
    iteration_s: tuple[float, ...]
    compute_s: tuple[float, ...]

    @property
    def compute_spread(self) -> float:
        """(slowest - fastest) / mean of the ranks' compute."""
        c = np.asarray(self.compute_s)
        return float((c.max() - c.min()) / c.mean()) if c.size > 1 else 0.0

    def line(self) -> str:
        slow = int(np.argmax(self.compute_s))
        return (
            f"{len(self.ranks)} ranks traced: compute {min(self.compute_s) * 1e3:,.1f}-{max(self.compute_s) * 1e3:,.1f} ms "
            f"(spread {self.compute_spread:.1%}, slowest rank {self.ranks[slow]}), iteration "
            f"{min(self.iteration_s) * 1e3:,.1f}-{max(self.iteration_s) * 1e3:,.1f} ms"
        )


@dataclass(frozen=True)
class TraceCheck:
    """The rebuilt model at the trace's own shape against what the trace measured."""

    measured_s: float
    predicted_s: float
    tail_measured_s: float
    tail_predicted_s: float
    allreduce_measured_s: float  # the buckets' all-reduce kernels per iteration, as traced (the least rank's)
    allreduce_links_s: float  # the same all-reduces from the links alone (presets or --nccl-tests)

    @property
    def error(self) -> float:
        return self.predicted_s / self.measured_s - 1.0

    @property
    def tail_error_of_iteration(self) -> float:
        """The exposed all-reduce's miss, as a share of the iteration (a tail of 0 has no relative error)."""
        return (self.tail_predicted_s - self.tail_measured_s) / self.measured_s

    def line(self) -> str:
        head = (
            f"the model rebuilt from the trace gives {self.predicted_s * 1e3:,.1f} ms per iteration at its own "
            f"shape, measured {self.measured_s * 1e3:,.1f} ms ({self.error:+.1%}); all-reduce exposed past "
            f"backward {self.tail_predicted_s * 1e3:,.2f} ms, measured {self.tail_measured_s * 1e3:,.2f} ms"
        )
        if self.allreduce_measured_s <= 0:
            return head
        ratio = self.allreduce_links_s / self.allreduce_measured_s - 1.0
        return (
            f"{head}; its buckets' all-reduces took {self.allreduce_measured_s * 1e3:,.2f} ms per iteration, the links "
            f"alone give {self.allreduce_links_s * 1e3:,.2f} ms ({ratio:+.0%})"
        )


@dataclass(frozen=True)
class TracedScenario:
    """The scenario at the target shape, where each input came from, and the trace's checks."""

    scenario: Scenario
    traced_shape: ClusterShape
    provenance: dict[str, str]
    notes: tuple[str, ...]
    check: TraceCheck
    spread: RankSpread
    gpu_preset: str | None
    busy_s: tuple[float, float] = (0.0, 0.0)  # the GPU's compute kernels in forward's and backward's windows
    stats: StepStats | None = None  # the all-reduce's spread over steps, the device's idle share
    on_cpu: bool = False  # CPU ranks over gloo (host_events)
    bytes_source: str = "measured"  # else where the buckets' bytes came from (bucket_bytes)


def read_traces(paths: list[Path]) -> list[RankTrace]:
    """One rank's trace, or one per rank of one run (checked: trace_errors.check_same_run); a directory
    stands for the traces in it (torch.profiler's tensorboard_trace_handler writes one per rank there).
    Every file is checked to be another file before any is parsed (trace_errors.check_distinct), and each
    rank once as it is read, so a file given twice costs no parse."""
    files = _trace_files([Path(p) for p in paths])
    check_distinct(files)
    traces: list[RankTrace] = []
    for f in files:
        traces.append(read_rank_trace(f))
        check_ranks(traces)
    if len(traces) > 1:
        check_same_run(traces)
    return traces


def _trace_files(paths: list[Path]) -> list[Path]:
    files = []
    for p in paths:
        if not p.is_dir():
            files.append(p)
            continue
        inside = sorted(f for f in p.iterdir() if f.name.endswith((".json", ".json.gz")) and f.is_file())
        if not inside:
            raise TraceError(f"--trace {p}: a directory without .json or .json.gz traces")
        files.extend(inside)
    return files


def scenario_from_traces(traces: list[RankTrace], gpus: int, gpus_per_node: int | None, network: Network,
                         gpu_preset: str | None, gradient_bytes: GradientBytes | None = None) -> TracedScenario:  # fmt: skip
    """The model's scenario for `gpus` from the traces, on `network` (presets or nccl-tests) beyond the
    trace's own all-reduce, which keeps its measured times at the trace's group shape; `gradient_bytes`
    (the user's model) sizes buckets whose bytes the trace does not record."""
    steps = {t.rank: traced_steps(t) for t in traces}
    first = traces[0]
    traced_shape, shape_note = _traced_shape(traces, gpus_per_node)
    count = _bucket_count(first, steps[first.rank])
    times = _bucket_times(traces, steps, count)
    if first.world_size > 1:
        _check_rates(first, steps[first.rank], count, times)
    buckets, bytes_source = _buckets(first, steps[first.rank], count, times, gradient_bytes)
    compute = _compute(steps, traced_shape.gpus_per_node)
    if len(traces) < first.world_size:
        compute = _without_wait(compute, traced_shape)
    network = _backend_network(network, first)
    algo = network.nccl_algo and "ring"  # NCCL's ring; gloo's flat ring (None)
    net, link_line = traced_network(network, traced_shape, buckets, times, algo, bytes_source == "measured")
    at_trace = Scenario(traced_shape, net, compute, BucketLayout(buckets, buckets), "traced")
    check = _check(at_trace, steps, network, float(times.sum()))
    k = gpus_per_node or min(traced_shape.gpus_per_node, gpus)
    scenario = replace(at_trace, shape=ClusterShape(gpus, k), description=f"traced {Path(first.path).name}")
    spread = RankSpread(
        tuple(steps),
        tuple(float(np.mean([s.iteration_s for s in v])) for v in steps.values()),
        tuple(float(np.mean([s.compute_s for s in v])) for v in steps.values()),
    )
    stats = step_stats(steps, count, first.on_cpu)
    provenance = _provenance(traces, steps, compute, buckets, check, net) | {"links": link_line}
    provenance |= {"allreduce per step": stats.allreduce_line(), "idle": stats.idle_line()}
    if bytes_source != "measured":
        provenance["buckets"] = f"{len(buckets)} DDP buckets, bytes {bytes_source}"
    return TracedScenario(
        scenario, traced_shape, provenance, _notes(traces, spread, shape_note),
        check, spread, gpu_preset, _busy(steps), stats, first.on_cpu, bytes_source,
    )  # fmt: skip


def _backend_network(network: Network, first: RankTrace) -> Network:
    """Gloo's collectives as profile calibration takes them: its flat ring (no NCCL algorithm) on its two
    worker threads at once; CPU ranks' network is named as theirs."""
    if first.backend.lower() != "gloo" and not first.on_cpu:
        return network
    from calibration.calibrate_profile import GLOO_WORKER_THREADS

    name = (
        f"CPU ranks over gloo, traced; presets {network.name} where it measured no link"
        if first.on_cpu
        else network.name
    )
    return replace(network, nccl_algo=None, concurrent_collectives=GLOO_WORKER_THREADS, name=name)


def _busy(steps: dict[int, tuple[TracedStep, ...]]) -> tuple[float, float]:
    every = [s for v in steps.values() for s in v]
    return float(np.mean([s.forward_busy_s for s in every])), float(
        np.mean([s.backward_busy_s for s in every])
    )


def _traced_shape(traces: list[RankTrace], given_k: int | None) -> tuple[ClusterShape, str]:
    """The traced world on its hosts: ranks per host counted from the headers' host names where every
    rank was traced; else the GPUs a header lists (ranks fill hosts); else (one GPU visible to each
    process) --gpus-per-node, or one node's worth; the line says which when it is not counted."""
    first = traces[0]
    world = max(1, first.world_size)
    hosts = [t.host_name for t in traces]
    if world == 1:
        return ClusterShape(1, 1), ""
    if len(traces) == world and all(hosts):
        per_host = {h: hosts.count(h) for h in hosts}
        k = math.gcd(*per_host.values())
        return ClusterShape(world, k), ""
    if first.gpus_on_host > 1:
        return ClusterShape(world, math.gcd(world, first.gpus_on_host)), ""
    k = math.gcd(world, given_k or world)
    why = f"--gpus-per-node {given_k}" if given_k else "one node"
    return ClusterShape(world, k), (
        f"the trace's header lists one GPU and no host per rank: its {world} ranks are taken as {world // k} "
        f"node(s) of {k} ({why}; trace every rank to count them)"
    )


def _bucket_count(trace: RankTrace, steps: tuple[TracedStep, ...]) -> int:
    """The number of DDP buckets most steps saw; TraceError where none ran one."""
    counts = [len(s.buckets) for s in steps]
    count = max(set(counts), key=counts.count)
    if count == 0 and trace.world_size > 1 and trace.host_all_reduce.step.size:
        raise TraceError(
            f"--trace {trace.path}: DDP's all-reduce calls (record_param_comms) ran no NCCL kernel on the GPU in a "
            f"world of {trace.world_size}: no bucket's time was measured (DDP over gloo on GPUs? train with NCCL, "
            "or trace its CPU ranks)"
        )
    if count == 0:
        raise TraceError(
            f"--trace {trace.path}: no DDP gradient all-reduce on autograd's thread "
            "(is this DistributedDataParallel training? profile with record_shapes=True)"
        )
    return count


def _buckets(
    trace: RankTrace, steps: tuple[TracedStep, ...], count: int, times, given: GradientBytes | None
) -> tuple[tuple[Bucket, ...], str]:
    """(DDP's buckets as the steps saw them: per bucket the median bytes (else bucket_bytes' from the
    user's model) and readiness, where the bytes came from)."""
    seen = [s.buckets for s in steps if len(s.buckets) == count]
    recorded = np.median([[b.nbytes for b in row] for row in seen], axis=0)
    nbytes, source = bucket_bytes(recorded, times, given, trace.path)
    ready = np.median([[b.ready_fraction for b in row] for row in seen], axis=0)
    ready = np.maximum.accumulate(ready)  # DDP launches buckets in order: each ready no earlier
    return tuple(Bucket(int(round(b)), float(r)) for b, r in zip(nbytes, ready, strict=True)), source


def _check_rates(trace: RankTrace, steps: tuple[TracedStep, ...], count: int, times: np.ndarray) -> None:
    """Ranks that exchanged gradients took time to: every bucket's all-reduce more than 0 us, and, where
    its bytes are recorded, no faster than MAX_ALGBW_Bps (bytes / time; NVLink 5 carries 1.8 TB/s per GPU,
    both directions together: 10 TB/s is beyond any machine's links, as for nccl-tests' algbw)."""
    seen = [s.buckets for s in steps if len(s.buckets) == count]
    nbytes = np.median([[b.nbytes for b in row] for row in seen], axis=0)
    for i, (size, t) in enumerate(zip(nbytes, times, strict=True)):
        said = f"{size:,.0f} bytes" if np.isfinite(size) else "its gradients"
        if not (np.isfinite(t) and t > 0):
            raise TraceError(
                f"--trace {trace.path}: bucket {i + 1}'s all-reduce of {said} took {t * 1e6:g} us in a world of "
                f"{trace.world_size}: ranks that exchange gradients take more than 0 us; not a recording"
            )
        if np.isfinite(size) and size / t > MAX_ALGBW_Bps:
            raise TraceError(
                f"--trace {trace.path}: bucket {i + 1}'s all-reduce moved {said} in {t * 1e6:,.3f} us: "
                f"{size / t / 1e9:,.0f} GB/s is beyond any machine's links (at most {MAX_ALGBW_Bps / 1e9:,.0f} GB/s); "
                "not a recording"
            )


def _bucket_times(
    traces: list[RankTrace], steps: dict[int, tuple[TracedStep, ...]], count: int
) -> np.ndarray:
    """Each bucket's all-reduce time: the least over the traced ranks of its median. A rank that reaches
    a bucket early waits in the kernel for the last one to arrive; the last one's time is the transfer,
    and the wait is the ranks' spread, which the model adds itself (the slowest of n)."""
    per_rank = []
    for t in traces:
        rows = [s.buckets for s in steps[t.rank] if len(s.buckets) == count]
        if rows:
            per_rank.append(np.median([[b.duration_s for b in row] for row in rows], axis=0))
    return np.min(per_rank, axis=0)


def _compute(steps: dict[int, tuple[TracedStep, ...]], ranks_per_node: int) -> Compute:
    """Forward, backward and optimizer as measured; with several ranks traced, their persistent speeds and
    the i.i.d. rest as a profile's are fitted (calibration.variation_fit); else the spread over iterations."""
    all_steps = [s for v in steps.values() for s in v]
    rows = [np.array([s.compute_s for s in v]) for v in steps.values()]
    if len(rows) > 1:
        fit = fit_variation(rows, ranks_per_node)
        variation, iid = fit.variation, fit.iid_samples_s
    else:
        variation, iid = Variation(), rows[0]
    c = np.array([s.compute_s for s in all_steps])
    sd = float(iid.std(ddof=1)) if iid.size > 1 else 0.0
    return Compute(
        float(np.mean([s.forward_s for s in all_steps])),
        float(np.mean([s.backward_s for s in all_steps])),
        float(np.mean([s.optimizer_s for s in all_steps])),
        NormalCompute(float(c.mean()), sd),
        source="measured: torch.profiler trace",
        variation=variation,
    )  # fmt: skip


def _without_wait(compute: Compute, shape: ClusterShape) -> Compute:
    """A rank traced alone in a synchronous world ran at the pace of the slowest of its n: its mean compute
    is the model's E[max of n] there, so the i.i.d. mean is that less the expected excess of the max (the
    model adds it back at any n). Where every rank was traced, each rank's own speed is measured instead."""
    from runtime_model.prediction.iteration import compute_wait_of_all

    if not compute.variation.is_iid or compute.distribution.sd_s == 0:
        return compute
    excess = compute_wait_of_all(compute, shape)[0] - compute.compute_s
    if excess <= 0 or excess >= compute.forward_s:
        return compute
    dist = compute.distribution
    return replace(
        compute,
        forward_s=compute.forward_s - excess,
        distribution=NormalCompute(dist.mean_s - excess, dist.sd_s),
        source=compute.source
        + f" (less {excess * 1e3:.2f} ms: the slowest of {shape.gpus}'s expected excess)",
    )


def _check(
    at_trace: Scenario, steps: dict[int, tuple[TracedStep, ...]], links: Network, traced_ar_s: float
) -> TraceCheck:
    """The rebuilt model at the trace's shape against the trace; and the links' own all-reduce there (the
    network the model assumes for other n) against the traced kernels."""
    from runtime_model.prediction.iteration import allreduce_prediction

    predicted = allreduce_prediction(at_trace)
    links_only = (
        allreduce_prediction(replace(at_trace, network=links)).comm_s if at_trace.shape.gpus > 1 else 0.0
    )
    all_steps = [s for v in steps.values() for s in v]
    # every rank of a synchronous step waits for the slowest: the iteration is the slowest rank's
    measured = max(float(np.mean([s.iteration_s for s in v])) for v in steps.values())
    return TraceCheck(
        measured,
        predicted.mean_s,
        float(np.mean([s.tail_s for s in all_steps])),
        predicted.exposed_comm_s,
        traced_ar_s if at_trace.shape.gpus > 1 else 0.0,
        links_only,
    )


def _provenance(traces, steps, compute: Compute, buckets, check: TraceCheck, net: Network) -> dict[str, str]:
    first = traces[0]
    count = sum(len(v) for v in steps.values())
    files = first.path if len(traces) == 1 else f"{len(traces)} files ({first.path}, ...)"
    device = "CPU ranks over gloo" if first.on_cpu else first.gpu_name
    gpu = (
        f"{device}, rank {first.rank} of {first.world_size}"
        if len(traces) == 1
        else f"{device}, {len(traces)} of {first.world_size} ranks"
    )
    return {
        "compute": (
            f"measured: torch.profiler trace {files} ({gpu}; {count} steps): forward {compute.forward_s * 1e3:,.1f} ms "
            f"(with the loop's gaps), backward {compute.backward_s * 1e3:,.1f} ms, optimizer {compute.optimizer_s * 1e3:,.1f} ms, "
            f"sd {compute.distribution.sd_s * 1e3:,.2f} ms over iterations"
        ),
        "buckets": f"measured: {len(buckets)} DDP buckets, {sum(b.nbytes for b in buckets) / 1e6:,.1f} MB per iteration",
        "trace check": check.line(),
        "network": f"{net.name}; the trace's own all-reduce times at its shape",
    }  # fmt: skip


def _notes(traces, spread: RankSpread, shape_note: str) -> tuple[str, ...]:
    notes = []
    if traces[0].on_cpu:
        notes.append(
            "CPU ranks: the trace ran on CPUs over gloo, no GPU: their compute is the host's ops, their "
            "all-reduce gloo's (2 worker threads); the answer is for CPU ranks like them"
        )
    if len(traces) > 1:
        notes.append(spread.line())
    if shape_note:
        notes.append(shape_note)
    first = traces[0]
    if len(traces) < first.world_size:
        notes.append(
            f"{len(traces)} of {first.world_size} ranks traced: the other ranks are taken to be like "
            f"{'it' if len(traces) == 1 else 'them'} (give every rank's trace to measure their spread)"
        )
    return tuple(notes)
