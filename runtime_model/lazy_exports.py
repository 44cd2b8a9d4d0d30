"""A package's public names imported on first use (PEP 562), so `import calibration` stays cheap:
the package lists name -> module once and this makes its module `__getattr__`."""

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
