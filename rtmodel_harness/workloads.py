"""Models the profiler times and the validator trains: one `Workload` per (model, args, batch, device).

Public API (stable; rtmodel_validation/ imports it too):

    build_workload(name, model_args, batch_per_rank, device, *, rank=None) -> Workload
        name: "synthetic" | "mlp" | "transformer-tiny" | a preset model (below) | "package.module:factory"
    Workload.model                         nn.Module on `device`
    Workload.make_batch(step) -> (inputs, targets)   deterministic in (seed, rank, step)
    Workload.loss(model, batch) -> scalar tensor     `model` may be the DDP / Decent-DP wrapper
    Workload.make_optimizer(params, lr, recipe=None) -> Optimizer   (recipe.Recipe's --optimizer)
    Workload.param_bytes -> int
    Workload.bucket_layout(cap_mb=25.0, first_bucket_mb=1.0) -> BucketLayout   (traces one backward)
    bucket_layout(model, cap_mb=25.0, first_bucket_mb=1.0, run_backward=None) -> BucketLayout
    jitter_multiplier(kind, cv, seed, rank, step) -> float
    slowdown_multiplier(slow_ranks, slowdown, rank) -> float     (the synthetic model's stragglers)
    parse_model_args(["k=v", ...]) -> dict;  check_model_choice(name, model_args) -> resolved args

Built-in models (defaults in model_choice.BUILTIN_DEFAULTS):
- synthetic: `layers` fp32 parameter tensors of param_mb / layers MiB each. Forward and backward do no
  math: each layer SLEEPS forward_ms / layers (forward) and backward_ms / layers (backward), times the
  iteration's jitter multiplier, then returns a zero gradient of the parameter's shape. Because each
  layer's backward is a separate autograd node, gradients become ready layer by layer (last layer
  first) and DDP / Decent-DP hooks fire exactly as with a GPU model, while time.sleep releases the GIL
  so gloo's threads can send meanwhile (like a GPU computing while the NIC sends). The real costs
  that remain (allocating zero gradients, Adam) are measured, not assumed.
  optimizer=sleep (with optimizer_ms) makes the optimizer a GPU stand-in too: it sleeps its share of
  optimizer_ms instead of running Adam on the CPU cores the ranks share (optimizer=adam, the default,
  runs real Adam). The emulated-cluster accuracy benchmark uses it so that 2 cores can stand in for GPUs.
  Jitter: multiplier m(seed, rank, step) scales that iteration's forward and backward sleeps;
  numpy Generator seeded by [seed, rank, step] draws z ~ N(0, 1):
    none: m = 1;  normal: m = max(0, 1 + jitter_cv * z);
    lognormal: m = exp(s * z - s^2 / 2), s^2 = ln(1 + jitter_cv^2)   (mean 1, cv = jitter_cv).
  So C_i = (forward_ms + backward_ms) * m has mean ~(forward_ms + backward_ms) and sd ~cv times it,
  independent across ranks and iterations. The batch carries m (inputs = m repeated), so the model
  needs no step counter and any wrapper passes it through.
  Stragglers: m is further multiplied by `slowdown` on the ranks in `slow_ranks` (every iteration:
  slow_ranks=0 slowdown=1.5 is a GPU 1.5x slower than the others; slow_ranks=0-1 a slow node of 2).
- mlp: Linear/ReLU stack (d_in -> hidden x depth -> classes), random Gaussian inputs, cross-entropy.
- transformer-tiny: token + learned position embedding, nn.TransformerEncoder (causal), LM head (not
  tied: Decent-DP needs every parameter used once), next-token cross-entropy on random tokens.
- transformer-base, transformer-big, gpt2-small, resnet50, transformer-xl-base: the presets' models
  (rtmodel_harness.reference_models), full width unless width_div > 1; --batch-per-rank counts their units
  (tokens; images for resnet50): see rtmodel_harness.reference_workloads.
Your own model: --model package.module:factory, where factory(**model_args) returns
  (model, make_batch, loss_fn) with make_batch(step, batch_per_rank, device) -> (inputs, targets) and
  loss_fn(outputs, targets) -> scalar loss; inputs may be a tensor, a tuple (model(*inputs)) or a dict
  (model(**inputs)). The current directory is importable.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from rtmodel_harness.buckets import BucketLayout, bucket_layout
from rtmodel_harness.errors import WorkloadError
from rtmodel_harness.model_choice import (
    BUILTIN_DEFAULTS,
    BUILTIN_MODELS,
    REFERENCE_MODELS,
    check_batch,
    check_model_choice,
    load_factory,
    parse_model_args,
    resolve_model_args,
)
from rtmodel_harness.recipe import Recipe
from rtmodel_harness.reference_workloads import build_reference, step_seed
from runtime_model.core.defaults import MIB

__all__ = [
    "BUILTIN_DEFAULTS",
    "BUILTIN_MODELS",
    "BucketLayout",
    "Workload",
    "bucket_layout",
    "build_workload",
    "check_model_choice",
    "jitter_multiplier",
    "parse_model_args",
    "slowdown_multiplier",
]


@dataclass
class Workload:
    """A model plus how to feed it and what it minimises; see the module docstring for the contract."""

    name: str
    model_args: dict
    batch_per_rank: int
    device: torch.device
    model: nn.Module
    batch_fn: Callable[[int], tuple]
    loss_fn: Callable[[Any, Any], torch.Tensor]

    def make_batch(self, step: int) -> tuple:
        return self.batch_fn(step)

    def make_optimizer(self, params, lr: float = 1e-3, recipe: Recipe | None = None) -> torch.optim.Optimizer:
        """The optimizer to time and train with: the recipe's (torch Adam, or Decent-DP's AccumAdam), or for
        `synthetic` with optimizer=sleep a stand-in that sleeps like a GPU's optimizer would (so CPU ranks
        do not contend for cores the way GPUs never do; it wins over the recipe's). Decent-DP builds one
        per bucket; each sleeps its share of optimizer_ms."""
        params = [p for p in params if p.requires_grad]
        if self.name == "synthetic" and self.model_args.get("optimizer") == "sleep":
            total = sum(p.numel() for p in self.model.parameters() if p.requires_grad)
            return SleepOptimizer(params, self.model_args["optimizer_ms"] / 1000.0, total, lr)
        return (recipe or Recipe()).make_optimizer(params, lr)

    def loss(self, model, batch) -> torch.Tensor:
        return forward_loss(model, batch, self.loss_fn)

    @property
    def param_bytes(self) -> int:
        return sum(p.numel() * p.element_size() for p in self.model.parameters() if p.requires_grad)

    def bucket_layout(self, cap_mb: float = 25.0, first_bucket_mb: float = 1.0) -> BucketLayout:
        """Trace one forward + backward on batch 0 and lay out DDP and Decent-DP buckets."""
        return bucket_layout(
            self.model, cap_mb, first_bucket_mb, lambda: self.loss(self.model, self.make_batch(0)).backward()
        )


def _default_rank() -> int:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank()
    return int(os.environ.get("RANK", "0"))


def jitter_multiplier(kind: str, cv: float, seed: int, rank: int, step: int) -> float:
    """The synthetic model's compute multiplier for one rank and iteration (see module docstring)."""
    if kind == "none" or cv == 0:
        return 1.0
    z = float(np.random.default_rng([seed & 0xFFFFFFFF, rank, max(step, 0)]).standard_normal())
    if kind == "normal":
        return max(0.0, 1.0 + cv * z)
    if kind == "lognormal":
        s2 = math.log1p(cv * cv)
        return math.exp(math.sqrt(s2) * z - s2 / 2)
    raise WorkloadError(f"unknown jitter kind {kind!r}")


def slowdown_multiplier(slow_ranks, slowdown: float, rank: int) -> float:
    """The synthetic model's persistent per-rank compute multiplier: `slowdown` on slow_ranks, else 1."""
    return float(slowdown) if rank in slow_ranks else 1.0


# ----------------------------------------------------------------------------- synthetic


class _SleepFn(torch.autograd.Function):
    """Identity on activations; sleeps instead of computing; a zero gradient for the layer's weight."""

    @staticmethod
    def forward(ctx, x, weight, forward_s, backward_s):
        ctx.backward_s = backward_s
        ctx.weight_meta = (weight.shape, weight.dtype, weight.device)
        if forward_s > 0:
            time.sleep(forward_s)
        return x.clone()

    @staticmethod
    def backward(ctx, grad_out):
        if ctx.backward_s > 0:
            time.sleep(ctx.backward_s)
        shape, dtype, device = ctx.weight_meta
        grad_x = grad_out if ctx.needs_input_grad[0] else None
        return grad_x, torch.zeros(shape, dtype=dtype, device=device), None, None


def _local_numel(p) -> int:
    """The elements this rank steps: a DTensor's (FSDP2's shard) local part, else all of them."""
    return p.to_local().numel() if hasattr(p, "to_local") else p.numel()


class SleepOptimizer(torch.optim.Optimizer):
    """Sleeps total_s x (its parameters' share of the model) per step and applies a plain SGD update."""

    def __init__(self, params, total_s: float, model_numel: int, lr: float):
        super().__init__(params, {"lr": lr})
        mine = sum(_local_numel(p) for g in self.param_groups for p in g["params"])
        self.step_s = total_s * mine / max(1, model_numel)

    @torch.no_grad()
    def step(self, closure=None):
        if self.step_s > 0:
            time.sleep(self.step_s)
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    p.add_(p.grad, alpha=-group["lr"])
        return None


class SleepLayer(nn.Module):
    def __init__(self, numel: int):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(numel))

    def forward(self, x, forward_s: float, backward_s: float):
        return _SleepFn.apply(x, self.weight, forward_s, backward_s)


class SyntheticModel(nn.Module):
    """Real fp32 parameters, sleeping compute. Input: a (batch, 1) tensor filled with the jitter multiplier."""

    def __init__(self, param_mb: float, layers: int, forward_ms: float, backward_ms: float):
        super().__init__()
        numel = max(1, round(param_mb * MIB / 4 / layers))
        self.layers = nn.ModuleList(SleepLayer(numel) for _ in range(layers))
        self.forward_s = forward_ms / 1000.0 / layers
        self.backward_s = backward_ms / 1000.0 / layers

    def forward(self, x):
        m = float(x.reshape(-1)[0])
        h = x
        for layer in self.layers:
            h = layer(h, self.forward_s * m, self.backward_s * m)
        return h


def _synthetic(args: dict, batch: int, device: torch.device, rank: int):
    model = SyntheticModel(args["param_mb"], args["layers"], args["forward_ms"], args["backward_ms"])
    slow = slowdown_multiplier(args["slow_ranks"], args["slowdown"], rank)

    def make_batch(step: int):
        m = slow * jitter_multiplier(args["jitter"], args["jitter_cv"], args["seed"], rank, step)
        return torch.full((batch, 1), m, device=device), torch.zeros((batch, 1), device=device)

    return model, make_batch, lambda out, tgt: (out - tgt).mean()


# ----------------------------------------------------------------------------- real models


def _cpu_generator(args: dict, rank: int, step: int) -> torch.Generator:
    return torch.Generator().manual_seed(step_seed(args["seed"], rank, step))


def _mlp(args: dict, batch: int, device: torch.device, rank: int):
    torch.manual_seed(args["seed"])
    dims = [args["d_in"]] + [args["hidden"]] * args["depth"]
    layers: list[nn.Module] = []
    for a, b in zip(dims[:-1], dims[1:], strict=True):
        layers += [nn.Linear(a, b), nn.ReLU()]
    layers.append(nn.Linear(dims[-1], args["classes"]))
    model = nn.Sequential(*layers)

    def make_batch(step: int):
        g = _cpu_generator(args, rank, step)
        x = torch.randn(batch, args["d_in"], generator=g)
        y = torch.randint(0, args["classes"], (batch,), generator=g)
        return x.to(device), y.to(device)

    return model, make_batch, nn.functional.cross_entropy


class TinyTransformerLM(nn.Module):
    def __init__(self, vocab: int, d_model: int, heads: int, layers: int, ff: int, seq_len: int):
        super().__init__()
        self.tok = nn.Embedding(vocab, d_model)
        self.pos = nn.Embedding(seq_len, d_model)
        layer = nn.TransformerEncoderLayer(d_model, heads, ff, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab)
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(seq_len), persistent=False)

    def forward(self, tokens):
        t = tokens.shape[1]
        pos = torch.arange(t, device=tokens.device)
        h = self.tok(tokens) + self.pos(pos)
        h = self.encoder(h, mask=self.mask[:t, :t], is_causal=True)
        return self.head(self.norm(h))


def _transformer_tiny(args: dict, batch: int, device: torch.device, rank: int):
    torch.manual_seed(args["seed"])
    model = TinyTransformerLM(args["vocab"], args["d_model"], args["heads"], args["layers"], args["ff"], args["seq_len"])

    def make_batch(step: int):
        g = _cpu_generator(args, rank, step)
        tokens = torch.randint(0, args["vocab"], (batch, args["seq_len"] + 1), generator=g).to(device)
        return tokens[:, :-1], tokens[:, 1:]

    def loss_fn(logits, targets):
        return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))

    return model, make_batch, loss_fn


_BUILDERS = {"synthetic": _synthetic, "mlp": _mlp, "transformer-tiny": _transformer_tiny}


def _custom(name: str, args: dict, batch: int, device: torch.device):
    factory = load_factory(name)
    try:
        built = factory(**args)
    except TypeError as exc:
        raise WorkloadError(f"--model {name}: factory rejected the model arguments {args}: {exc}") from None
    if not (isinstance(built, tuple) and len(built) == 3):
        raise WorkloadError(f"--model {name}: factory must return (model, make_batch, loss_fn), got {type(built)}")
    model, make_batch, loss_fn = built
    if not isinstance(model, nn.Module) or not callable(make_batch) or not callable(loss_fn):
        raise WorkloadError(f"--model {name}: factory must return (nn.Module, callable, callable)")
    return model, lambda step: on_device(make_batch(step, batch, device), device), loss_fn


def on_device(batch, device: torch.device):
    """A user's batch with every tensor on the model's device (nested tuples, lists and dicts too).

    Why: a make_batch that ignores its `device` argument returns CPU tensors, which a model on a GPU
    refuses ("Expected all tensors to be on the same device"); moving them costs nothing when they are
    already there."""
    if isinstance(batch, torch.Tensor):
        return batch.to(device)
    if isinstance(batch, tuple | list):
        return type(batch)(on_device(x, device) for x in batch)
    if isinstance(batch, dict):
        return {k: on_device(v, device) for k, v in batch.items()}
    return batch


def build_workload(
    name: str, model_args: dict | None, batch_per_rank: int, device, *, rank: int | None = None
) -> Workload:
    """Build a workload on `device`; `rank` seeds data and jitter (default: this process's rank)."""
    check_batch(name, batch_per_rank)
    device = torch.device(device)
    rank = _default_rank() if rank is None else rank
    if name in REFERENCE_MODELS:
        args = resolve_model_args(name, model_args)
        model, make_batch, loss_fn = build_reference(name, args, batch_per_rank, device, rank)
    elif name in _BUILDERS:
        args = resolve_model_args(name, model_args)
        model, make_batch, loss_fn = _BUILDERS[name](args, batch_per_rank, device, rank)
    else:
        args = dict(model_args or {})
        model, make_batch, loss_fn = _custom(name, args, batch_per_rank, device)
    model = model.to(device)
    if not any(p.requires_grad for p in model.parameters()):
        raise WorkloadError(f"model {name!r} has no trainable parameters")
    return Workload(name, args, batch_per_rank, device, model, make_batch, loss_fn)


def forward_loss(model, batch, loss_fn) -> torch.Tensor:
    """loss_fn(model(inputs), targets) for a batch (inputs, targets) whose inputs are a tensor, a tuple
    (model(*inputs)) or a dict (model(**inputs)): the factory contract every run and measure follows."""
    inputs, targets = batch
    if isinstance(inputs, tuple | list):
        out = model(*inputs)
    elif isinstance(inputs, dict):
        out = model(**inputs)
    else:
        out = model(inputs)
    return loss_fn(out, targets)
