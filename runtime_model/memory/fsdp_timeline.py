"""FSDP2's transient buffers, unit by unit through forward and backward, as torch 2.13 orders them.

Why a timeline and not one term: which unsharded units, prefetched all-gathers and reduce-scatter inputs
are alive together depends on the order FSDP2 issues and frees them, so the peak is a maximum over moments.
Read from torch/distributed/fsdp/_fully_shard/:
- `_fsdp_param_group.FSDPParamGroup.unshard` / `foreach_all_gather` (_fsdp_collectives.py): an all-gather
  output, one flat buffer of the unit's (padded) parameters; `wait_for_unshard` copies it out into the
  unsharded parameters (`foreach_all_gather_copy_out`), so both are alive at the copy.
- In forward the flat buffer is kept in `comm_ctx.all_gather_state` until the next unit's `wait_for_unshard`
  returns (the local `prev_all_gather_state` holds it to the end of that call), [Note: Overlapping all-gather
  copy-in and all-gather]; in backward it is freed right after the copy-out.
- `reshard` after forward (reshard_after_forward=True, `fsdp`) frees the unit; the root is never resharded
  after forward (`FSDPState._lazy_init`: "the root ... would be all-gathered immediately"), and with
  reshard_after_forward=False (`zero2`) no unit is. Units are resharded after their backward.
- `pre_backward` -> `_backward_prefetch`: the unit issues the all-gather of the unit before it in forward
  order (post_forward_order[index - 1]); the root's pre_backward prefetches the last unit.
- `post_backward`: reshard, drop the oldest reduce-scatter input while `reduce_scatter_max_input_buffers`
  (1) are held, then `foreach_reduce`: a reduce-scatter input of the unit's gradients (copy-in, then the
  unsharded gradients are freed) and an output of 1/shard of it, which becomes the sharded gradient. The
  input is kept (`comm_ctx.reduce_scatter_states`) until the next unit's post_backward. The root's
  post_backward runs at the end of backward; its unsharded gradients live until then.
- gloo only: `ProcessGroupGloo::reduce_scatter_tensor_coalesced` (torch/csrc/distributed/c10d/
  ProcessGroupGloo.cpp) all-reduces `inputTensors[i].clone()`: one more copy of the input during the call.
  NCCL reduce-scatters in place. With a shard of 1 there is no all-gather and no collective.

Activations: their peak (`activation_bytes`) is alive where forward turns into backward; elsewhere a
moment carries the share of it that is alive then, taking activations as saved and freed in proportion to
the parameters forward and backward have passed (the assumption runtime_model/prediction/bucketing.py
`ready_fractions` makes for backward's progress): in forward, the units before this one; in backward, the
units not yet past their backward, the root counted as passed first (backward starts in its last layers,
an LM head or a classifier, which hold its large activations; its first layers, embeddings, save indices).
The root's gradients are alive from the backward start (the head's are made first; a tied head's share is
held by autograd until the embedding's use adds to it) except `late_params`, made at the end (untied
input embeddings). Dim-0 padding of each parameter to a multiple of the shard (at most shard - 1 rows each)
is not counted.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class UnitBytes:
    """Per-element bytes of FSDP2's tensors (a rank's view; the shard divides the sharded ones)."""

    unsharded_param: float  # all-gathered parameters: MixedPrecisionPolicy.param_dtype, else the parameter's
    unsharded_grad: float  # autograd's gradients of the unsharded parameters, and the reduce-scatter buffers
    sharded_grad: float  # the reduce-scatter output cast back to the sharded parameter's dtype


@dataclass(frozen=True)
class Moment:
    """Bytes alive beyond the persistent sharded state at one point of the iteration."""

    name: str
    gathered_bytes: float  # unsharded parameters and all-gather outputs
    reduce_bytes: float  # unsharded gradients, reduce-scatter inputs (and gloo's copy)
    sharded_grad_bytes: float  # sharded gradients made so far
    activation_share: float  # the share of the activations' peak alive at this moment


def fsdp_moments(
    root_elements: float,
    unit_elements: tuple[float, ...],
    shard: int,
    sizes: UnitBytes,
    *,
    reshard_after_forward: bool,
    gloo: bool,
    late_params: float = 0.0,
) -> list[Moment]:
    """The moments of one forward and backward. `unit_elements`: the wrapped units in forward order; the root
    unit (fully_shard on the whole model) holds `root_elements`, the parameters in no unit, `late_params` of
    them with gradients made at the end of backward.
    Long because it walks forward and backward in FSDP2's own order; each step cites its source above."""
    p, g, gs = sizes.unsharded_param, sizes.unsharded_grad, sizes.sharded_grad
    units = [u for u in unit_elements if u > 0]  # a unit without parameters has no param group
    total = root_elements + sum(units)
    flat = (lambda u: u * p) if shard > 1 else (lambda u: 0.0)  # no all-gather with a shard of 1
    moments: list[Moment] = []
    kept = root_elements * p  # unsharded and not resharded after forward: the root, every unit for zero2
    prev_flat = 0.0
    if root_elements > 0:
        moments.append(Moment("forward root", flat(root_elements) + root_elements * p, 0.0, 0.0, 0.0))
        prev_flat = flat(root_elements)
    passed = 0.0
    for i, u in enumerate(units):
        moments.append(
            Moment(f"forward unit {i + 1}", kept + prev_flat + flat(u) + u * p, 0.0, 0.0, passed / total)
        )
        prev_flat = flat(u)
        passed += u
        if not reshard_after_forward:
            kept += u * p
    # forward -> backward: activations at their peak (the loss's backward), then the root's pre_backward
    # prefetches the last unit (unless it is still unsharded) once the root's last layers are passed
    moments.append(Moment("backward start", kept, 0.0, 0.0, 1.0))
    if units and root_elements > 0 and reshard_after_forward:
        moments.append(Moment("root prefetch", kept + flat(units[-1]), 0.0, 0.0, sum(units) / total))
    # the root's gradients, from its first backward op to its post_backward (its late ones come at the end)
    root_grads = max(0.0, root_elements - late_params) * g
    sharded = 0.0
    held_reduce = 0.0  # the previous unit's reduce-scatter input
    for k in range(len(units) - 1, -1, -1):
        u = units[k]
        before = units[k - 1] if k > 0 else 0.0
        alive = sum(units[: k + 1]) / total  # activations of the units backward has not passed
        after = alive - u / total
        held = root_grads + held_reduce
        if not reshard_after_forward:
            kept -= u * p  # this unit's parameters count below as "its own" until its reshard
        else:  # copy-out of its all-gather (prefetched or issued now): the flat buffer and the unit together
            moments.append(Moment(f"unshard unit {k + 1}", kept + flat(u) + u * p, held, sharded, alive))
        next_prefetch = flat(before) if reshard_after_forward else 0.0
        # its backward: its gradients made while its activations and their gradients are still in use
        moments.append(
            Moment(f"backward unit {k + 1}", kept + u * p + next_prefetch, held + u * g, sharded, alive)
        )
        # post_backward: reshard, drop the held input, reduce-scatter input beside the gradients
        moments.append(
            Moment(
                f"reduce-scatter unit {k + 1}", kept + next_prefetch, root_grads + 2 * u * g, sharded, after
            )
        )
        if gloo and shard > 1:
            moments.append(
                Moment(
                    f"gloo reduce-scatter unit {k + 1}",
                    kept + next_prefetch,
                    root_grads + 2 * u * g,
                    sharded + u * gs / shard,
                    after,
                )
            )
        sharded += u * gs / shard
        held_reduce = u * g
    if root_elements > 0:
        moments.append(Moment("reduce-scatter root", 0.0, 2 * root_elements * g, sharded, 0.0))
        if gloo and shard > 1:
            moments.append(
                Moment(
                    "gloo reduce-scatter root",
                    0.0,
                    2 * root_elements * g,
                    sharded + root_elements * gs / shard,
                    0.0,
                )
            )
    return moments
