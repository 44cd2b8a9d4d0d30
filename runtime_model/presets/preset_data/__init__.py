"""The presets shipped with rtmodel, as TOML files beside this module.

Why a reader here: three modules read these files, and importlib.resources (with the zipfile it pulls)
costs a hundredth of `advise`'s CPU for what, in an installed package, is a file beside this one.
"""

from pathlib import Path


def read_text(file_name: str) -> str:
    """The text of one shipped preset file (e.g. "gpus.toml")."""
    return Path(__file__).with_name(file_name).read_text(encoding="utf-8")
