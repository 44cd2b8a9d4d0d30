"""Which GPU preset a traced device is: the name the CUDA driver reports, matched to the presets.

Why by family and memory: a trace names the board as the driver does ("NVIDIA A100-SXM4-80GB",
"Tesla V100-SXM2-16GB", "NVIDIA A100-PG509-200"); the presets are keyed by family with a memory variant
(A100, A100-80GB). The family is the name's first model token; among its presets the one whose memory is
nearest the device's (deviceProperties' totalGlobalMem) is the board.
"""

from __future__ import annotations

import re

FAMILY = re.compile(r"\b([A-Z]{1,2}\d{1,3}[A-Z]?)\b")  # A100, V100, H100, H200, T4, A40, L40S, B200


def gpu_preset_of(device_name: str, memory_bytes: int, presets: dict) -> str | None:
    """The preset name for this device (`presets`: name -> GpuPreset), or None when no preset is its family."""
    match = FAMILY.search(device_name.upper().replace("TESLA ", "").replace("NVIDIA ", ""))
    if match is None:
        return None
    family = match.group(1)
    candidates = [name for name in presets if re.fullmatch(rf"{family}(-.*)?", name.upper())]
    if not candidates:
        return None
    memory_gib = memory_bytes / 2**30
    return min(candidates, key=lambda name: abs(presets[name].memory_GiB - memory_gib))
