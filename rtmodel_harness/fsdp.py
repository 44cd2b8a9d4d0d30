"""How rtmodel shards a workload with FSDP2 (ZeRO-3), for validation's sharded baseline.

Why per block: FSDP2 gathers and frees one unit's parameters at a time, so the units decide the peak
(one unsharded block beside the shards); sharding only the root would all-gather the whole model. The
blocks are the children of the model's stacks (nn.ModuleList / nn.Sequential: a transformer's layers,
an MLP's Linear layers, a ResNet stage's Bottlenecks; a stack inside a stack is opened), then the root
takes what is left (embeddings, head). This is the recipe of FSDP2's own documentation and of torchtitan
(torch/distributed/fsdp/_fully_shard/_fully_shard.py, `fully_shard`; torchtitan's apply_fsdp: each
transformer block, then the root), and the line the advisor prints (runtime_model/advice/memory_fit.py,
BASELINE_CODE["fsdp"]). reshard_after_forward=True on every block frees its gathered parameters after its
forward and gathers them again for its backward: ZeRO-3 (Rajbhandari et al. 2020, "ZeRO", stage 3,
P_os+g+p). The root is left at FSDP2's default (None), as the advisor's `fully_shard(model)`: its
parameters stay gathered from the end of forward to the start of backward, which needs them at once
(_fsdp_state.py, FSDPState._lazy_init: "For the root, do not reshard after forward").
"""

from __future__ import annotations

from torch import nn

STACKS = (nn.ModuleList, nn.Sequential)


def _has_params(module: nn.Module) -> bool:
    return any(True for _ in module.parameters())


def stack_blocks(model: nn.Module) -> list[nn.Module]:
    """The repeated blocks FSDP2 shards one by one: the children (with parameters) of the outermost stacks,
    in the model's order; a block's own insides are left to it."""
    blocks: list[nn.Module] = []

    def open_stack(stack: nn.Module) -> None:
        for child in stack.children():
            if isinstance(child, STACKS):
                open_stack(child)
            elif _has_params(child):
                blocks.append(child)

    def find_stacks(module: nn.Module) -> None:
        for child in module.children():
            if isinstance(child, STACKS):
                open_stack(child)
            else:
                find_stacks(child)

    if isinstance(model, STACKS):
        open_stack(model)
    else:
        find_stacks(model)
    return blocks


def shard_model(model: nn.Module, device, world_size: int) -> nn.Module:
    """fully_shard every block (reshard_after_forward=True), then the root (FSDP2's default), over all
    `world_size` ranks of the default group (a 1-D mesh on `device`'s type: gloo on a CPU, nccl on GPUs);
    returns the model (FSDP2 shards in place)."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh(device.type, (world_size,))
    for block in stack_blocks(model):
        fully_shard(block, mesh=mesh, reshard_after_forward=True)
    fully_shard(model, mesh=mesh)
    return model


def late_grad_params(model, units: list, params: list, backward_order: list[int]) -> int:
    """Root parameters (in no unit) whose gradients backward makes after every unit's (input embeddings,
    a stem); a parameter two modules share (a tied head) is not one: autograd holds its head's share early.
    benchmarks/memory_accuracy.py checks the rule against MemTracker; rtmodel_validation/sharded.py predicts with it."""
    in_units = {id(p) for u in units for p in u.parameters()}
    position = {index: i for i, index in enumerate(backward_order)}
    last_unit = max((position.get(i, -1) for i, p in enumerate(params) if id(p) in in_units), default=-1)
    uses: dict[int, int] = {}
    for _, p in model.named_parameters(remove_duplicate=False):
        uses[id(p)] = uses.get(id(p), 0) + 1
    return sum(
        p.numel()
        for i, p in enumerate(params)
        if id(p) not in in_units and position.get(i, -1) > last_unit and uses[id(p)] == 1
    )
