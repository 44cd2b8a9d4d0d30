"""What an optimizer keeps per parameter element, and what its step allocates for a moment.

Why separate: every method pays these terms, on its whole replica (DDP, Decent-DP, local SGD) or on its
shard (ZeRO-1, FSDP), and each term is read from one source file:
- torch.optim.Adam (torch/optim/adam.py `_init_group`): exp_avg and exp_avg_sq, zeros_like(param);
  its `step` is a 0-d tensor (8 bytes per parameter tensor, not counted).
  Step temporaries: the per-tensor loop (`_single_tensor_adam`) computes
  `denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)`: the sqrt and the quotient are both alive,
  2 x the tensor, and the largest tensor sets the peak. The foreach path (`_multi_tensor_adam`) allocates
  `exp_avg_sq_sqrt = torch._foreach_sqrt(device_exp_avg_sqs)` for the whole parameter group at once: 1 x the
  group. Which path runs: torch/optim/optimizer.py `_default_to_fused_or_foreach` picks foreach only when every
  parameter is on a foreach device (cuda, xpu, mtia, privateuse1: torch/utils/_foreach_utils.py), so CUDA
  runs foreach and a CPU runs the per-tensor loop. (weight_decay != 0 without decoupling adds a copy of the
  gradients on the foreach path; rtmodel's recipes use 0.)
- decent_dp.optim.AccumAdam (decent_dp/optim.py `_init_group`, `accum_adam_foreach`): exp_avg, exp_avg_sq
  and accum_grad, each zeros_like(param); it always runs torch._foreach_* (on every device) and keeps
  `_exp_avgs = torch._foreach_add(...)` and `_exp_avg_sqs = torch._foreach_addcmul(...)` alive together:
  2 x the group.
- torch.optim.SGD with momentum (torch/optim/sgd.py): momentum_buffer, one per parameter; without Nesterov
  both paths update in place (`buf.mul_(momentum).add_(grad)`, `param.add_(buf)`): no temporaries.
- plain SGD: no state, `param.add_(grad, alpha=-lr)` in place.
- master_copy: an fp32 copy of the parameters the optimizer steps (the mixed-precision recipe the ZeRO paper
  counts, arXiv 1910.02054 section 3.1: K = 12 bytes = fp32 parameters + momentum + variance for Adam).
"""

from __future__ import annotations

OPTIMIZERS = ("adam", "accum-adam", "sgd-momentum", "sgd")
STATES_PER_ELEMENT = {"adam": 2, "accum-adam": 3, "sgd-momentum": 1, "sgd": 0}
MASTER_BYTES = 4  # the fp32 master copy


def state_bytes_per_element(optimizer: str, state_bytes: int, master_copy: bool) -> int:
    """Optimizer state bytes per parameter element (the master copy counted with the states, as ZeRO does)."""
    return STATES_PER_ELEMENT[optimizer] * state_bytes + (MASTER_BYTES if master_copy else 0)


def step_temporary_elements(
    optimizer: str, foreach: bool, group_elements: float, largest_tensor: float
) -> float:
    """Elements an optimizer step holds for a moment beyond its states, for one parameter group of
    `group_elements` whose largest tensor has `largest_tensor` elements (both per rank)."""
    if optimizer == "accum-adam":
        return 2.0 * group_elements  # always foreach: _exp_avgs and _exp_avg_sqs
    if optimizer == "adam":
        return group_elements if foreach else 2.0 * largest_tensor
    return 0.0  # SGD with or without momentum: in place
