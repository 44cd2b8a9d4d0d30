"""Per-GPU memory of one data-parallel training method: what it holds, and its peak over an iteration.

Why: a method that is fastest but does not fit in GPU memory is no recommendation. The answer is the
largest of a few phases of one iteration, not the sum of every tensor a method ever holds: gradients
(with zero_grad(set_to_none=True), what rtmodel_harness/recipe.py runs) exist only from backward to the
step, and a step's temporaries never coincide with the activations. `phases` lists each phase's bytes.

    from runtime_model.memory.accounting import METHODS, TrainingRecipe, MemoryUse, method_memory
    use = method_memory("fsdp", 1.2e9, TrainingRecipe(), world=64, gpus_per_node=8,
                        activation_bytes=9e9, capacity_bytes=80e9)
    use.peak_bytes, use.fits, dict(use.parts), dict(use.phases)

Each term and its source is in runtime_model/memory/methods.py (the methods), optimizer_terms.py (states,
step temporaries) and fsdp_timeline.py (FSDP2's all-gathers and reduce-scatters); docs/memory.md lists them
with the benchmark that checks them against MemTracker on real DDP, Decent-DP and FSDP2 steps.
"""

from __future__ import annotations

from dataclasses import dataclass

from runtime_model.core.constraints import AT_LEAST_ONE, MAX_PARAMS, NON_NEGATIVE, POSITIVE, Interval
from runtime_model.core.errors import InvalidCombination, InvalidValue
from runtime_model.memory.inputs import ModelShape, TrainingRecipe, model_shape
from runtime_model.memory.methods import BUILDERS, Activations

__all__ = ["METHODS", "MemoryUse", "ModelShape", "TrainingRecipe", "method_memory"]

METHODS = ("ddp", "decent-dp", "local-sgd", "fsdp", "zero2", "zero1", "hsdp")
PARAMS = Interval(0.0, MAX_PARAMS, closed="right")


@dataclass(frozen=True)
class MemoryUse:
    """A method's memory per rank. `parts` are the sizes of what it holds (bytes, in PART_ORDER, then its
    buffers, "activations", "step temporaries"); `peak_bytes` is the largest of `phases`, each the bytes alive
    together in one phase of the iteration (activations counted only where they are alive)."""

    parts: tuple[tuple[str, float], ...]
    peak_bytes: float
    capacity_bytes: float | None
    activations_known: bool
    phases: tuple[tuple[str, float], ...] = ()

    @property
    def fits(self) -> bool | None:
        """False when the peak (without activations if they are unknown) exceeds the capacity; True when it
        fits with known activations; None when there is no capacity or the activations are unknown."""
        if self.capacity_bytes is None:
            return None
        if self.peak_bytes > self.capacity_bytes:
            return False
        return True if self.activations_known else None

    @property
    def peak_phase(self) -> str:
        """The phase that sets the peak."""
        return max(self.phases, key=lambda item: item[1])[0] if self.phases else ""

    def part(self, name: str) -> float:
        return dict(self.parts).get(name, 0.0)


def method_memory(
    method: str,
    params: float,
    recipe: TrainingRecipe,
    *,
    world: int,
    gpus_per_node: int = 1,
    activation_bytes: float | None = None,
    capacity_bytes: float | None = None,
    **shape,
) -> MemoryUse:
    """The memory of `method` per rank for a model of `params` parameters trained with `recipe` on `world`
    ranks. `shape` takes ModelShape's fields (largest_tensor_params, unit_params, bucket_params, backend,
    replica, fragments, buffer_bytes) by keyword. activation_bytes: the activations' peak over forward and backward
    (profiler/activation_memory.py); None when unknown: the peak then omits them and `fits` says None
    unless the rest already exceeds capacity_bytes."""
    if method not in METHODS:
        raise InvalidValue("method", f"one of {', '.join(METHODS)}", method)
    PARAMS.check("params", params)
    if not isinstance(recipe, TrainingRecipe):
        raise InvalidValue("recipe", "a TrainingRecipe", type(recipe).__name__)
    AT_LEAST_ONE.check("world", world)
    AT_LEAST_ONE.check("gpus_per_node", gpus_per_node)
    if activation_bytes is not None:
        NON_NEGATIVE.check("activation_bytes", activation_bytes)
    if capacity_bytes is not None:
        POSITIVE.check("capacity_bytes", capacity_bytes)
    model = model_shape(params, shape)
    if method == "hsdp" and world % min(gpus_per_node, world):
        raise InvalidCombination(
            "hsdp shards within a node: {world} is not a multiple of {gpus_per_node}",
            world=world,
            gpus_per_node=gpus_per_node,
        )
    known = activation_bytes is not None
    acts = Activations(float(activation_bytes or 0.0), model.activation_grad_bytes if known else None)
    built = BUILDERS[method](float(params), recipe, model, world, gpus_per_node, acts)
    buffers = float(model.buffer_bytes)  # nn.Module buffers: no method shards or frees them
    timed = tuple((name, buffers + bytes_) for name, bytes_ in built.phases)
    parts = built.parts[:3] + [("model buffers", buffers)] + built.parts[3:]
    return MemoryUse(
        parts=tuple(parts) + (("activations", acts.peak), ("step temporaries", built.temporaries_bytes)),
        peak_bytes=max(b for _, b in timed),
        capacity_bytes=None if capacity_bytes is None else float(capacity_bytes),
        activations_known=known,
        phases=timed,
    )
