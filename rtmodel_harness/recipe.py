"""The training recipe the profiler times and the validator trains: precision and optimizer, in one place.

Why one place: profiler/compute.py, rtmodel_validation/runner.py (DDP, Decent-DP, local SGD) must run the same
step, or the profile measures one recipe and validation trains another. Torch is imported lazily, so the
launchers can check `--precision` / `--optimizer` without it.

Precision (what the paper's code does for fp16: WangZesen/Decentralized-Training-Exp):
- fp32: plain float32; TF32 off (torch.backends.cuda.matmul.allow_tf32 = cudnn.allow_tf32 = False).
- tf32: float32 with TF32 matmuls and convolutions on (both flags True). On a CPU there is no TF32: it
  runs as fp32 (`device_note` says so).
- fp16: torch.autocast(device, float16) around forward and loss, a GradScaler:
  scaler.scale(loss).backward(); scaler.step(opt); scaler.update(). GPU only: refused on a CPU run.
  Under Decent-DP the scaler is handed to DecentralizedDataParallel(scaler=...), whose per-bucket hooks
  call scaler.step(bucket optimizer) and scaler.update() after the last bucket (decent_dp/ddp.py).
- bf16: torch.autocast(device, bfloat16), no scaler (bf16 has fp32's exponent range).
  fp16 and bf16 turn TF32 on for the ops autocast keeps in fp32, as the paper's decent_train.py does for
  every run (it sets both flags unconditionally).
Optimizer: adam = torch.optim.Adam (what DDP trains with); accum-adam = decent_dp.optim.AccumAdam with
accum_iter=4 (the paper's transformer config; what the advisor prints for Decent-DP). DDP and local SGD
run the same --optimizer as Decent-DP, so a validation compares the communication, not the optimizers.
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass

from rtmodel_harness.errors import WorkloadError

PRECISIONS = ("fp32", "tf32", "fp16", "bf16")
OPTIMIZERS = ("adam", "accum-adam")
ACCUM_ITER = 4  # AccumAdam's accumulation steps in the paper's transformer config
# (matmul.allow_tf32, cudnn.allow_tf32) per precision; fp16/bf16 as the paper's code: both on
_TF32_FLAGS = {"fp32": (False, False), "tf32": (True, True), "fp16": (True, True), "bf16": (True, True)}


def check_precision(precision, flag: str = "--precision", error=WorkloadError) -> str:
    if precision not in PRECISIONS:
        raise error(f"{flag} must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    return precision


def check_optimizer(optimizer, flag: str = "--optimizer", error=WorkloadError) -> str:
    if optimizer not in OPTIMIZERS:
        raise error(f"{flag} must be one of {', '.join(OPTIMIZERS)}, got {optimizer!r}")
    return optimizer


@dataclass(frozen=True)
class Recipe:
    """Precision and optimizer of one training; the step helpers below are the only way steps are run."""

    precision: str = "fp32"
    optimizer: str = "adam"

    def __post_init__(self):
        check_precision(self.precision)
        check_optimizer(self.optimizer)

    @property
    def needs_decent_dp(self) -> bool:
        """AccumAdam is Decent-DP's: import rtmodel_decentdp (its compat shim) before make_optimizer."""
        return self.optimizer == "accum-adam"

    @property
    def uses_scaler(self) -> bool:
        """fp16 needs loss scaling (its 5-bit exponent underflows small gradients); bf16 does not."""
        return self.precision == "fp16"

    def device_note(self, device_type: str) -> str | None:
        """One line about what this recipe becomes on `device_type`; WorkloadError when it cannot run."""
        if device_type == "cuda":
            return None
        if self.precision == "fp16":
            raise WorkloadError(
                "--precision fp16 (autocast float16 + GradScaler) is a GPU recipe and this run has no CUDA "
                "device; use --precision bf16 or fp32 on a CPU"
            )
        if self.precision == "tf32":
            return f"--precision tf32 on {device_type}: there is no TF32 there, so it runs as plain fp32"
        return None

    def autocast_dtype(self):
        import torch

        return {"fp16": torch.float16, "bf16": torch.bfloat16}.get(self.precision)

    def autocast(self, device):
        """The forward-and-loss context: torch.autocast for fp16/bf16, nothing for fp32/tf32."""
        import torch

        dtype = self.autocast_dtype()
        return nullcontext() if dtype is None else torch.autocast(torch.device(device).type, dtype=dtype)

    def prepare(self, device):
        """Set the TF32 flags for this precision (process-wide) and return the GradScaler, or None."""
        import torch

        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = _TF32_FLAGS[self.precision]
        return torch.amp.GradScaler(torch.device(device).type) if self.uses_scaler else None

    def make_optimizer(self, params, lr: float):
        """torch Adam, or Decent-DP's AccumAdam. The stages (profiler, validation) import rtmodel_decentdp
        before this (`needs_decent_dp`): its compat shim makes AccumAdam step on every supported torch."""
        import torch

        params = list(params)
        if self.optimizer == "accum-adam":
            from decent_dp.optim import AccumAdam

            return AccumAdam(params, lr=lr, accum_iter=ACCUM_ITER)
        return torch.optim.Adam(params, lr=lr)

    def describe(self) -> str:
        return f"{self.precision}, {self.optimizer}"


def backward(loss, scaler) -> None:
    """loss.backward(), through the scaler when there is one (fp16)."""
    (scaler.scale(loss) if scaler is not None else loss).backward()


def optimizer_step(optimizer, scaler) -> None:
    """optimizer.step() (scaler.step + scaler.update with a scaler), then zero_grad."""
    if scaler is not None:
        scaler.step(optimizer)
        scaler.update()
    else:
        optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def train_step(recipe: Recipe, workload, model, batch, optimizer, scaler) -> None:
    """One DDP / local-SGD iteration: forward + loss under autocast, backward, optimizer step."""
    with recipe.autocast(workload.device):
        loss = workload.loss(model, batch)
    backward(loss, scaler)
    optimizer_step(optimizer, scaler)


def backward_only_step(recipe: Recipe, workload, model, batch, scaler) -> None:
    """One Decent-DP iteration: its hooks step the optimizer (through the scaler it was given) in backward."""
    with recipe.autocast(workload.device):
        loss = workload.loss(model, batch)
    backward(loss, scaler)
