"""TOML text of the values `python -m profiler.opcount` writes (preset_data fragments): booleans,
strings, numbers (floats without a needless fraction) and lists wrapped at 100 columns."""

from __future__ import annotations


def toml_value(value) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, float):
        return f"{value:.10g}" if value != int(value) or abs(value) >= 1e15 else f"{int(value)}"
    if isinstance(value, list):
        items = [str(v) for v in value]
        lines, line = [], "  "
        for item in items:
            if len(line) + len(item) + 2 > 100:
                lines.append(line.rstrip())
                line = "  "
            line += item + ", "
        return "[\n" + "\n".join([*lines, line.rstrip()]) + "\n]"
    return str(value)
