"""The CLI in-process, as tests call it (typer's CliRunner)."""

import json

from typer.testing import CliRunner

from rtmodel_cli.app import app

runner = CliRunner()


def run(*args, **kw):
    return runner.invoke(app, [str(a) for a in args], **kw)


def advise_json(*args) -> dict:
    res = run("advise", *args, "--format", "json")
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)
