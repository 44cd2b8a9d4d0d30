"""What a local launcher (profile's, validate's) checks on this host before any rank starts.

Why one function: both launchers must refuse a recipe this host cannot run (fp16 needs a CUDA GPU) and
pick the same backend for their ranks (rtmodel_util.backend_choice), from the one count of the GPUs here
(rtmodel_util.backend_choice.visible_gpus) that the launcher also sizes its launch by.
"""

from __future__ import annotations

from rtmodel_harness.recipe import Recipe
from rtmodel_util.backend_choice import pick_backend
from runtime_model.core.errors import UserError


def check_local_launch(
    recipe: Recipe, requested_backend: str, ranks: int, gpus: int, error: type[UserError]
) -> tuple[str, str | None]:
    """(backend, why it is gloo on a GPU host or None) for `ranks` ranks on a host with `gpus` GPUs;
    one-line errors for what cannot run here."""
    if not gpus:
        recipe.device_note("cpu")  # WorkloadError for fp16; tf32's note is the ranks' to say
    return pick_backend(requested_backend, ranks, gpus, error)
