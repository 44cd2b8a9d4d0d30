"""A package's public names imported on first use (PEP 562), so `import calibration` stays cheap:
the package lists its modules' public names once (`lazy_exports`) and gets its `__getattr__` and
`__all__`."""

from __future__ import annotations

import importlib
import sys


def lazy_getattr(package: str, exports: dict[str, str]):
    """The `__getattr__` for `package`: imports `exports[name]` on first access and caches the value."""

    def __getattr__(name: str):
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(exports[name]), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__


def lazy_exports(package: str, names_by_module: dict[str, tuple[str, ...]]):
    """(name -> module, `__getattr__`, `__all__`) for `package`, from each submodule's public names."""
    exports = {name: f"{package}.{module}" for module, names in names_by_module.items() for name in names}
    return exports, lazy_getattr(package, exports), sorted(exports)
