"""Advise's inputs from presets, with the measurements a user may add on top of them: an nccl-tests log
for the link between nodes and a measured DDP step for the compute.

Why each measurement is applied once, to every scenario the answer uses: the rows, the tuned DDP
(`gradient_as_bucket_view`) and the scenario the step is backed out at all see the same measured network
and the same compute correction, so no view of the answer falls back to a preset the user replaced.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from rtmodel_inputs.inputs import NCCL_TESTS, STEP

STEP_KEYS = ("step_ms", "step_gpus")  # your measured DDP step and its n (advise's, not presets.resolve's)


@dataclass(frozen=True)
class PresetParts:
    """What the preset path resolves: the scenario, the tuned DDP's, provenance, notes, JSON facts."""

    scenario: object
    tuned_ddp_scenario: object
    provenance: dict
    document: dict
    sources: tuple[str, ...]
    memory: object = None  # memory_fit.MemoryQuestion: the GPU, the recipe and the activations


def preset_parts(preset_request: dict, library, nccl_tests: Path | None) -> PresetParts:
    """The presets at the request, the nccl-tests link in place of the preset's between nodes, and the
    compute scaled to your DDP step where one is given."""
    from rtmodel_inputs import your_model
    from rtmodel_inputs.memory_inputs import MEMORY_KEYS, preset_memory
    from runtime_model.advice.assumptions import preset_assumptions
    from runtime_model.presets import to_model as presets

    request = {
        k: v
        for k, v in preset_request.items()
        if k not in (*your_model.KEYS, *STEP_KEYS, *MEMORY_KEYS, "batch_per_gpu")
    }
    if preset_request.get("batch_per_gpu") is not None:  # weak scaling: the global batch at this n
        request["global_batch"] = preset_request["batch_per_gpu"] * request["gpus"]
    step_ms, step_gpus = (preset_request.get(k) for k in STEP_KEYS)
    library, request["model"] = your_model.add(
        library,
        your_model.given(preset_request),
        request.get("model"),
        request.get("compute_ms") if step_ms is None else step_ms,  # a step stands in for your compute
        request.get("message_dtype"),
    )
    link = _measured_link(nccl_tests)
    given = request
    own = library.model(request["model"] or library.defaults.model).params_only  # no preset compute
    if own and step_ms is not None:  # your model's compute is the step's until the factor corrects it
        request = {**request, "compute_ms": step_ms}
    choice = presets.resolve(presets.PresetRequest(**request), library=library)
    sc, network_line = link(presets.scenario_from_choice(choice, library))
    anchor, sources = None, (NCCL_TESTS,) if nccl_tests is not None else ()
    tuned = None
    if not choice.ddp_bucket_view:  # DDP as it could run with its own bucket view: only DDP's compute differs
        tuned_choice = replace(choice, ddp_bucket_view=True)
        tuned = replace(sc, compute=presets.scenario_from_choice(tuned_choice, library).compute)
    if step_ms is not None or step_gpus is not None:
        from rtmodel_inputs.step import anchor_step, scaled_to_step

        per_gpu, here = preset_request.get("batch_per_gpu"), sc

        def at_step_n(n: int):
            if n == request["gpus"]:  # the answer's own n: the scenario just built
                return here
            at_n = {**request, "gpus": n, **({} if per_gpu is None else {"global_batch": per_gpu * n})}
            choice_n = presets.resolve(presets.PresetRequest(**at_n), library=library)
            return link(presets.scenario_from_choice(choice_n, library))[0]

        anchor, factor = anchor_step(at_step_n, given, step_ms, step_gpus, presets_known=not own)
        sc, tuned = scaled_to_step(sc, factor), tuned and scaled_to_step(tuned, factor)
        sources += (STEP,)
    prov = _provenance(sc, choice, library, preset_request)
    prov["network"] = network_line or f"preset {choice.intra} (intra-node) + {choice.network} (inter-node)"
    doc = {
        "preset": dict(vars(choice)),
        "assumptions": preset_assumptions(choice, library, request, anchor).to_dict(),
    }
    if anchor is not None:
        prov["step anchor"], doc["step_anchor"] = anchor.line(), anchor.to_dict()
    yours = your_model.provenance(library, choice, request.get("compute_cv") is not None)
    if yours is not None:
        prov["compute"], doc["your_model"] = yours
    if nccl_tests is not None:
        doc["nccl_tests"] = str(nccl_tests)
    memory = preset_memory(choice, library, preset_request)
    prov["memory"] = f"{memory.device}; activations {memory.activation_source}"
    return PresetParts(sc, tuned, prov, doc, sources, memory)


def _measured_link(nccl_tests: Path | None):
    """scenario -> (scenario, provenance line or None): the nccl-tests run's link, read and fitted once
    whatever the scenarios it is applied to (a fit per network: the shape decides the inversion)."""
    if nccl_tests is None:
        return lambda sc: (sc, None)
    from rtmodel_inputs.nccl_tests import with_nccl_tests

    fitted: dict = {}

    def link(sc):
        key = (sc.shape, sc.network.name, sc.network.nics_per_node, sc.network.nccl_algo)
        if key not in fitted:  # the same run on the same network: one read and fit
            fitted[key] = with_nccl_tests(sc, nccl_tests)
        measured, line = fitted[key]
        return replace(sc, network=measured.network), line

    return link


def _provenance(sc, choice, library, preset_request: dict) -> dict:
    """Where the preset answer's compute, host and machine came from."""
    from runtime_model.presets import to_model as presets

    unit = library.model(choice.model).unit
    prov = {"compute": sc.compute.source + f", global batch {choice.global_batch:g} {unit}s"}
    if (dispatch := host_dispatch_provenance(choice, library)) is not None:
        prov["host dispatch"] = dispatch
    if (floor := presets.host_floor_line(choice, library)) is not None:
        prov["host floor"] = floor
    machine_keys = ("gpu", "network", "intra", "gpus_per_node", "cluster")
    if all(preset_request.get(k) is None for k in machine_keys):
        prov["machine"] = (
            f"{library.defaults.machine} (the defaults; --cluster, --gpu, --network choose yours)"
        )
    return prov


def host_dispatch_provenance(choice, library) -> str | None:
    """Where the host's cost per op came from: your --dispatch-us, else the GPU preset's figure and its
    source (a host that is not yours), each plus the CUDA launch cost measured on a GPU host; None when
    your measured times leave nothing for it to price."""
    if choice.compute_ms is not None and choice.optimizer_ms is not None and choice.dispatch_us is None:
        return None
    g = library.gpu(choice.gpu)
    launch = f" + {g.launch_us:g} us/op CUDA launch (measured on an H100 host: gpus.toml launch_source)"
    if choice.dispatch_us is not None:
        return f"{choice.dispatch_us:g} us/op (--dispatch-us, this host's opcount --dispatch){launch}"
    return (  # where the preset's figure was measured: gpus.toml's dispatch_source (`rtmodel presets`)
        f"{g.dispatch_us:g} us/op from the {g.name} preset, measured on another host{launch}: give "
        "--dispatch-us from `python -m profiler.opcount --model transformer-base --dispatch` on yours"
    )
