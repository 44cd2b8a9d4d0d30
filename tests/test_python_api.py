"""docs/api.md's first python block runs as written and prints the verdict the command prints."""

import contextlib
import io
import json
import re
from pathlib import Path

from typer.testing import CliRunner

from rtmodel_cli.app import app

API = Path(__file__).parent.parent / "docs" / "api.md"


def _python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", API.read_text(), flags=re.S)


def test_the_first_python_block_prints_the_commands_verdict():
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(_python_blocks()[0], str(API), "exec"), {})
    doc = json.loads(CliRunner().invoke(app, ["advise", "--gpus", "64", "--format", "json"]).stdout)
    assert out.getvalue().strip() == doc["recommendation"]["verdict"]


def test_the_two_steps_run_as_written():
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(_python_blocks()[1], str(API), "exec"), {})
    assert "tcp-25g" in out.getvalue()


def test_the_package_names_its_public_api():
    import rtmodel_inputs

    assert {"advise", "advise_from", "resolve_inputs", "AdviceInputs", "Question"} <= set(
        rtmodel_inputs.__all__
    )
    assert rtmodel_inputs.advise is rtmodel_inputs.answer.advise
