"""`run_validation`: plan (torch-free checks + predictions), run both trainings, compare, record.

Two ways to run, like the profiler:
- inside a torchrun job (RANK / WORLD_SIZE / LOCAL_WORLD_SIZE / MASTER_ADDR set): this process is one
  rank of a job on one or many nodes; rank 0 plans and broadcasts the plan (the profile need only be on
  rank 0's machine), every rank trains, rank 0 compares, appends the record and returns the result;
- otherwise: it launches `nproc_per_node` ranks on this machine (rtmodel_validation.launch) and does the
  comparison itself. `ranks_per_node` < nproc_per_node makes pretend nodes: Decent-DP is told that
  local world size, so its node-aware topologies and the model use the same rank-to-node map.

Everything a user can get wrong is checked before a process starts (options, the rank environment, torch
and decent_dp being installed). A local run shows one line per phase on stderr (`progress`); its work
directory (job, log, reports) is removed afterwards, also on Ctrl-C / SIGTERM, and kept only when the error
names its log.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from rtmodel_util.backend_choice import BACKENDS, visible_gpus
from rtmodel_util.launch_env import (
    RANKS_PER_NODE_ENV,
    check_launch_env,
    check_local_ranks,
    check_timeout_s,
    in_launched_rank,
    is_lead_process,
    require_modules,
)
from rtmodel_util.process_control import run_directory, sigterm_exits
from rtmodel_util.shown import say
from rtmodel_validation.analysis import Comparison, compare, measure, verdict
from rtmodel_validation.errors import RankFailure, ValidationError
from rtmodel_validation.job import RankReport
from rtmodel_validation.options import ValidateOptions
from rtmodel_validation.plan import Plan, make_plan, run_shape
from rtmodel_validation.record_parts import ConsensusDistance, LocalSgdRun, RankPlace, RecordWorkload
from rtmodel_validation.results import ValidationResult, append_record
from runtime_model.core.errors import RtmodelError

if TYPE_CHECKING:
    from calibration.profile_view import Profile
    from runtime_model.core.scenario import ClusterShape

RANKS_NEEDED = ("torch", "decent_dp")  # what the ranks import: checked before any of them starts


def _printer(progress: bool):
    """One flushed line per phase on stderr (stdout stays the result), or nothing."""
    if not progress:
        return None
    return lambda line: say(f"[rtmodel validate] {line}", flush=True)


def _check_nproc(nproc_per_node, flag: str = "--nproc-per-node") -> None:
    """At least 2 ranks, at most what this machine runs (rtmodel_util.launch_env.max_local_ranks)."""
    if type(nproc_per_node) is int and nproc_per_node < 2:
        raise ValidationError(
            f"{flag} must be >= 2 (DDP vs Decent-DP needs >= 2 ranks), got {nproc_per_node}"
        )
    check_local_ranks(nproc_per_node, flag, 2, ValidationError)


def _local_shape(profile: Profile, nproc_per_node: int | None, ranks_per_node: int | None) -> ClusterShape:
    """Defaults: the profile's shape (so a locally taken profile validates with no shape options)."""
    if nproc_per_node is None or ranks_per_node is None:
        ps = profile.shape
        pn, pk = ps.gpus, ps.gpus_per_node
        if nproc_per_node is None:
            nproc_per_node = pn
            _check_nproc(pn, "--nproc-per-node (default: the profile's world size)")
        if ranks_per_node is None:
            ranks_per_node = pk if nproc_per_node == pn else nproc_per_node
    return run_shape(nproc_per_node, ranks_per_node)


def _torchrun_shape(ranks_per_node: int | None) -> ClusterShape:
    """--ranks-per-node, else RTMODEL_RANKS_PER_NODE, else LOCAL_WORLD_SIZE, else one node."""
    world = int(os.environ["WORLD_SIZE"])
    for value in (ranks_per_node, os.environ.get(RANKS_PER_NODE_ENV), os.environ.get("LOCAL_WORLD_SIZE")):
        if value not in (None, ""):
            return run_shape(world, int(value))
    return run_shape(world, world)


def assemble(plan: Plan, reports: list[RankReport], timestamp_utc: str) -> ValidationResult:
    """Every rank's report + the plan's predictions -> the result (rank 0 / the launcher)."""
    n = plan.shape.gpus
    seen = {r.rank for r in reports}
    missing = sorted(set(range(n)) - seen)
    if missing or len(reports) != n:
        raise RankFailure(
            None, "reporting", f"ranks {missing or '?'} did not report ({len(reports)} reports for {n} ranks)"
        )
    reports = sorted(reports, key=lambda r: r.rank)
    ar_times = [list(r.allreduce_s) for r in reports]
    dd_times = [list(r.decentralized_s) for r in reports]
    device = reports[0].device.split(":")[0]
    memory = _memory_of(plan, reports, device)
    ar = memory(compare("allreduce", plan.predicted.allreduce, measure(ar_times)), "allreduce")
    dd = memory(compare(plan.topology, plan.predicted.topology, measure(dd_times)), "decentralized")
    times = {"allreduce": ar_times, "decentralized": dd_times}
    local = _local_sgd_result(plan, reports, times)
    if "local_sgd" in local:
        local["local_sgd"] = memory(local["local_sgd"], "local_sgd")
    sharded = _fsdp_result(plan, reports, times, memory)
    d2c = [r.distance_to_consensus for r in reports]
    notes = list(plan.notes)
    hosts = [r.host for r in reports]
    if len(set(hosts)) < plan.shape.nodes:
        notes.append(
            f"{plan.shape.nodes} nodes of {plan.shape.gpus_per_node} ranks were emulated on "
            f"{len(set(hosts))} host(s): 'inter-node' traffic ran over the same machine"
        )
    prof_dev = plan.profile_info.device
    if prof_dev and prof_dev != device:
        notes.append(f"the profile was taken on {prof_dev} but this run used {device}")
    from rtmodel_validation.drift import compute_drift

    drift = compute_drift(plan, reports, ar.measured.mean_s, dd.measured.mean_s)
    return ValidationResult(
        timestamp_utc=timestamp_utc,
        profile=plan.profile_path,
        shape=plan.shape,
        topology=plan.topology,
        decent_dp_topology=plan.decent_dp_topology,
        recommended=plan.recommended,
        workload=RecordWorkload.from_run(plan.workload),
        iterations=plan.iterations,
        warmup=plan.warmup,
        allreduce=ar,
        decentralized=dd,
        verdict=verdict(ar, dd),
        distance_to_consensus=ConsensusDistance.of(d2c),
        ranks=[RankPlace(r.rank, r.local_rank, r.host) for r in reports],
        device=device,
        backend=reports[0].backend,
        advisor=plan.advisor,
        notes=notes,
        times_s=times,
        drift=drift,
        **local,
        **sharded,
    )


def _local_sgd_result(plan: Plan, reports: list[RankReport], times: dict) -> dict:
    """The result's local-SGD fields (none when the plan has no local-SGD run); adds its times to `times`."""
    if plan.local_sgd is None:
        return {}
    from rtmodel_validation.local_sgd import compare_local_sgd, prediction_breakdown

    ls_times = [list(r.local_sgd_s) for r in reports]
    times["local_sgd"] = ls_times
    run = LocalSgdRun(
        options=plan.local_sgd,
        warmup=plan.local_sgd_warmup,
        iterations=plan.local_sgd_iterations,
        predicted=prediction_breakdown(plan.predicted.local_sgd),
    )
    return {"local_sgd": compare_local_sgd(plan.predicted.local_sgd, measure(ls_times)), "local_sgd_run": run}


def _memory_of(plan: Plan, reports: list[RankReport], device: str):
    """(comparison, run) -> the comparison with every rank's measured peak memory (rtmodel_harness.peak_memory)
    and the memory model's (rtmodel_validation.sharded.predicted_peak: None, and why, where it cannot predict)."""
    from dataclasses import replace

    from rtmodel_validation.sharded import predicted_peak

    source = reports[0].peak_memory_source
    scenario = plan.model_inputs.scenario if plan.model_inputs is not None else None

    def memory(comparison: Comparison, run: str) -> Comparison:
        peaks = tuple(r.peak_memory_bytes.get(run) for r in reports)
        if scenario is None:
            predicted, why = None, "no model inputs in the plan"
        else:
            predicted, why = predicted_peak(
                scenario, run, plan.workload, device, reports[0].backend, plan.local_sgd
            )
        return replace(
            comparison,
            peak_memory_bytes=peaks if any(p is not None for p in peaks) else None,
            peak_memory_source=source,
            predicted_peak_memory_bytes=predicted,
            predicted_peak_memory_source=why,
        )

    return memory


def _fsdp_result(plan: Plan, reports: list[RankReport], times: dict, memory) -> dict:
    """The result's fsdp field (none without --baseline fsdp); adds its times to `times`. Without the
    model's FSDP2 prediction its predicted times and error are NaN (null in the record)."""
    if plan.baseline != "fsdp":
        return {}
    fs_times = [list(r.fsdp_s) for r in reports]
    times["fsdp"] = fs_times
    measured = measure(fs_times)
    if plan.predicted.fsdp is not None:
        comparison = compare("fsdp", plan.predicted.fsdp, measured)
    else:
        nan = float("nan")
        comparison = Comparison("fsdp", nan, nan, nan, measured, nan)
    return {"fsdp": memory(comparison, "fsdp")}


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def run_validation(profile_path: str | Path, opts: ValidateOptions | None = None) -> ValidationResult | None:
    """Train with DDP and with Decent-DP on opts.topology (or the advisor's pick) and compare with the model.

    Returns the result, also appended to opts.results_path unless it is None (the default: nothing is
    written; `rtmodel validate` shows the result first and then appends it to its --results file,
    rtmodel_validation.results.default_results_path() unless given). Its directory must exist. Inside a
    torchrun job ranks other than 0 return None. Raises ValidationError (one line) for every user mistake.
    `opts` (rtmodel_validation.options.ValidateOptions; None: every default): opts.progress prints one line per
    phase on stderr (rank 0 under torchrun); opts.local_sgd (checked options,
    rtmodel_validation.local_sgd.local_sgd_options) adds a third run, local SGD, timed and predicted the same way;
    opts.backend: auto | nccl | gloo (rtmodel_util.backend_choice; auto is gloo where ranks share a GPU);
    opts.precision / opts.optimizer: train with these instead of the profile's recipe (rtmodel_harness.recipe).
    """
    opts = ValidateOptions() if opts is None else opts
    check_timeout_s(opts.timeout_s, "--timeout-s", ValidationError)
    if opts.backend not in BACKENDS:
        raise ValidationError(f"--backend must be one of {', '.join(BACKENDS)}, got {opts.backend!r}")
    if opts.nproc_per_node is not None:
        _check_nproc(opts.nproc_per_node)
    if opts.ranks_per_node is not None:
        check_local_ranks(opts.ranks_per_node, "--ranks-per-node", 1, ValidationError)
    if opts.results_path is not None and is_lead_process():  # only rank 0 writes it: checked before the run
        from rtmodel_validation.results_file import check_results_output

        check_results_output(opts.results_path, "--results", inputs={"--profile": profile_path})
    if in_launched_rank():
        return _run_in_torchrun(profile_path, opts)
    from calibration.profile_view import load_profile

    profile = load_profile(profile_path)  # once per run: the shape's defaults and the plan both use it
    shape = _local_shape(profile, opts.nproc_per_node, opts.ranks_per_node)
    plan = make_plan(profile, shape, opts)
    require_modules(*RANKS_NEEDED, error=ValidationError)
    from rtmodel_harness.local_launch import check_local_launch
    from rtmodel_harness.recipe import Recipe

    # fp16 needs CUDA: refused before any rank
    recipe = Recipe(plan.workload.precision, plan.workload.optimizer)
    backend, why = check_local_launch(recipe, opts.backend, shape.gpus, visible_gpus(), ValidationError)
    say = _printer(opts.progress)
    if say:
        say(
            f"plan: {plan.topology} (Decent-DP) vs All-Reduce (DDP) on {shape.gpus} ranks "
            f"({shape.nodes} node(s) x {shape.gpus_per_node}), {opts.iterations} timed iterations each"
            + (f"; then {plan.predicted.local_sgd.name}" if opts.local_sgd is not None else "")
            + ("; then FSDP2 (--baseline fsdp)" if plan.baseline == "fsdp" else "")
        )
    if say and why:
        say(why)
    timestamp = _now()
    reports = _run_local(plan, shape.gpus, opts.timeout_s, say, backend)
    return _compare_and_record(plan, reports, timestamp, opts.results_path, say)


def _compare_and_record(
    plan: Plan, reports: list[RankReport], timestamp: str, results_path, say
) -> ValidationResult:
    """The launcher's (or rank 0's) last step: the result from every rank's report, appended when asked."""
    if say:
        say("comparing the measured times with the model's predictions")
    result = assemble(plan, reports, timestamp)
    if results_path is not None:
        append_record(results_path, result)
    return result


def _run_local(plan: Plan, nproc: int, timeout_s: float, say, backend: str = "auto") -> list[RankReport]:
    """Launch the job in a fresh work directory; remove it afterwards unless the error names its log."""
    from rtmodel_validation.launch import launch_local

    # SIGTERM: SystemExit, so torchrun is stopped and the directory removed (even a SIGKILL removes it)
    with sigterm_exits(), run_directory("rtmodel-validate-") as run:
        workdir = run.path
        try:
            if say:
                say(f"launching {nproc} ranks (torchrun; log: {workdir / 'job.log'})")
            return launch_local(plan.rank_job(timeout_s, backend), nproc, timeout_s, workdir, progress=say)
        except RtmodelError as exc:
            if str(workdir) in str(exc):  # a rank's failure names the log: keep it for the user
                run.keep()
            raise


def _run_in_torchrun(profile_path: str | Path, opts: ValidateOptions) -> ValidationResult | None:
    env = check_launch_env()  # before the rendezvous: a RANK >= WORLD_SIZE would wait out the whole timeout
    require_modules(*RANKS_NEEDED, error=ValidationError)
    import torch.distributed as dist

    from rtmodel_validation.runner import init_distributed, run_rank

    say = _printer(opts.progress and env.rank == 0)
    try:
        created = init_distributed(opts.timeout_s, opts.backend)
    except (RuntimeError, OSError, ValueError) as exc:  # the rendezvous: a rank gone, no MASTER_ADDR
        raise RankFailure(
            env.rank, "setup/init", f"{type(exc).__name__}: {' '.join(str(exc).split())}"
        ) from None
    if say:
        from rtmodel_harness.distributed import backend_note

        why = backend_note(opts.backend)
        if why:
            say(why)
    try:
        rank = dist.get_rank()
        box: list = [None]
        if rank == 0:
            try:
                from calibration.profile_view import load_profile

                box[0] = make_plan(load_profile(profile_path), _torchrun_shape(opts.ranks_per_node), opts)
            except ValueError as exc:
                box[0] = f"{exc}"
        dist.broadcast_object_list(box, src=0)
        if isinstance(box[0], str):
            raise ValidationError(box[0])
        plan: Plan = box[0]
        timestamp = _now()
        reports = run_rank(plan.rank_job(opts.timeout_s, opts.backend), on_phase=say)
        if rank != 0:
            return None  # the barrier in _quiet_teardown holds this rank until rank 0 has its result
        return _compare_and_record(plan, reports, timestamp, opts.results_path, say)
    finally:
        if created:
            _quiet_teardown(dist)


def _quiet_teardown(dist) -> None:
    """Every rank waits until rank 0 has written the result, then all tear down together: a rank that
    closes its gloo connections while a peer still uses them can abort that peer."""
    from rtmodel_util.rank_exit import release_process_groups

    try:
        dist.barrier()
    except RuntimeError:
        pass  # a peer is already gone; the error that caused it is what the user sees
    release_process_groups()
