"""What a validation run will do and what the model predicts for it, decided before any rank starts.

Why a separate, torch-free step: every user mistake (unknown or inapplicable topology, a profile from
another cluster shape, bad iteration counts, a topology Decent-DP cannot run) is caught here in one
clear line, before N processes spend seconds importing torch. The plan is plain JSON-able data, so the
launcher hands the ranks exactly what they need (`Plan.rank_job`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING

from rtmodel_validation.errors import ShapeMismatch, TopologyUnavailable, ValidationError
from rtmodel_validation.job import RankJob, RunWorkload, fields_of
from runtime_model.core.constraints import MAX_RUN_ITERATIONS
from runtime_model.core.defaults import BUCKET_CAP_MIB

if TYPE_CHECKING:
    from calibration.profile_view import Profile
    from rtmodel_validation.options import ValidateOptions
    from runtime_model.core.scenario import ClusterShape, Scenario
    from runtime_model.prediction.iteration import IterationPrediction
    from runtime_model.prediction.local_sgd import LocalSgd, LocalSgdPrediction
    from runtime_model.topology.schedule import Schedule

MIN_WARMUP = 2  # Decent-DP builds its buckets lazily in the forward of its 2nd iteration; DDP rebuilds after the 1st


def run_shape(world_size: int, ranks_per_node: int) -> ClusterShape:
    """The run's shape (ranks node-major, possibly on pretend nodes), checked in validation's own terms."""
    from runtime_model.core.scenario import ClusterShape

    if world_size < 2:
        raise ValidationError(f"a validation needs at least 2 ranks, got {world_size}")
    if ranks_per_node < 1 or world_size % ranks_per_node:
        raise ValidationError(
            f"--ranks-per-node {ranks_per_node} does not divide the world size {world_size}"
        )
    return ClusterShape(world_size, ranks_per_node)


def describe_shape(shape: ClusterShape) -> str:
    """'4 ranks (2 node(s) x 2)': a run's shape in validation's messages."""
    return f"{shape.gpus} ranks ({shape.nodes} node(s) x {shape.gpus_per_node})"


@dataclass(frozen=True)
class AdvisorSummary:
    """What the advisor said for the run's shape (validate --recommended): its pick, verdict and speedup."""

    recommendation: str
    too_close_to_call: bool
    verdict: str
    predicted_speedup: float

    @classmethod
    def from_json(cls, doc: dict) -> AdvisorSummary:
        """The record's `advisor` entry as written (asdict); ValidationError naming what it lacks."""
        values = fields_of(cls, doc, "the record's advisor entry")
        return cls(**{**values, "predicted_speedup": _float(values["predicted_speedup"])})


@dataclass(frozen=True)
class ProfileInfo:
    """Where the profile was taken, as the plan keeps it for the run's notes."""

    backend: str | None = None
    device: str | None = None
    torch_version: str | None = None
    node_names: list[str] | None = None
    created_utc: str | None = None


def _float(x) -> float:
    """A record's number: null (JSON's inf/nan, rtmodel_util's json_safe) reads back as NaN."""
    return float("nan") if x is None else float(x)


@dataclass(frozen=True)
class PlanPredictions:
    """The model's predictions for the run's exact shape, one per training the run times."""

    allreduce: IterationPrediction  # PyTorch DDP
    topology: IterationPrediction  # Decent-DP on Plan.topology
    local_sgd: LocalSgdPrediction | None = None  # with local-SGD options: per inner step
    fsdp: IterationPrediction | None = None  # --baseline fsdp, where the model has it (rtmodel_validation.sharded)


@dataclass(frozen=True)
class PlanInputs:
    """The model's inputs the plan predicted from: the scenario (the profile's compute and links, the
    run's shape) and the Decent-DP topology's schedule. Kept so drift.py can predict again with today's
    compute, and sharded.predicted_peak the run's memory, without calibrating a second time."""

    scenario: Scenario
    schedule: Schedule


@dataclass
class Plan:
    """Everything decided before the ranks start; `predicted` holds the model's numbers for this shape."""

    profile_path: str
    shape: ClusterShape
    topology: str  # rtmodel's name
    decent_dp_topology: str  # the name in decent_dp.topo.TopologyReg
    registered_by_rtmodel: bool  # True: rtmodel_decentdp must be imported on every rank
    workload: RunWorkload
    iterations: int
    warmup: int  # effective: the user's, raised to one schedule period + MIN_WARMUP (effective_warmup)
    predicted: PlanPredictions
    recommended: bool = False
    advisor: AdvisorSummary | None = None  # with --recommended
    notes: list[str] = field(default_factory=list)
    profile_info: ProfileInfo = field(default_factory=ProfileInfo)
    local_sgd: LocalSgd | None = None  # None: no local-SGD run
    local_sgd_warmup: int = 0  # inner steps, whole periods (rtmodel_validation.local_sgd.local_sgd_counts)
    local_sgd_iterations: int = 0
    baseline: str | None = None  # "fsdp": a sharded training too (rtmodel_validation.sharded); None: none
    # the model's inputs: the profile's compute, and predictions again with today's compute (drift.py)
    model_inputs: PlanInputs | None = field(default=None, repr=False, compare=False)

    @property
    def profile_compute_s(self) -> float:
        """The profile's compute per iteration (forward + backward + optimizer); 0 without model inputs."""
        if self.model_inputs is None:
            return 0.0
        compute = self.model_inputs.scenario.compute
        return compute.compute_s + compute.optimizer_s

    def rank_job(self, timeout_s: float, backend: str = "auto") -> RankJob:
        """The part the ranks need."""
        return RankJob(
            world_size=self.shape.gpus,
            ranks_per_node=self.shape.gpus_per_node,
            topology=self.topology,
            decent_dp_topology=self.decent_dp_topology,
            registered_by_rtmodel=self.registered_by_rtmodel,
            workload=self.workload,
            iterations=self.iterations,
            warmup=self.warmup,
            timeout_s=timeout_s,
            local_sgd=self.local_sgd,
            backend=backend,
            baseline=self.baseline,
        )

    def to_dict(self) -> dict:
        return {k: v for k, v in asdict(replace(self, model_inputs=None)).items() if k != "model_inputs"}


def check_counts(iterations: int, warmup: int) -> None:
    if isinstance(iterations, bool) or not isinstance(iterations, int) or not 1 <= iterations <= MAX_RUN_ITERATIONS:
        raise ValidationError(f"--iterations must be an integer from 1 to {MAX_RUN_ITERATIONS:,}, got {iterations!r}")
    if isinstance(warmup, bool) or not isinstance(warmup, int) or not MIN_WARMUP <= warmup <= MAX_RUN_ITERATIONS:
        raise ValidationError(
            f"--warmup must be an integer from {MIN_WARMUP} to {MAX_RUN_ITERATIONS:,}, got {warmup!r} (Decent-DP sets up its buckets "
            "in its 2nd iteration and DDP rebuilds its buckets after the 1st: those must not be timed)"
        )


def effective_warmup(warmup: int, schedule) -> int:
    """The warm-up the run uses: the user's, but at least one full period of the schedule + MIN_WARMUP.

    Why: NCCL may set a group's communicator up in its first collective, and Decent-DP first gossips
    on round r at about iteration r (one-peer-exp has 5 rounds at 32 ranks), so a shorter warm-up
    times set-up. DDP's single all-reduce group (period 1) is covered by MIN_WARMUP already.
    """
    period = 1 if schedule.static_graph is not None else schedule.period
    return max(warmup, period + MIN_WARMUP)


def check_shape(profile: Profile, shape: ClusterShape, origin: str) -> None:
    """The model is validated on the shape it was calibrated on: refuse a profile from another shape."""
    ps = profile.shape
    if ps != shape:
        raise ShapeMismatch(
            f"profile {origin} was taken on {describe_shape(ps)} but this run has "
            f"{describe_shape(shape)}; profile the run's shape first, or run with --nproc-per-node {ps.gpus} "
            f"--ranks-per-node {ps.gpus_per_node}"
        )


def resolve_workload(
    profile: Profile, model: str | None, model_args: dict | None, precision: str | None = None,
    optimizer: str | None = None,
) -> tuple[RunWorkload, list[str]]:
    """The run's workload: the profiled one (its recipe too), or --model/--model-arg/--precision/--optimizer
    overrides (said in a note)."""
    from rtmodel_harness.model_choice import (
        BUILTIN_DEFAULTS,
        check_batch,
        check_model_choice,
        resolve_model_args,
    )

    wl = profile.workload
    prof_model = str(wl.model)
    prof_args = dict(wl.model_args)
    batch = wl.batch_per_rank
    if batch is None:
        raise ValidationError("the profile's workload has no batch_per_rank; re-profile with a current rtmodel")
    cap = wl.bucket_cap_mb or BUCKET_CAP_MIB
    notes: list[str] = []
    if model is None:
        _refuse_documents_code(prof_model)
        run_model, run_args = prof_model, {**prof_args, **(model_args or {})}
    else:
        run_model, run_args = model, dict(model_args or {})
    try:
        resolved = check_model_choice(run_model, run_args)
        check_batch(run_model, batch, "the profile's batch_per_rank")
    except ValueError as exc:
        raise ValidationError(str(exc)) from None
    recipe, recipe_notes = _resolve_recipe(wl, precision, optimizer)
    notes.extend(recipe_notes)
    if model is not None or model_args:
        try:  # the profile's own model is only described, never imported: a document runs no code
            prof_resolved = resolve_model_args(prof_model, prof_args) if prof_model in BUILTIN_DEFAULTS else prof_args
        except ValueError:
            prof_resolved = prof_args
        if (run_model, resolved) != (prof_model, prof_resolved):
            notes.append(
                f"the run trains {run_model} {resolved} but the profile measured {prof_model} {prof_resolved}: "
                "the predictions use the profile's compute times, so part of any error is that difference"
            )
    return RunWorkload(run_model, resolved, batch, cap, recipe.precision, recipe.optimizer), notes


def _refuse_documents_code(prof_model: str) -> None:
    """A profile is data shared between people and machines: the model it names runs only when it is
    built in or the command line names it (--model), never because the document says so."""
    from rtmodel_harness.model_choice import BUILTIN_DEFAULTS

    if prof_model not in BUILTIN_DEFAULTS:
        shown = ascii(prof_model[:120])
        raise ValidationError(
            f"the profile names a model of your own, {shown}; rtmodel runs no code a document names: "
            "pass --model with the factory you want to train (and trust) on the command line"
        )


def _resolve_recipe(wl, precision: str | None, optimizer: str | None):
    """(Recipe, notes): the profile's precision and optimizer (fp32 and Adam in profiles from before they
    were recorded), each replaced by --precision / --optimizer when given, with a note when it differs."""
    from rtmodel_harness.recipe import Recipe, check_optimizer, check_precision

    prof_precision, prof_optimizer = wl.precision or "fp32", wl.optimizer or "adam"
    run_precision = prof_precision if precision is None else check_precision(precision, error=ValidationError)
    run_optimizer = prof_optimizer if optimizer is None else check_optimizer(optimizer, error=ValidationError)
    notes = [
        f"the run trains with {flag} {mine} but the profile measured {theirs}: the predictions use the "
        "profile's compute times, so part of any error is that difference"
        for flag, mine, theirs in (("--precision", run_precision, prof_precision),
                                   ("--optimizer", run_optimizer, prof_optimizer))
        if mine != theirs
    ]
    return Recipe(run_precision, run_optimizer), notes


def _placeholder_network():
    """For a link class the profile cannot measure; the run has the profile's shape, so it never uses it."""
    from runtime_model.core.scenario import Link, Network

    unused = Link(1e-4, 1e9, source="unused: the run's shape has no link of this class")
    return Network(intra=unused, inter=unused, name="unused")


def _schedule_or_error(name: str, shape):
    from runtime_model.topology.registry import TopologyNotApplicable, build_schedule

    try:
        return build_schedule(name, shape)
    except TopologyNotApplicable as exc:
        raise TopologyUnavailable(
            f"topology {name!r} cannot run on {shape.gpus} ranks ({shape.nodes} node(s) x "
            f"{shape.gpus_per_node}): {exc}"
        ) from None


def check_topology_choice(topology: str | None, recommended: bool) -> None:
    """Exactly one of --topology NAME / --recommended, and a known name."""
    from runtime_model.topology.registry import TOPOLOGIES, topology_info

    if topology is not None and recommended:
        raise ValidationError("give either --topology NAME or --recommended, not both")
    if topology is None and not recommended:
        raise ValidationError(f"choose what to validate: --topology NAME ({', '.join(TOPOLOGIES)}) or --recommended")
    if topology is not None:
        topology_info(topology)  # one line naming the choices when unknown


def choose_topology(
    topology: str | None, recommended: bool, scenario, margin=None
) -> tuple[str, object, AdvisorSummary | None, list[str]]:
    """(rtmodel topology name, its schedule, advisor summary or None, notes); `margin` (a
    confidence.Margin; None: the advisor's default) is what the advisor states its verdict with."""
    check_topology_choice(topology, recommended)
    shape = scenario.shape
    if topology is not None:
        schedule = _schedule_or_error(topology, shape)
        blocker = schedule.decent_dp_note
        if blocker:
            raise TopologyUnavailable(f"topology {topology!r} cannot run on Decent-DP here: {blocker}")
        return topology, schedule, None, []

    from runtime_model.advice.advisor import advise

    adv = advise(scenario) if margin is None else advise(scenario, margin)
    rec = adv.recommendation
    summary = AdvisorSummary(
        recommendation=rec.topology,
        too_close_to_call=rec.too_close_to_call,
        verdict=rec.verdict,
        predicted_speedup=rec.speedup,
    )
    notes: list[str] = []
    candidates = []
    for row in sorted((r for r in adv.rows if r.applicable), key=lambda r: r.prediction.mean_s):
        sch = _schedule_or_error(row.topology, shape)
        if sch.decent_dp_runnable:
            candidates.append((row.topology, sch))
    if not candidates:
        raise TopologyUnavailable(f"no topology the advisor knows can run on Decent-DP on {shape.gpus} ranks")
    by_name = dict(candidates)
    if rec.topology in by_name:
        return rec.topology, by_name[rec.topology], summary, notes
    if rec.candidate in by_name:  # too close to call: the option the verdict says to validate
        notes.append(f"the advisor finds it too close to call ({rec.verdict}); validating {rec.candidate}")
        return rec.candidate, by_name[rec.candidate], summary, notes
    best, schedule = candidates[0]
    if rec.topology == "allreduce":
        notes.append(
            f"the advisor recommends keeping All-Reduce ({rec.verdict}); validating the best-predicted "
            f"topology, {best}, anyway to check that verdict"
        )
    else:
        notes.append(f"the advisor's pick {rec.topology} cannot run on Decent-DP; validating {best} instead")
    return best, schedule, summary, notes


def validation_inputs(profile: Profile, shape: ClusterShape):
    """(the scenario, the advisor's confidence.Margin) a validation of `profile` at `shape` predicts and
    picks with (and a re-score of its run): the margin is the measured error of profiles like this one
    (ProfiledScenario.margin).

    as_measured: the run has the profile's shape on the profiled machine, so even a link the profile marks
    unmeasured (ranks sharing a GPU, pretend nodes) is the very link the run's ranks use."""
    from calibration.profiled import scenario_from_profile

    profiled = scenario_from_profile(
        profile, shape.gpus, shape.gpus_per_node, _placeholder_network(), as_measured=True
    )
    return replace(profiled.scenario, description=f"validation of {profile.origin}"), profiled.margin()


def make_plan(profile: Profile, shape: ClusterShape, opts: ValidateOptions) -> Plan:
    """Check everything, calibrate the profile (loaded once by the caller), and predict every run for the
    run's exact shape (local SGD too when opts.local_sgd is given)."""
    from runtime_model.prediction.iteration import allreduce_prediction, gossip_prediction
    from runtime_model.topology.registry import TOPOLOGIES

    topology, recommended, iterations, warmup = opts.topology, opts.recommended, opts.iterations, opts.warmup
    local_sgd = opts.local_sgd
    check_counts(iterations, warmup)
    from rtmodel_validation.sharded import check_baseline, fsdp_prediction

    baseline = check_baseline(opts.baseline)
    check_topology_choice(topology, recommended)
    origin = profile.origin
    check_shape(profile, shape, origin)
    workload, notes = resolve_workload(profile, opts.model, opts.model_args, opts.precision, opts.optimizer)
    scenario, margin = validation_inputs(profile, shape)
    name, schedule, advisor, topo_notes = choose_topology(topology, recommended, scenario, margin)
    notes.extend(topo_notes)
    run_warmup = effective_warmup(warmup, schedule)
    if run_warmup > warmup:
        notes.append(
            f"warm-up raised from {warmup} to {run_warmup} iterations (one {schedule.period}-round period of "
            f"{name} + {MIN_WARMUP}): each gossip group's first collective sets up its communicator, untimed"
        )
    dd_name = TOPOLOGIES[name].decent_dp_name
    fsdp, no_fsdp = fsdp_prediction(scenario) if baseline == "fsdp" else (None, None)
    if no_fsdp:
        notes.append(f"fsdp is measured only: {no_fsdp}")
    predicted = PlanPredictions(
        allreduce_prediction(scenario),
        gossip_prediction(scenario, schedule),
        _predict_local_sgd(scenario, local_sgd),
        fsdp,
    )
    info = ProfileInfo(
        backend=profile.backend,
        device=profile.device,
        torch_version=profile.torch_version,
        node_names=list(profile.node_names) or None,
        created_utc=profile.created_utc,
    )
    return Plan(
        profile_path=origin,
        shape=shape,
        topology=name,
        decent_dp_topology=dd_name or name,
        registered_by_rtmodel=dd_name is None,
        workload=workload,
        iterations=iterations,
        warmup=run_warmup,
        predicted=predicted,
        recommended=recommended,
        advisor=advisor,
        notes=notes,
        profile_info=info,
        **_local_sgd_plan(local_sgd, iterations, run_warmup),
        baseline=baseline,
        model_inputs=PlanInputs(scenario, schedule),
    )


def _predict_local_sgd(scenario, opts: LocalSgd | None) -> LocalSgdPrediction | None:
    """The same scenario as DDP's and Decent-DP's predictions, so the three are comparable."""
    if opts is None:
        return None
    from rtmodel_validation.local_sgd import check_runnable
    from runtime_model.prediction.local_sgd import local_sgd_prediction

    check_runnable(opts)
    return local_sgd_prediction(scenario, opts)


def _local_sgd_plan(opts: LocalSgd | None, iterations: int, warmup: int) -> dict:
    """The plan's local-SGD fields: the options and whole periods of H (rtmodel_validation.local_sgd)."""
    if opts is None:
        return {}
    from rtmodel_validation.local_sgd import local_sgd_counts

    run_warmup, run_iterations = local_sgd_counts(iterations, warmup, opts.inner_steps)
    return {"local_sgd": opts, "local_sgd_warmup": run_warmup, "local_sgd_iterations": run_iterations}
