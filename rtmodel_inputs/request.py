"""The request a user's options make, checked where the text is known: the presets' keywords for the
node's NICs and NCCL's algorithm, the user's own numbers, the variation and the batch per GPU.

Why below the shell: advise, every plot, validate's prediction and notebooks build the same request;
the shell only declares the options (rtmodel_cli/options.py) and shows these errors by flag.
"""

from __future__ import annotations

from enum import StrEnum

from runtime_model.core.errors import InvalidValue


def flag_of(name: str) -> str:
    """The command-line flag of a model input: gpus_per_node -> --gpus-per-node."""
    return "--" + name.replace("_", "-")


class NcclAlgo(StrEnum):
    auto = "auto"
    ring = "ring"
    tree = "tree"


def network_kw(nics_per_node: int | None, nccl_algo: str | None) -> dict:
    """The keyword arguments of `presets.resolve` for the node's NICs and NCCL's algorithm, given ones only."""
    kw = {}
    if nics_per_node is not None:
        kw["nics_per_node"] = nics_per_node
    if nccl_algo is not None:
        kw["nccl_algo"] = str(NcclAlgo(nccl_algo))
    return kw


class MessageDtype(StrEnum):
    fp32 = "fp32"
    bf16 = "bf16"
    fp16 = "fp16"


def own_numbers(
    compute_ms: float | None,
    optimizer_ms: float | None,
    message_dtype: str | None,
    dispatch_us: float | None = None,
) -> dict:
    """The keyword arguments of `presets.resolve` for the user's own numbers, only those given (so a model
    without them still answers when none is). Their ranges are the model's to check, once
    (preset_choice.check_measured_times); its error names the input, which the shell shows as the flag."""
    given = {"dispatch_us": dispatch_us, "compute_ms": compute_ms, "optimizer_ms": optimizer_ms}
    kw = {name: value for name, value in given.items() if value is not None}
    if message_dtype is not None:
        kw["message_dtype"] = str(MessageDtype(message_dtype))
    return kw


class BadStraggler(InvalidValue):
    """A --straggler text that is not FACTOR[:COUNT] with a slowdown in [1, 100] and 1..n ranks; the
    message shows the text as given: "--straggler '0.5': a straggler is slower than the rest: ..."."""

    def __init__(self, text: str, problem: str):
        self.problem = problem
        super().__init__("straggler", problem, text)

    def message_for(self, show_name) -> str:
        return f"{show_name(self.name)} {self.value!r}: {self.problem}"


def parse_straggler(text: str, gpus: int | None) -> tuple[float, int]:
    """'FACTOR[:COUNT]' -> (factor, count), checked: FACTOR in [1, 100], 1 <= COUNT <= gpus (when gpus
    is a valid count; a bad one is the model's to name). BadStraggler names the flag."""
    from runtime_model.core.variation import STRAGGLER_FACTOR
    from runtime_model.core.variation import parse_straggler as parse

    try:
        factor, count = parse(text.strip())
    except ValueError as exc:
        raise BadStraggler(text, str(exc).split(", got")[0]) from None
    if not STRAGGLER_FACTOR.contains(factor):
        raise BadStraggler(
            text, f"a straggler is slower than the rest: FACTOR must be {STRAGGLER_FACTOR.describe()}"
        )
    if count < 1:
        raise BadStraggler(text, "COUNT (the number of slow ranks) must be an integer >= 1")
    if gpus is not None and gpus >= 1 and count > gpus:
        raise BadStraggler(text, f"COUNT ({count}) must be at most the number of GPUs ({gpus})")
    return factor, count


def variation_kw(
    straggler: str | None, rank_cv: float | None, node_cv: float | None, gpus: int | None
) -> dict:
    """The keyword arguments of `presets.resolve` for the persistent and node-correlated variation, only
    those given. The CVs are the model's to check (preset_choice.check_variation); --straggler's text is
    parsed here, where the text is known, so that its message can show it as typed."""
    kw = {}
    if straggler is not None:
        kw["straggler"] = parse_straggler(straggler, gpus)
    if rank_cv is not None:
        kw["rank_cv"] = rank_cv
    if node_cv is not None:
        kw["node_cv"] = node_cv
    return kw


def check_batch_per_gpu(batch_per_gpu: float | None, global_batch: float | None) -> None:
    """--batch-per-gpu: at least one unit per GPU, and never beside --global-batch (two answers to one
    question; the plots took the per-GPU one silently before)."""
    from runtime_model.core.constraints import Interval
    from runtime_model.core.errors import InvalidCombination

    if batch_per_gpu is None:
        return
    Interval(1.0, None, closed="left").check("batch_per_gpu", batch_per_gpu)
    if global_batch is not None:
        raise InvalidCombination(
            "{batch_per_gpu} and {global_batch} both set the batch: give one",
            batch_per_gpu=batch_per_gpu,
            global_batch=global_batch,
        )
