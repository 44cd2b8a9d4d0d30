"""`python -m profiler.opcount --traffic`: memory traffic per parameter of the optimizer step, GradScaler,
Decent-DP's gossip mixing and DDP's bucket copies, plus the host ops and syncs each issues per step.

Why: these kernels are memory-bound and run once per iteration over every parameter (DDP's after the
last bucket, Decent-DP's per bucket inside backward), so the runtime model charges them as
bytes / (HBM bandwidth x efficiency) and ops x dispatch cost. Measured with op_tally's byte-counting
dispatch mode on a few fp32 parameters (sizes multiples of 32: Decent-DP's alignment), steady state
(the step that creates optimizer state is not counted), divided by the parameter count.
"""

from __future__ import annotations

import torch

from profiler.op_tally import OpCounter, Tally
from profiler.toml_text import toml_value

SIZES = (1024 * 768, 65_536, 3 * 768, 768, 32_000)  # a small mix of matrix, vector and odd-length tensors
DECENT_DP = "decent_dp 0.2.3"


def _params(sizes=SIZES) -> list[torch.Tensor]:
    torch.manual_seed(0)
    params = [torch.randn(n, requires_grad=True) for n in sizes]
    for p in params:
        p.grad = torch.randn(p.numel()) * 1e-3
    return params


def _count(fn) -> Tally:
    tally = Tally()
    with OpCounter(tally):
        fn()
    return tally


def _row(tallies: list[Tally], numel: int, how: str, gpu_syncs: int = 0, **extra) -> dict:
    """Means over the tallied steps, per parameter. zero_dim_ops: ops on 0-dim tensors only (step
    counters, the loss scale); scalar_reads: .item()-style reads, GPU syncs only where the value lives
    on the GPU (gpu_syncs, from reading the code: optimizer step counters stay on the CPU)."""
    steps = len(tallies)
    return dict(bytes_per_param=sum(t.bytes for t in tallies) / steps / numel,
                ops_per_step=sum(t.ops for t in tallies) / steps,
                zero_dim_ops_per_step=sum(t.scalar_ops for t in tallies) / steps,
                scalar_reads_per_step=sum(t.syncs for t in tallies) / steps, gpu_syncs_per_step=gpu_syncs,
                **extra, how=how)


def optimizer_rows() -> dict[str, dict]:
    from decent_dp.optim import AccumAdam

    rows = {}
    makers = {
        "adam-foreach": lambda ps: torch.optim.Adam(ps, lr=1e-3, foreach=True),
        "adam-fused": lambda ps: torch.optim.Adam(ps, lr=1e-3, fused=True),
        "adamw-foreach": lambda ps: torch.optim.AdamW(ps, lr=1e-3, foreach=True),
    }
    for name, make in makers.items():
        params = _params()
        opt = make(params)
        opt.step()  # creates exp_avg / exp_avg_sq
        how = f"measured: torch {torch.__version__} {name} step(), second step, weight_decay as default"
        rows[f"optimizer.{name}"] = _row([_count(opt.step)], sum(SIZES), how)
    accum = 4  # the paper's transformer config (decent-transformer_base.toml accum_iter = 4)
    params = _params()
    opt = AccumAdam(params, lr=7e-4, betas=(0.9, 0.999), eps=1e-9, accum_iter=accum)  # paper: no weight decay
    opt.step()
    tallies = [_count(opt.step) for _ in range(accum)]  # steps 2..5: one of them is the accumulation boundary
    rows["optimizer.accumadam"] = _row(
        tallies, sum(SIZES),
        f"measured: {DECENT_DP} AccumAdam(accum_iter={accum}) step(), mean of {accum} steady steps",
        bytes_per_param_plain_step=min(t.bytes for t in tallies) / sum(SIZES),
        bytes_per_param_boundary_step=max(t.bytes for t in tallies) / sum(SIZES))
    return rows


class _NoStep(torch.optim.Optimizer):
    """An optimizer whose step does nothing, so GradScaler.step is measured alone."""

    def __init__(self, params):
        super().__init__(params, {})

    def step(self, closure=None):
        return None


def scaler_rows() -> dict[str, dict]:
    params = _params()
    opt = _NoStep(params)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**16)
    loss = torch.ones((), requires_grad=True)
    scaler.scale(loss)  # a warm-up iteration creates the scale and growth tracker
    scaler.step(opt)
    scaler.update()
    scale = _count(lambda: scaler.scale(loss))
    unscale = _count(lambda: scaler.unscale_(opt))
    step = _count(lambda: scaler.step(opt))
    update = _count(scaler.update)
    n = sum(SIZES)
    how = f"measured: torch {torch.__version__} torch.amp.GradScaler('cpu') on fp32 grads"
    return {
        "scaler.scale": _row([scale], n, how + ": scale(loss), one multiply of the 0-dim loss"),
        "scaler.unscale": _row([unscale], n, how + ": unscale_ (_amp_foreach_non_finite_check_and_unscale_)"),
        "scaler.step": _row([step], n, how + ": step() after unscale_, optimizer step excluded; the sync is "
                            "found_inf.item() (grad_scaler.py _maybe_opt_step)", gpu_syncs=1),
        "scaler.update": _row([update], n, how + ": update() (_amp_update_scale_), independent of size"),
    }


def decent_dp_mix_bucket(param_block, comm_block, self_weight: float, peer_weight: float, peers: int) -> None:
    """The tensor ops decent_dp 0.2.3 ddp.py issues per bucket per iteration with the default
    param_as_bucket_view=True, outside the optimizer step: _ddp_fn lines 225-230 (mix in the received
    neighbours' average) and lines 260-267 (stage the updated parameters for the next all-reduce)."""
    adaptive = 1.0
    param_block.mul_((1 - adaptive) + adaptive * (self_weight - (1 - self_weight) / peers))  # line 226
    param_block.add_(comm_block, alpha=adaptive)  # line 230
    # ... optimizer (or scaler) step and zero_grad on the bucket's parameters happen here (lines 242-253)
    comm_block.copy_(param_block)  # line 261
    comm_block.mul_(peer_weight / peers)  # line 267, then dist.all_reduce(comm_block, async_op=True)


def mixing_rows() -> dict[str, dict]:
    n = sum(SIZES)  # every size is a multiple of 32, so the aligned block holds exactly the parameters
    param_block, comm_block = torch.randn(n), torch.randn(n)
    tally = _count(lambda: decent_dp_mix_bucket(param_block, comm_block, 0.5, 0.5, 1))
    return {
        "mixing.decent-dp": _row([tally], n, f"measured: the per-bucket ops of {DECENT_DP} ddp.py _ddp_fn "
                                 "(param_as_bucket_view=True), replicated in decent_dp_mix_bucket; ops are "
                                 "per bucket, bytes per element of the 32-aligned bucket"),
    }


def ddp_rows() -> dict[str, dict]:
    """Derived, not run (no process group here), from torch/csrc/distributed/c10d/reducer.cpp:
    mark_variable_ready_dense copies each gradient into its bucket view with at::mul_out(bucket_view,
    grad, 1/world_size) (read 4 B + write 4 B per fp32 element, one kernel per parameter tensor), and
    finalize_bucket_dense copies the all-reduced bucket back with grad.copy_(bucket_view) (another
    8 B, one kernel per tensor) unless gradient_as_bucket_view=True. With gradient_as_bucket_view=True
    the grad is the bucket view: only bucket_view.div_(world_size) (8 B), or the mul_out copy-in when
    zero_grad(set_to_none=True) replaced the grad with a fresh tensor (also 8 B)."""
    return {
        "ddp.bucket-copies": dict(bytes_per_param=16.0, ops_per_param_tensor=2,
                                  how="derived from reducer.cpp: mul_out copy-in (8 B) + copy_ back (8 B), "
                                      "gradient_as_bucket_view=False"),
        "ddp.bucket-view": dict(bytes_per_param=8.0, ops_per_param_tensor=1,
                                how="derived from reducer.cpp: div_ in place or mul_out copy-in (8 B), "
                                    "gradient_as_bucket_view=True"),
    }


def traffic_rows() -> dict[str, dict]:
    return optimizer_rows() | scaler_rows() | mixing_rows() | ddp_rows()


def render_traffic() -> str:
    header = [
        f"# measured by: python -m profiler.opcount --traffic (torch {torch.__version__}, CPU, fp32 params)",
        f"# parameters: {len(SIZES)} fp32 tensors, {sum(SIZES):,} elements; bytes = kernel inputs + outputs",
        "# ops: aten calls per step per parameter group (one device and dtype); a foreach call launches",
        "# one CUDA kernel per chunk of <= 110/64/48/36/30 tensors (1-5 lists) or 320 x 65,536 elements",
        "# (MultiTensorApply.cuh; larger chunks on sm90+ builds). zero_dim ops: the step counters live",
        "# on the CPU for foreach/for-loop Adam and AccumAdam (host time, no kernel), on the GPU for fused",
        "# Adam; GradScaler's scale and found_inf live on the GPU. Fused Adam's grads count as written.",
    ]
    body = []
    for table, row in traffic_rows().items():
        body.append(f"\n[{table}]")
        body += [f"{k} = {toml_value(v)}" for k, v in row.items()]
    return "\n".join(header + body) + "\n"
