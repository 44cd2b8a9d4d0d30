"""What one eager aten op costs, tallied by a dispatch mode: the counting under `python -m profiler.opcount`
(a model's iteration) and `--traffic` (optimizer, GradScaler, mixing).

op_kind sorts an op into view / allocation-only / sync / matmul / kernel; op_bytes counts the tensor
bytes a memory-bound kernel reads and writes (each tensor once); OpCounter adds them up in a Tally.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

MATMUL_PREFIXES = ("_scaled_dot_product", "_flash_attention", "_efficient_attention", "_cudnn_attention")
MATMUL_OPS = {"mm", "addmm", "bmm", "baddbmm", "addbmm", "matmul", "linear", "_addmm_activation",
              "convolution", "_convolution", "convolution_backward", "mkldnn_convolution", "_scaled_mm"}
NO_KERNEL_OPS = {"empty", "empty_strided", "empty_like", "new_empty", "new_empty_strided", "resize_", "set_",
                 "device", "is_same_size", "_has_same_storage_numel", "_has_compatible_shallow_copy_type",
                 "_record_function_enter", "_record_function_enter_new", "_record_function_exit"}
EXTRA_VIEWS = {"_unsafe_view", "_reshape_alias", "as_strided_", "squeeze_", "unsqueeze_", "transpose_", "t_",
               "detach_"}  # views without an alias annotation, and in-place metadata changes
SYNC_OPS = {"_local_scalar_dense", "is_nonzero", "equal"}  # read a device value on the host
WRITE_ONLY_SELF = {"copy_", "zero_", "fill_", "bernoulli_", "uniform_", "normal_", "random_", "exponential_",
                   "_foreach_zero_", "_foreach_copy_"}  # overwrite their first argument without reading it
GATHER_OPS = {"embedding", "index_select", "gather"}  # read only the rows they return of their first argument


def op_kind(func) -> str:
    """'view' (aliases its input, launches nothing), 'none' (allocates only), 'sync', 'matmul', 'kernel'."""
    name = func.overloadpacket.__name__
    if name in SYNC_OPS:
        return "sync"
    if name in NO_KERNEL_OPS:
        return "none"
    if getattr(func, "is_view", False) or name in EXTRA_VIEWS:
        return "view"
    if name in MATMUL_OPS or name.startswith(MATMUL_PREFIXES):
        return "matmul"
    return "kernel"


def tensor_bytes(t) -> int:
    """Bytes a kernel touches in `t`: broadcast (stride-0) dimensions are read once."""
    if not isinstance(t, torch.Tensor) or t.layout != torch.strided:
        return 0
    n = 1
    for size, stride in zip(t.shape, t.stride(), strict=True):
        n *= size if stride else 1
    return n * t.element_size()


def op_bytes(func, args, kwargs, out) -> int:
    """Reads (tensor inputs) + writes (outputs and mutated arguments) of one memory-bound op."""
    name = func.overloadpacket.__name__
    schema = func._schema
    bound = dict(zip((a.name for a in schema.arguments), args, strict=False)) | dict(kwargs)
    reads = writes = 0
    outs = out if len(schema.returns) > 1 else (out,)  # one Tensor[] return is one list
    for i, arg in enumerate(schema.arguments):
        tensors = [t for t in tree_flatten(bound.get(arg.name))[0] if isinstance(t, torch.Tensor)]
        size = sum(tensor_bytes(t) for t in tensors)
        if i == 0 and name in GATHER_OPS:
            size = sum(tensor_bytes(t) for t in tree_flatten(outs[0])[0])
        not_read = name.endswith("_like") or name.startswith("new_") or (i == 0 and name in WRITE_ONLY_SELF)
        reads += 0 if not_read else size
        writes += size if arg.alias_info is not None and arg.alias_info.is_write else 0
    for ret, value in zip(schema.returns, outs, strict=False):
        if ret.alias_info is None:  # an in-place op's return is its mutated argument, counted above
            writes += sum(tensor_bytes(t) for t in tree_flatten(value)[0])
    return reads + writes


@dataclass
class Tally:
    """What one phase (forward+loss, or backward) issued."""

    ops: int = 0  # kernel-launching aten ops (matmul-class included)
    views: int = 0
    syncs: int = 0
    scalar_ops: int = 0  # kernel ops whose tensors are all 0-dim (optimizer step counters live on CPU)
    bytes: int = 0  # tensor bytes read + written by non-matmul kernel ops
    flops: int = 0
    by_op: Counter = field(default_factory=Counter)
    bytes_by_op: Counter = field(default_factory=Counter)


class OpCounter(TorchDispatchMode):
    """Counts every aten op that reaches the dispatcher below autograd and autocast."""

    def __init__(self, tally: Tally):
        super().__init__()
        self.tally = tally

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        kind, t = op_kind(func), self.tally
        t.views += kind == "view"
        t.syncs += kind == "sync"
        if kind in ("kernel", "matmul"):
            t.ops += 1
            t.by_op[func.overloadpacket.__name__] += 1
            tensors = [x for x in tree_flatten((args, kwargs, out))[0] if isinstance(x, torch.Tensor)]
            t.scalar_ops += all(x.dim() == 0 for x in tensors)
            if kind == "kernel":
                size = op_bytes(func, args, kwargs, out)
                t.bytes += size
                t.bytes_by_op[func.overloadpacket.__name__] += size
        return out
