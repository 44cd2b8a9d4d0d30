"""`--trace`: your own DDP training's torch.profiler traces as advise's compute, buckets and All-Reduce.

Why a module of its own: advice_inputs assembles presets and profiles; a trace brings the same measured
parts a profile does (so the same preset options are refused beside it), but its links beyond its own
group are the presets' (or --nccl-tests'), so the preset network's source class states the margin.
"""

from __future__ import annotations

from rtmodel_inputs.compute_scaling import with_compute_ms
from rtmodel_inputs.refusals import refuse_options_a_profile_replaces
from rtmodel_util.shown import say

# Options that size the gradients (with --message-dtype): where the trace records no sizes, the bytes
SIZE_KEYS = ("model", "params", "param_mb")


def traced_scenario(opts: dict, request: dict):
    """(scenario, provenance, notes, inputs) from the traces `opts["trace"]` names, on the preset links
    --network/--intra name (else the traced GPU's usual node and the library's default network),
    --nccl-tests replacing the inter-node one. `request`: advice_inputs.scenario_request(opts)."""
    from calibration.trace.gpu_names import gpu_preset_of
    from calibration.trace.trace_errors import TraceError
    from calibration.trace.trace_scenario import read_traces, scenario_from_traces
    from rtmodel_inputs.nccl_tests import with_nccl_tests
    from runtime_model.core.errors import UserError
    from runtime_model.presets import to_model as presets

    paths, preset_dirs, nccl_tests = opts["trace"], opts["presets"], opts["nccl_tests"]
    if opts["profile"] is not None or opts["calibration"] is not None:
        raise UserError("--trace and --profile/--calibration both measure your training: give one")
    sized = any(request.get(k) is not None for k in SIZE_KEYS)
    skip = ("compute_ms", "batch_per_gpu", *SIZE_KEYS, *(("message_dtype",) if sized else ()))
    given = {k: v for k, v in request.items() if k not in skip}
    refuse_options_a_profile_replaces(given, "--trace")
    batches = _batches(opts.get("traced_batch"), request)  # checked before any file is read
    library = presets.load_library(preset_dirs or ())
    sizes = _gradient_bytes(request, library)
    traces = read_traces(paths)
    first = traces[0]
    gpu = None if first.on_cpu else gpu_preset_of(first.gpu_name, first.gpu_memory_bytes, library.gpus)
    if gpu is None and request.get("intra") is None and not first.on_cpu:
        raise TraceError(
            f"--trace {first.path}: ran on '{first.gpu_name}', which no GPU preset describes "
            f"({', '.join(sorted(library.gpus))}): give --intra LINK for its node's links"
        )
    if first.on_cpu and request.get("nccl_algo") is not None:
        raise UserError(
            f"--nccl-algo cannot be used with --trace {first.path}: its CPU ranks ran gloo; drop it"
        )
    network, intra = presets.link_names(request.get("network"), request.get("intra"), gpu, library)
    net = presets.network_preset(network, intra, library, **_network_kw(request))
    traced = scenario_from_traces(traces, request["gpus"], request.get("gpus_per_node"), net, gpu, sizes)
    scenario, provenance, notes = traced.scenario, dict(traced.provenance), list(traced.notes)
    inputs = {"trace": [str(p) for p in paths], "traced_shape": _shape(traced.traced_shape), "trace_gpu": gpu}
    inputs["trace_device"] = "CPU ranks (gloo)" if traced.on_cpu else first.gpu_name
    if not traced.on_cpu:  # what the memory check is against (memory_inputs.measured_memory)
        inputs["trace_gpu_memory_bytes"] = first.gpu_memory_bytes
    peaks = [t.peak_allocated_bytes for t in traces if t.peak_allocated_bytes is not None]
    inputs["trace_peak_allocated_bytes"] = max(peaks) if peaks else None
    inputs["bucket_bytes"] = traced.bytes_source
    inputs.update(traced.stats.as_inputs())
    inputs["trace_check"] = {
        "measured_ms": traced.check.measured_s * 1e3,
        "predicted_ms": traced.check.predicted_s * 1e3,
    }
    if len(traces) > 1:
        inputs["rank_spread"] = {
            "ranks": list(traced.spread.ranks),
            "compute_ms": [c * 1e3 for c in traced.spread.compute_s],
            "iteration_ms": [t * 1e3 for t in traced.spread.iteration_s],
            "compute_spread": traced.spread.compute_spread,
        }
    if nccl_tests is not None:
        scenario, provenance["network"] = with_nccl_tests(scenario, nccl_tests)
        inputs["nccl_tests"] = str(nccl_tests)
    if batches is not None:
        from calibration.trace.batch_scaling import scaled_to_batch

        scenario, line = scaled_to_batch(scenario, traced.busy_s, *batches)
        provenance["compute"] += f"; {line}"
    if request.get("compute_ms") is not None:
        scenario, line = with_compute_ms(scenario, request["compute_ms"])
        provenance["compute"] = scenario.compute.source
        notes.append(line)
        say(line)
    return scenario, provenance, notes, inputs


def _batches(traced_batch: float | None, request: dict) -> tuple[float, float] | None:
    """(traced, wanted) per-GPU batches when the traced compute is to be scaled (batch_scaling): both
    given, and not beside --compute-ms (which replaces the compute whole); None when neither is given."""
    from runtime_model.core.constraints import Interval
    from runtime_model.core.errors import InvalidCombination, UserError

    wanted = request.get("batch_per_gpu")
    if wanted is None and traced_batch is None:
        return None
    if wanted is None:
        raise InvalidCombination(
            "{traced_batch} says the batch per GPU your trace ran: give --batch-per-gpu, the one to predict",
            traced_batch=traced_batch,
        )
    if traced_batch is None:
        raise UserError(
            "--batch-per-gpu with --trace scales the traced compute: say the batch per GPU your trace ran "
            "(--traced-batch N)"
        )
    Interval(1.0, None, closed="left").check("traced_batch", traced_batch)
    if request.get("compute_ms") is not None:
        raise InvalidCombination(
            "{compute_ms} replaces the traced compute and {batch_per_gpu} scales it: give one",
            compute_ms=request["compute_ms"],
            batch_per_gpu=wanted,
        )
    return traced_batch, wanted


def _gradient_bytes(request: dict, library):
    """GradientBytes from --params/--param-mb or --model (at --message-dtype, fp32 unless given), for a
    trace whose all-reduces record no sizes (bucket_bytes); None when none is given."""
    from calibration.trace.bucket_bytes import GradientBytes
    from rtmodel_inputs.request import flag_of
    from runtime_model.core.errors import UserError
    from runtime_model.presets.own_model import params_of
    from runtime_model.presets.preset_choice import MESSAGE_DTYPE_BYTES

    dtype = request.get("message_dtype") or "fp32"
    element = MESSAGE_DTYPE_BYTES[dtype]
    named = [k for k in ("params", "param_mb", "model") if request.get(k) is not None]
    if len(named) > 1:
        raise UserError(f"{' and '.join(flag_of(k) for k in named)} both size your model: give one")
    if not named:
        return None
    key = named[0]
    if key == "model":
        m = library.model(request["model"])
        count = m.params if m.params_only else sum(m.backward_numels)
        said = f"--model {m.name}'s {count:,} parameters x {element} bytes ({dtype})"
    else:
        count = params_of(request.get("params"), request.get("param_mb"), element)
        value = float(request[key])
        shown = f"{value:,.0f}" if value.is_integer() else f"{value:g}"
        said = f"{flag_of(key)} {shown}: {count:,} parameters x {element} bytes ({dtype})"
    return GradientBytes(float(count * element), said, flag_of(key))


def _network_kw(request: dict) -> dict:
    return {k: request[k] for k in ("nics_per_node", "nccl_algo") if request.get(k) is not None}


def _shape(shape) -> dict:
    return {"gpus": shape.gpus, "gpus_per_node": shape.gpus_per_node}
