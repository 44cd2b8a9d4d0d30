"""Each method's tensors per rank and the phases of one iteration in which they are alive together.

A builder returns Built(parts, temporaries_bytes, phases); a phase is (name, bytes alive together in it,
activations included). Activations(peak, with_grads): the activations' peak over forward and backward
and, when measured, the peak of activations plus the gradients made so far (a CNN makes its large
gradients first, while its early layers' activations are still saved: the two peaks coincide there).
The phases follow the order the libraries run one iteration with zero_grad(set_to_none=True) after the
step (rtmodel_harness/recipe.py `optimizer_step`): gradients exist from backward to the step, activations
from forward into backward, step temporaries only inside the step.
- ddp: torch/nn/parallel/distributed.py + the C++ Reducer (`Reducer::initialize_buckets`): buckets holding
  every gradient in the gradients' dtype, allocated once, alive all run; with gradient_as_bucket_view the
  gradients are views into them (the docstring of DistributedDataParallel), so they never exist apart and
  the buckets live through forward; without it param.grad is a separate tensor the reducer copies in.
- zero1: torch/distributed/optim/zero_redundancy_optimizer.py beside DDP: full parameters, gradients and
  buckets; each rank's local optimizer holds the states of its partition (1/world of the elements) and
  `_sync_params` broadcasts updated parameters in place (parameters_as_bucket_view=False).
- decent-dp: decent_dp/ddp.py `_initialize_params`: per bucket a `_comm_blocks` buffer in the parameters'
  dtype and, with param_as_bucket_view=True (its default, kept by rtmodel_harness/decent_dp_args.py), the
  parameters become views into `_param_blocks` of the same 32-element-aligned size; one optimizer per bucket
  steps in the bucket's post-accumulate-grad hook (`_ddp_fn`) and zero_grad frees that bucket's gradients,
  so only one bucket's gradients and step temporaries are alive at a time. A bucket that closes before the
  end of backward steps while the activations of the layers not yet passed are alive: their share of the
  peak in proportion to the parameters not yet passed (runtime_model/prediction/bucketing.py
  `ready_fractions`' assumption for backward's progress).
- local-sgd: rtmodel_harness/local_sgd.py `OuterSync` (DiLoCo, arXiv 2311.08105 Algorithm 1): theta_outer
  (`FlatParams.read`, the parameters' dtype, on their device: the GPU) and the outer Nesterov SGD's
  momentum_buffer of the same size; the outer step (after the inner step's zero_grad) holds a fragment's
  read slice and pseudo-gradient (`outer - read`), then the gradient and, per-tensor, Nesterov's
  `grad.add(buf)`: 2 x the fragment. A "node" replica runs DDP inside the node (buckets).
- fsdp (reshard_after_forward=True: ZeRO-3), zero2 (reshard_after_forward=False: "keeps the unsharded
  parameters in memory after forward", fully_shard's docstring), hsdp (shard within a node, replicate
  across nodes: divide by gpus_per_node): torch/distributed/fsdp/_fully_shard/ (fsdp_timeline.py).
  MixedPrecisionPolicy keeps the sharded parameter in its own dtype (the fp32 master when master_copy) and
  casts the all-gather to param_dtype; the reduce-scatter output is cast back (`foreach_reduce`
  `_to_dtype_if_needed(reduce_output, orig_dtype)`), so no separate master copy exists.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from runtime_model.memory.fsdp_timeline import UnitBytes, fsdp_moments
from runtime_model.memory.inputs import ModelShape, TrainingRecipe
from runtime_model.memory.optimizer_terms import (
    MASTER_BYTES,
    state_bytes_per_element,
    step_temporary_elements,
)

DECENT_DP_BUCKET_MIB = 25  # DecentralizedDataParallel(bucket_size_in_mb=25), its default and rtmodel's
MIB = 1 << 20


class Built(NamedTuple):
    parts: list[tuple[str, float]]  # "parameters", "gradients", "optimizer states", then the method's buffers
    temporaries_bytes: float
    phases: list[tuple[str, float]]  # (name, bytes alive together, activations included)


class Activations(NamedTuple):
    peak: float  # activation_bytes (0 when unknown)
    with_grads: float | None  # ModelShape.activation_grad_bytes, None when not measured

    def forward_backward(self, gradients_apart: bool) -> float:
        """Transient bytes of forward and backward for a replica whose gradients exist apart from its
        persistent buffers (set to None by zero_grad, made by backward): the joint peak when measured."""
        return max(self.peak, self.with_grads or 0.0) if gradients_apart else self.peak


def _step_temps(recipe: TrainingRecipe, group: float, largest: float) -> float:
    foreach = recipe.foreach_step
    return step_temporary_elements(recipe.optimizer, foreach, group, largest) * recipe.state_bytes


def _replicated(
    n: float,
    recipe: TrainingRecipe,
    model: ModelShape,
    acts: Activations,
    *,
    buckets: bool,
    state_share: float,
):
    """DDP, ZeRO-1 and local SGD's inner training: full parameters and gradients, states x state_share."""
    params = n * recipe.param_bytes
    grads = n * recipe.grad_bytes
    bucket = (sum(model.bucket_params) or n) * recipe.grad_bytes if buckets else 0.0
    states = (
        n * state_bytes_per_element(recipe.optimizer, recipe.state_bytes, recipe.master_copy) * state_share
    )
    # ZeRO-1: a partition holds whole tensors, so the rank holding the largest one pays its temporaries
    temps = _step_temps(recipe, n * state_share, model.largest_tensor_params)
    view = buckets and recipe.ddp_bucket_view  # the gradients live in the buckets, all run
    persistent = params + states + (grads if view else bucket)
    parts = [("parameters", params), ("gradients", grads), ("optimizer states", states)]
    if buckets:
        parts.append(("DDP buckets", 0.0 if view else bucket))
    phases = [
        ("forward/backward", persistent + acts.forward_backward(gradients_apart=not view)),
        ("optimizer step", persistent + (0.0 if view else grads) + temps),
    ]
    return parts, temps, phases


def ddp(n, recipe, model, world, gpus_per_node, acts) -> Built:
    return Built(*_replicated(n, recipe, model, acts, buckets=True, state_share=1.0))


def zero1(n, recipe, model, world, gpus_per_node, acts) -> Built:
    return Built(*_replicated(n, recipe, model, acts, buckets=True, state_share=1.0 / world))


def local_sgd(n, recipe, model, world, gpus_per_node, acts) -> Built:
    inner_ddp = model.replica == "node" and min(gpus_per_node, world) > 1
    parts, temps, phases = _replicated(n, recipe, model, acts, buckets=inner_ddp, state_share=1.0)
    outer = n * recipe.param_bytes
    momentum = n * recipe.param_bytes
    sync = 2.0 * n / model.fragments * recipe.param_bytes
    parts += [("outer parameters", outer), ("outer momentum", momentum)]
    held = dict(parts)  # after the inner step's zero_grad: gradients only inside DDP's buckets with a view
    in_buckets = held["gradients"] if inner_ddp and recipe.ddp_bucket_view else held.get("DDP buckets", 0.0)
    after_step = held["parameters"] + held["optimizer states"] + in_buckets
    phases = [(name, b + outer + momentum) for name, b in phases]
    phases.append(("outer step", after_step + outer + momentum + sync))
    return Built(parts, max(temps, sync), phases)


def _decent_dp_buckets(n: float, recipe: TrainingRecipe, model: ModelShape) -> list[float]:
    if model.bucket_params:
        return [float(b) for b in model.bucket_params]
    per_bucket = DECENT_DP_BUCKET_MIB * MIB / recipe.param_bytes
    full, rest = divmod(n, per_bucket)
    return [per_bucket] * int(full) + ([rest] if rest else [])


def decent_dp(n, recipe, model, world, gpus_per_node, acts) -> Built:
    buckets = _decent_dp_buckets(n, recipe, model)
    blocks = sum(buckets) * recipe.param_bytes  # _param_blocks (param_as_bucket_view) and _comm_blocks alike
    states = n * state_bytes_per_element(recipe.optimizer, recipe.state_bytes, recipe.master_copy)
    persistent = 2 * blocks + states
    # the joint peak of activations and gradients assumes every gradient alive: exact for one bucket, a bound
    phases = [("forward/backward", persistent + acts.forward_backward(gradients_apart=True))]
    grads_max = temps_max = passed = 0.0
    for i, b in enumerate(buckets):
        passed += b
        grads = min(b, n) * recipe.grad_bytes
        temps = _step_temps(recipe, min(b, n), min(b, model.largest_tensor_params))
        grads_max, temps_max = max(grads_max, grads), max(temps_max, temps)
        alive = acts.peak * (1.0 - passed / sum(buckets))  # layers not yet passed by backward
        phases.append((f"bucket {i + 1} step", persistent + grads + temps + alive))
    parts = [
        ("parameters", blocks),
        ("gradients", grads_max),
        ("optimizer states", states),
        ("Decent-DP communication blocks", blocks),
    ]
    return Built(parts, temps_max, phases)


def _sharded(n, recipe, model, acts: Activations, shard: int, *, reshard_after_forward: bool) -> Built:
    own = MASTER_BYTES if recipe.master_copy else recipe.param_bytes  # the sharded parameter's dtype
    own_grad = MASTER_BYTES if recipe.master_copy else recipe.grad_bytes
    params = n * own / shard
    states = n * state_bytes_per_element(recipe.optimizer, recipe.state_bytes, False) / shard
    grads = n * own_grad / shard
    largest_shard = math.ceil(model.largest_tensor_params / shard)
    temps = _step_temps(recipe, n / shard, largest_shard)
    root = max(0.0, n - sum(model.unit_params))
    sizes = UnitBytes(recipe.param_bytes, recipe.grad_bytes, own_grad)
    moments = fsdp_moments(
        root,
        tuple(model.unit_params),
        shard,
        sizes,
        late_params=model.late_grad_params,
        reshard_after_forward=reshard_after_forward,
        gloo=model.backend == "gloo",
    )
    persistent = params + states
    phases = [
        (
            m.name,
            persistent
            + m.gathered_bytes
            + m.reduce_bytes
            + m.sharded_grad_bytes
            + acts.peak * m.activation_share,
        )
        for m in moments
    ]
    phases.append(("optimizer step", persistent + grads + temps))
    parts = [
        ("parameters", params),
        ("gradients", grads),
        ("optimizer states", states),
        ("all-gathered units", max(m.gathered_bytes for m in moments)),
        ("reduce-scatter buffers", max(m.reduce_bytes for m in moments)),
    ]
    return Built(parts, temps, phases)


def fsdp(n, recipe, model, world, gpus_per_node, acts) -> Built:
    return _sharded(n, recipe, model, acts, world, reshard_after_forward=True)


def zero2(n, recipe, model, world, gpus_per_node, acts) -> Built:
    return _sharded(n, recipe, model, acts, world, reshard_after_forward=False)


def hsdp(n, recipe, model, world, gpus_per_node, acts) -> Built:
    return _sharded(n, recipe, model, acts, min(gpus_per_node, world), reshard_after_forward=True)


BUILDERS = {
    "ddp": ddp,
    "decent-dp": decent_dp,
    "local-sgd": local_sgd,
    "fsdp": fsdp,
    "zero2": zero2,
    "zero1": zero1,
    "hsdp": hsdp,
}
