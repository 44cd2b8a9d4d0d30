"""`python -m profiler.opcount`: what eager PyTorch issues per training iteration, measured on CPU.

Why: on a GPU an eager iteration takes max(host time, device time); host time = kernel-launching ops x
dispatch cost, device time = matmul FLOPs / (peak x eff) + bytes of memory-bound kernels / (HBM x eff).
Those counts depend only on the model code and torch, not on the GPU, so a CPU run can measure them:
- ops, views, syncs: a TorchDispatchMode (profiler.op_tally) on a tiny-width copy (counts do not depend
  on width);
- FLOPs (FlopCounterMode) and non-matmul bytes: full width, two batch sizes, slope per unit and
  intercept, on FakeTensors (shapes only, nothing computed);
- backward_numels: post-accumulate-grad hooks, the order Decent-DP and DDP bucket in.
Two CPU/CUDA differences are removed so the counts are CUDA's: F.dropout runs as native_dropout (CUDA's
one fused kernel; CPU would issue bernoulli_, div_, mul) and SDPA gets dropout_p=0 (CUDA's fused
attention applies dropout inside its one kernel; CPU would fall back to the unfused math path).
Optimizer, Decent-DP mixing, GradScaler and DDP traffic per parameter: `--traffic` (profiler.opcount_traffic).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from contextlib import ExitStack, contextmanager, nullcontext
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.flop_counter import FlopCounterMode, sdpa_backward_flop_count, sdpa_flop_count

from profiler.cli_parser import OneLineParser
from profiler.op_tally import OpCounter, Tally
from profiler.toml_text import toml_value
from rtmodel_harness import reference_models

aten = torch.ops.aten
TINY_WIDTH_DIV = 32  # op counts are taken at width / 32 (d_model 16 for transformer-base)
UNIT_PAIRS = {"token": (64, 128), "image": (1, 2)}  # two batch sizes for the per-unit slopes
GPT2_UNIT_PAIR = (1024, 2048)  # whole 1024-token sequences: attention is quadratic within one
TXL_UNIT_PAIR = (2 * reference_models.TXL_SEGMENT, 4 * reference_models.TXL_SEGMENT)  # whole segments
@contextmanager
def cuda_like_kernels():
    """Makes CPU issue the ops CUDA issues for dropout (see the module docstring): patches the two
    functions in torch.nn.functional, where nn.Dropout and multi_head_attention_forward look them up."""
    dropout, sdpa = F.dropout, F.scaled_dot_product_attention

    def fused_dropout(x, p=0.5, training=True, inplace=False):
        if training and 0 < p < 1 and not inplace:
            return torch.native_dropout(x, p, True)[0]
        return dropout(x, p, training, inplace)

    def sdpa_no_dropout(q, k, v, attn_mask=None, dropout_p=0.0, *args, **kwargs):
        return sdpa(q, k, v, attn_mask, 0.0, *args, **kwargs)

    F.dropout, F.scaled_dot_product_attention = fused_dropout, sdpa_no_dropout
    try:
        yield
    finally:
        F.dropout, F.scaled_dot_product_attention = dropout, sdpa


def _cpu_flash_fwd(q, k, v, *args, out_shape=None, **kwargs) -> int:
    return sdpa_flop_count(q, k, v)


def _cpu_flash_bwd(grad_out, q, k, v, *args, out_shape=None, **kwargs) -> int:
    return sdpa_backward_flop_count(grad_out, q, k, v)


# FlopCounterMode has formulas for the CUDA attention kernels only; CPU's flash kernel does the same matmuls
CPU_SDPA_FLOPS = {
    aten._scaled_dot_product_flash_attention_for_cpu: _cpu_flash_fwd,
    aten._scaled_dot_product_flash_attention_for_cpu_backward: _cpu_flash_bwd,
}


def _counting(tally: Tally, stack: ExitStack) -> FlopCounterMode:
    flops = stack.enter_context(FlopCounterMode(display=False, custom_mapping=CPU_SDPA_FLOPS))
    stack.enter_context(OpCounter(tally))
    return flops


def count_iteration(model, step, amp: bool, cuda_like: bool = True, on_grad=None) -> tuple[Tally, Tally]:
    """Tallies of one forward(+loss) and one backward; gradients are cleared afterwards."""
    fwd, bwd = Tally(), Tally()
    autocast = torch.autocast("cpu", dtype=torch.bfloat16) if amp else nullcontext()
    with ExitStack() as stack:
        if cuda_like:
            stack.enter_context(cuda_like_kernels())
        flops = _counting(fwd, stack)
        with autocast:
            loss = step()
    fwd.flops = flops.get_total_flops()
    handles = [p.register_post_accumulate_grad_hook(on_grad) for p in model.parameters()] if on_grad else []
    with ExitStack() as stack:
        flops = _counting(bwd, stack)
        loss.backward()
    bwd.flops = flops.get_total_flops()
    for h in handles:
        h.remove()
    for p in model.parameters():
        p.grad = None
    return fwd, bwd


def unit_pair(name: str) -> tuple[int, int]:
    special = {"gpt2-small": GPT2_UNIT_PAIR, "transformer-xl-base": TXL_UNIT_PAIR}
    return special.get(name, UNIT_PAIRS[reference_models.UNITS[name]])


def tiny_units(name: str) -> int:
    return {"token": 2 * reference_models.SENTENCE_TOKENS, "image": 2}[reference_models.UNITS[name]]


def count_ops(name: str, amp: bool, width_div: int = TINY_WIDTH_DIV, cuda_like: bool = True):
    """Op tallies at a reduced width (counts must not depend on it; tests compare two widths)."""
    torch.manual_seed(0)
    model, make_batch = reference_models.build(name, width_div)
    return count_iteration(model, make_batch(tiny_units(name)), amp, cuda_like)


def _fake_parameters(model) -> None:
    """Swap a meta-device model's parameters and buffers for fake CPU tensors (inside a FakeTensorMode),
    keeping strides and tied parameters; building directly under FakeTensorMode trips over deepcopy."""
    memo: dict[int, torch.Tensor] = {}
    for module in model.modules():
        for slots in (module._parameters, module._buffers):
            for key, t in slots.items():
                if t is not None and id(t) not in memo:
                    fake = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype)
                    memo[id(t)] = nn.Parameter(fake, t.requires_grad) if isinstance(t, nn.Parameter) else fake
                if t is not None:
                    slots[key] = memo[id(t)]


def full_width(name: str, amp: bool, width_div: int = 1, fake: bool = True) -> dict:
    """FLOPs and bytes per unit (slope) and fixed (intercept), backward order; on FakeTensors (shapes
    only) unless fake=False (tests check both agree)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    torch.manual_seed(0)
    with torch.device("meta") if fake else nullcontext():
        model, make_batch = reference_models.build(name, width_div)
    with FakeTensorMode() if fake else nullcontext():
        if fake:
            _fake_parameters(model)
        params = [p for p in model.parameters() if p.requires_grad]
        index = {id(p): i for i, p in enumerate(params)}
        order: list[int] = []
        runs = []
        for k, units in enumerate(unit_pair(name)):
            hook = (lambda p: order.append(index[id(p)])) if k == 0 else None
            runs.append(count_iteration(model, make_batch(units), amp, on_grad=hook))
    (u1, u2), out = unit_pair(name), {}
    for phase, i in (("forward", 0), ("backward", 1)):
        for what in ("flops", "bytes"):
            y1, y2 = getattr(runs[0][i], what), getattr(runs[1][i], what)
            slope = (y2 - y1) / (u2 - u1)
            out[f"{phase}_{what}_per_unit"] = slope
            out[f"{phase}_{what}_fixed"] = y1 - slope * u1
    out["params"] = sum(p.numel() for p in params)
    out["backward_numels"] = [params[i].numel() for i in order]
    return out


def dispatch_us_per_op(name: str, amp: bool, repeats: int = 30) -> tuple[float, int]:
    """Median wall time of a tiny-width forward+backward on this CPU / the kernel ops it ran: the host's
    figure a user can take on any node without a GPU. Not a bound on a GPU host's issue cost per op: an
    H100 host's CUDA issue measured 24-68 us/op where this gave 30.2 (benchmarks/results/gpu-compute)."""
    fwd, bwd = count_ops(name, amp, cuda_like=False)  # the ops the timed plain-CPU run really issues
    torch.manual_seed(0)
    model, make_batch = reference_models.build(name, TINY_WIDTH_DIV)
    step = make_batch(tiny_units(name))
    autocast = torch.autocast("cpu", dtype=torch.bfloat16) if amp else nullcontext()
    times = []
    for _ in range(repeats + 3):
        start = time.perf_counter()
        with autocast:
            loss = step()
        loss.backward()
        times.append(time.perf_counter() - start)
        for p in model.parameters():
            p.grad = None
    ops = fwd.ops + bwd.ops
    return statistics.median(times[3:]) / ops * 1e6, ops


def measure(name: str, amp: bool, dispatch: bool = False) -> dict:
    fwd, bwd = count_ops(name, amp)
    result = {"unit": reference_models.UNITS[name], "amp": amp,
              "forward_ops": fwd.ops, "backward_ops": bwd.ops,
              "forward_view_ops": fwd.views, "backward_view_ops": bwd.views, "syncs": fwd.syncs + bwd.syncs,
              "_forward_by_op": fwd.by_op, "_backward_by_op": bwd.by_op}
    result |= full_width(name, amp)
    if dispatch:
        result["dispatch_us_per_op"], result["dispatch_timed_ops"] = dispatch_us_per_op(name, amp)
    return result


def render_model(name: str, r: dict) -> str:
    u1, u2 = unit_pair(name)
    amp = "AMP as bf16 autocast" if r["amp"] else "fp32, no AMP"
    header = [
        f"# measured by: python -m profiler.opcount --model {name} {'--amp' if r['amp'] else '--no-amp'}"
        f"{' --dispatch' if 'dispatch_us_per_op' in r else ''} (torch {torch.__version__}, CPU, {amp})",
        f"# ops/views/syncs: width/{TINY_WIDTH_DIV}, same depth and heads; FLOPs/bytes: full width, "
        f"slope over {u1} and {u2} {r['unit']}s on FakeTensors; intercepts are per iteration",
        "# bytes: inputs + outputs of non-matmul kernels, each tensor once (no re-reads, no cache hits)",
        "# ops are aten ops; on CUDA a few launch 2+ kernels (embedding_dense_backward, layer-norm backward)",
    ]
    if r["amp"]:
        header += ["# AMP: bf16 CPU autocast stands in for CUDA fp16 autocast: same element size and, for",
                   "# these models, the same casts (layer_norm inputs are fp32 residual streams under both)"]
    for phase in ("forward", "backward"):
        top = ", ".join(f"{op} {n}" for op, n in r[f"_{phase}_by_op"].most_common(12))
        header.append(f"# {phase} ops by aten op: {top}")
    if name in ("transformer-base", "transformer-big"):
        length = reference_models.SENTENCE_TOKENS
        header.append(f"# a token = one source and one target token; {length}-token sentences")
    keys = ["unit", "amp", "params", "tensors", "forward_ops", "backward_ops", "forward_view_ops",
            "backward_view_ops", "syncs", "forward_flops_per_unit", "backward_flops_per_unit",
            "flops_intercept", "forward_bytes_per_unit", "backward_bytes_per_unit", "forward_fixed_bytes",
            "backward_fixed_bytes", "fixed_bytes", "dispatch_us_per_op", "dispatch_timed_ops",
            "backward_numels"]
    values = dict(r, tensors=len(r["backward_numels"]),
                  flops_intercept=r["forward_flops_fixed"] + r["backward_flops_fixed"],
                  forward_fixed_bytes=r["forward_bytes_fixed"],
                  backward_fixed_bytes=r["backward_bytes_fixed"],
                  fixed_bytes=r["forward_bytes_fixed"] + r["backward_bytes_fixed"])
    body = [f"{k} = {toml_value(values[k])}" for k in keys if k in values]
    return "\n".join([*header, f"[{name}]", *body]) + "\n"


def _check_out(path: str | None) -> Path | None:
    if path is None:
        return None
    out = Path(path)
    if out.is_dir():
        raise ValueError(f"--out {path} is a directory; give a file name")
    if not out.parent.is_dir():
        raise ValueError(f"--out {path}: directory {out.parent} does not exist")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m profiler.opcount", description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=sorted(reference_models.BUILDERS), help="preset model to measure")
    parser.add_argument("--amp", action=argparse.BooleanOptionalAction, default=True,
                        help="run forward under bf16 autocast (default) or in fp32")
    parser.add_argument("--dispatch", action="store_true", help="also time host dispatch per op on this CPU")
    parser.add_argument("--traffic", action="store_true",
                        help="optimizer, mixing, GradScaler and DDP bytes per parameter")
    parser.add_argument("--out", help="write the TOML fragment here instead of stdout")
    args = parser.parse_args(argv)
    if (args.model is None) == (not args.traffic):
        parser.error("give exactly one of --model NAME or --traffic")
    try:
        out = _check_out(args.out)
    except ValueError as exc:
        parser.error(str(exc))
    if args.traffic:
        from profiler.opcount_traffic import render_traffic

        text = render_traffic()
    else:
        text = render_model(args.model, measure(args.model, args.amp, args.dispatch))
    write_output(text, out)
    return 0


def write_output(text: str, out) -> None:
    """The TOML a count printed: on stdout, or into --out (opcount's and memcount's)."""
    if out is None:
        sys.stdout.write(text)
    else:
        out.write_text(text)


if __name__ == "__main__":
    raise SystemExit(main())
