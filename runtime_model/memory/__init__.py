"""Per-GPU memory of each data-parallel method: parameters, gradients, optimizer states, the method's own
buffers, activations and step temporaries, and the peak over one iteration's phases (docs/memory.md).
Imports only core."""

from runtime_model.memory.accounting import METHODS, MemoryUse, ModelShape, TrainingRecipe, method_memory

__all__ = ["METHODS", "MemoryUse", "ModelShape", "TrainingRecipe", "method_memory"]
