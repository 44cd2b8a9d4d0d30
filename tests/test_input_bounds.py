"""Every bounded input of the table (rtmodel_inputs/fields.py) refuses a value just outside its range in
one line naming its flag, exit 2, before any work: refusals generated from the table (as scikit-learn's
common tests generate invalid parameter values from `_parameter_constraints`), not written per flag."""

import pytest
from typer.testing import CliRunner

from rtmodel_cli.app import app
from rtmodel_inputs.fields import BOUNDS, INT, VALUE_TYPES
from rtmodel_inputs.request import flag_of

runner = CliRunner()
# What an input needs beside it to be read at all (your model's size needs its compute; a step's n, its step).
BESIDE = {"params": ["--compute-ms", "100"], "step_gpus": ["--step-ms", "100"]}


def outside(bounds) -> list[float]:
    """Values just outside `bounds` on each side that has an end (the end itself where it is open)."""
    values = []
    if bounds.low is not None:
        values.append(bounds.low if bounds.closed in ("right", "neither") else bounds.low - 1)
    if bounds.high is not None:
        values.append(bounds.high if bounds.closed in ("left", "neither") else bounds.high * 10)
    return values


CASES = [
    (name, value)
    for name, bounds in BOUNDS.items()
    for value in outside(bounds)
    if not (VALUE_TYPES[name] == INT and value < -(2**62))
]


def test_every_bounded_input_has_cases():
    assert {name for name, _ in CASES} == set(BOUNDS)


@pytest.mark.parametrize(("name", "value"), CASES, ids=[f"{n}={v:g}" for n, v in CASES])
def test_a_value_outside_its_bounds_is_one_line_naming_the_flag(name, value):
    text = str(int(value)) if VALUE_TYPES[name] == INT else repr(float(value))
    res = runner.invoke(app, ["advise", *BESIDE.get(name, []), flag_of(name), text])
    assert res.exit_code == 2, (res.exit_code, res.output)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in res.output, res.stderr
    assert flag_of(name) in lines[0], lines[0]
