"""What a preset answer assumed about the user's job, said where the answer starts (issue 50).

Why: the same cluster answers differently at another per-GPU batch (a small one leaves the GPU waiting
for the host) or NIC count, and the defaults (the model's published global batch at every n, one NIC
per node) are easy to miss at the bottom of the output. Each figure is the model's own input or derived
from it; the NIC hint names a cluster preset whose cited source gives nodes of that GPU more NICs.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from runtime_model.presets.preset_choice import PresetChoice
from runtime_model.presets.preset_types import AMP_PRECISIONS, PresetLibrary
from runtime_model.presets.to_model import ddp_iteration_parts, host_and_device_ms

# A loss the model does not charge, flagged where published runs met it (issue 47). NVIDIA
# DeepLearningExamples, PyTorch/Classification/ConvNets/resnet50v1.5/README.md, "Training performance"
# (pytorch-21.03, 256 images per GPU): ResNet-50 under AMP on one 8-GPU node scaled 84.1 % (DGX A100
# 80GB, 16,621 img/s), 86.7 % and 87.1 % (DGX-1 16/32GB, 8,322 and 8,056 img/s), 20-33 ms per step beyond
# one GPU's; in TF32/FP32 96.6-97.2 %. The model predicts 96.5-97.2 % for all of them: what grows with
# the image rate (the input pipeline, the host) is not in it. Transformer-big
# (PyTorch/Translation/Transformer/README.md) lost no more under AMP than in TF32, so only image models
# at AMP are flagged.
STEP_RATE_LOSS_MODELS = ("resnet50",)
STEP_RATE_LOSS = (
    "published one-node runs of ResNet-50 under AMP (DeepLearningExamples: DGX A100 and DGX-1, 8,056-16,621 "
    "img/s per node) scaled 84-87 % where this model predicts ~97 % (TF32/FP32: 97 %, as predicted): a loss "
    "of 20-33 ms per step it does not charge (the input pipeline and host at that rate); every row pays it "
    "alike, so the speedups lie nearer 1x"
)

# Eager PyTorch is what the presets' compute models (issue 49). Where a published run shows what
# torch.compile changes, the answer says so: nanoGPT's README (karpathy/nanoGPT@5a725d9, README.md) took
# GPT-2 small (124M) on one A100 "from ~250ms / iter to 135ms / iter" with torch.compile
# (rtmodel_literature/data/one_gpu_training.csv). A compiled loop's own trace or step time replaces it.
EAGER_ONLY_MODELS = ("gpt2-small",)
EAGER_ONLY = (
    "this compute is eager PyTorch's: torch.compile ran GPT-2 small 1.85x faster on one A100 (nanoGPT, 250 -> "
    "135 ms per iteration); for a compiled loop give its trace (--trace) or its compute (--compute-ms)"
)


@dataclass(frozen=True)
class Assumptions:
    """The per-GPU batch, what binds the step, and the NICs per node, each with where it came from."""

    batch_per_gpu: float | None  # units per GPU per iteration; None for a params-only model
    unit: str
    global_batch: float | None
    global_batch_from: str  # "yours" | "the model's default"
    step_bound: str | None  # "host" | "device"; None where measured times replace the presets' compute
    host_ms: float | None
    device_ms: float | None
    nics_per_node: int
    nics_from: str  # "yours" | "cluster NAME" | "the default"
    nic_hint: str | None  # a cited node of this GPU with more NICs, when one NIC was only the default
    anchor_line: str | None = None  # your DDP step, the compute backed out of it, the presets' residual
    step_rate_loss: str | None = None  # a published loss the model does not charge (STEP_RATE_LOSS)
    eager_only: str | None = None  # the presets' compute is eager's where compiling is published (EAGER_ONLY)
    padding_efficiency: float = 1.0  # real units / padded slots of a batch (the device computes on the slots)

    def notes(self) -> list[str]:
        """What the table prints under the verdict (the batch's warning is in the head line)."""
        return [
            n
            for n in (self.anchor_line, self.nic_hint, self.step_rate_loss, self.eager_only)
            if n is not None
        ]

    def to_dict(self) -> dict:
        return {**asdict(self), "warnings": self.warnings()}

    @classmethod
    def from_dict(cls, doc: dict) -> Assumptions:
        return cls(**{k: v for k, v in doc.items() if k != "warnings"})

    def short(self) -> str:
        """The line in a few words (advise --brief)."""
        parts = []
        if self.batch_per_gpu is not None:
            parts.append(
                f"{_units(self.batch_per_gpu)} {self.unit}s/GPU ({'your' if self.global_batch_from == 'yours' else 'default'} batch)"
            )
        if self.step_bound is not None:
            parts.append(f"{self.step_bound}-bound")
        parts.append(
            f"{self.nics_per_node} NIC/node" + ("" if self.nics_from == "yours" else f" ({self.nics_from})")
        )
        return "assumed: " + ", ".join(parts)

    def line(self) -> str:
        """One line for the head of the answer; a default batch that leaves the step host-bound says so in it
        (the host and device times are in the answer's "host floor" line)."""
        parts = []
        thin = (
            self.batch_per_gpu is not None and self.global_batch_from != "yours" and self.step_bound == "host"
        )
        if self.batch_per_gpu is not None:
            per_gpu = f"{_units(self.batch_per_gpu)} {self.unit}s per GPU"
            if self.padding_efficiency < 1:
                slots = self.batch_per_gpu / self.padding_efficiency
                per_gpu += f" in {_units(slots)} padded slots (padding efficiency {self.padding_efficiency:g})"
            if self.global_batch_from == "yours":
                parts.append(f"{per_gpu} (your global batch {self.global_batch:,.0f})")
            elif thin:
                parts.append(
                    f"{per_gpu} (the model's default {self.global_batch:,.0f} spread thin: host-bound; "
                    "--global-batch N sets yours)"
                )
            else:
                parts.append(f"{per_gpu} (the model's default global batch {self.global_batch:,.0f})")
        elif self.global_batch_from == "your compute":
            parts.append("your measured compute (--compute-ms) at your own batch")
        if self.global_batch_from == "your step":  # the model's compute at that batch, scaled to the step
            parts.append("the compute backed out of your DDP step (--step-ms)")
        if self.step_bound is not None and not thin:
            parts.append(f"{self.step_bound}-bound step")
        nics = f"{self.nics_per_node} NIC{'' if self.nics_per_node == 1 else 's'} per node"
        parts.append(nics + ("" if self.nics_from == "yours" else f" ({self.nics_from})"))
        return "assumed: " + "; ".join(parts)

    def warnings(self) -> list[str]:
        """What the user should know before acting on an answer built on a default they did not choose."""
        out = []
        if self.step_bound == "host" and self.global_batch_from != "yours":
            out.append(
                f"at {_units(self.batch_per_gpu)} {self.unit}s per GPU the step is host-bound: this answers for "
                "the model's published batch spread thin; give --global-batch N you train with (or --compute-ms)"
            )
        return out + self.notes()


def preset_assumptions(choice: PresetChoice, library: PresetLibrary, given: dict, anchor=None) -> Assumptions:
    """`given`: the user's own preset request (which options they set, by resolve's keyword names);
    `anchor`: the step_anchor.StepAnchor the compute was backed out of, if any."""
    model = library.model(choice.model)
    measured = choice.compute_ms is not None and given.get("global_batch") is None
    batch = None if model.params_only or measured else choice.global_batch
    bound = host_ms = device_ms = None
    if choice.compute_ms is None and not model.params_only:
        host_ms, device_ms = host_and_device_ms(ddp_iteration_parts(choice, library))
        bound = "host" if host_ms > device_ms else "device"
    cluster = given.get("cluster")
    if given.get("nics_per_node") is not None:
        nics_from = "yours"
    elif cluster is not None:
        nics_from = f"cluster {cluster}"
    else:
        nics_from = "the default"
    return Assumptions(
        batch_per_gpu=None if batch is None else batch / choice.gpus,
        unit=model.unit,
        global_batch=batch,
        global_batch_from="yours"
        if given.get("global_batch") is not None
        else _default_batch(measured, anchor),
        step_bound=bound,
        host_ms=host_ms,
        device_ms=device_ms,
        nics_per_node=choice.nics_per_node,
        nics_from=nics_from,
        nic_hint=_nic_hint(choice, library)
        if nics_from == "the default" and choice.gpus > choice.gpus_per_node
        else None,
        anchor_line=None if anchor is None else anchor.line(),
        step_rate_loss=STEP_RATE_LOSS
        if choice.model in STEP_RATE_LOSS_MODELS
        and choice.precision in AMP_PRECISIONS
        and choice.gpus_per_node > 1
        else None,
        eager_only=EAGER_ONLY if choice.model in EAGER_ONLY_MODELS and choice.compute_ms is None else None,
        padding_efficiency=choice.padding_efficiency,
    )


def _nic_hint(choice: PresetChoice, library: PresetLibrary) -> str | None:
    """A cluster preset of the same GPU and node size that cites more NICs per node, if any (one citing
    a datasheet first)."""
    cited = sorted(library.clusters.items(), key=lambda item: "datasheet" not in item[1].source)
    for name, c in cited:
        nics = c.nics_per_node
        if c.gpu == choice.gpu and c.gpus_per_node == choice.gpus_per_node and nics > choice.nics_per_node:
            return (
                f"one NIC per node is the default: {name} nodes of {c.gpus_per_node} x {c.gpu} carry {nics} "
                f"({c.source.split(':')[0]}); --nics-per-node N or --cluster {name} if yours do"
            )
    return None


def _default_batch(measured: bool, anchor) -> str:
    return "your step" if anchor is not None else "your compute" if measured else "the model's default"


def _units(count: float) -> str:
    return f"{count:,.0f}" if count >= 100 else f"{count:.3g}"
