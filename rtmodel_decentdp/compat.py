"""Makes decent_dp 0.2.3's AccumAdam and AccumAdamW step on every torch rtmodel supports (>=2.4,<3).

Why: their `step()` first calls `self._cuda_graph_capture_health_check()`, a private method of
torch.optim.Optimizer. torch 2.11 does not have it (the first step dies with AttributeError); later
torch keeps it only as a deprecated alias of `_accelerator_graph_capture_health_check`, which reads
`group["capturable"]`, a key these optimizers' param groups lack (KeyError while a CUDA graph is being
captured, a FutureWarning every step otherwise). `ensure_optimizers_work()` gives both classes a method
of their own with torch's meaning for a non-capturable optimizer: nothing outside a CUDA graph capture,
torch's RuntimeError during one. torch itself is left untouched.

The advisor's line also hands the optimizer Decent-DP's (name, tensor) pairs (`lambda p: AccumAdam(p,
...)`); torch before 2.6 takes tensors only, so on such a torch the classes' constructors drop the names.
"""

from __future__ import annotations

import functools

import torch
from decent_dp import optim as dd_optim

CHECK_NAME = "_cuda_graph_capture_health_check"
PATCHED_CLASSES = ("AccumAdam", "AccumAdamW")
_MARK = "_rtmodel_compat"  # set on what this module installed: installing twice changes nothing


def graph_capture_in_progress() -> bool:
    """True while the current CUDA stream is capturing a graph (the one case torch's check refuses)."""
    return torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()


def _is_compiling() -> bool:
    is_compiling = getattr(torch.compiler, "is_compiling", None)
    return bool(is_compiling and is_compiling())


def _capture_health_check(self) -> None:
    """torch's check for an optimizer whose groups are not capturable: refuse a CUDA graph capture.

    Under torch.compile torch skips the check (inductor decides on graphs), and so does this."""
    if _is_compiling():
        return
    if graph_capture_in_progress():
        raise RuntimeError(
            f"Attempting CUDA graph capture of step() for an instance of {type(self).__name__} "
            "but param_groups' capturable is False."
        )


setattr(_capture_health_check, _MARK, True)


@functools.cache
def torch_takes_named_params() -> bool:
    """Whether this torch's optimizers accept (name, tensor) pairs (torch >= 2.6 does)."""
    probe = torch.zeros(1, requires_grad=True)
    try:
        torch.optim.SGD([("probe", probe)], lr=0.1)
    except TypeError:
        return False
    return True


def _unnamed(item):
    """A (name, tensor) pair's tensor; anything else as it is."""
    if isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str):
        return item[1]
    return item


def strip_param_names(params):
    """Optimizer params with every (name, tensor) pair replaced by its tensor, groups (dicts) included."""
    if isinstance(params, torch.Tensor):
        return params
    params = list(params)
    if params and isinstance(params[0], dict):
        return [{**g, "params": strip_param_names(g["params"])} for g in params]
    return [_unnamed(p) for p in params]


def _init_dropping_names(init):
    """The class's __init__, handed tensors instead of (name, tensor) pairs."""

    @functools.wraps(init)
    def __init__(self, params, *args, **kwargs):
        init(self, strip_param_names(params), *args, **kwargs)

    setattr(__init__, _MARK, True)
    return __init__


def ensure_optimizers_work(named_params_supported: bool | None = None) -> tuple[type, ...]:
    """Install the check (and, on torch < 2.6, the name-dropping constructor) on AccumAdam and AccumAdamW.

    Idempotent. `named_params_supported` overrides the probe of this torch (tests). Returns the classes."""
    if named_params_supported is None:
        named_params_supported = torch_takes_named_params()
    classes = tuple(getattr(dd_optim, name) for name in PATCHED_CLASSES)
    for cls in classes:
        setattr(cls, CHECK_NAME, _capture_health_check)
        init = cls.__dict__["__init__"]
        if not named_params_supported and not getattr(init, _MARK, False):
            cls.__init__ = _init_dropping_names(init)
    return classes


def installed() -> bool:
    """Whether ensure_optimizers_work has run: both classes carry this module's check."""
    return all(
        getattr(getattr(dd_optim, name).__dict__.get(CHECK_NAME), _MARK, False) for name in PATCHED_CLASSES
    )
