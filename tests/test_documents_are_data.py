"""A profile is data: reading one never imports or calls what it names (issue 51).

Profiles travel between people and machines; a `workload.model` of `subprocess:run` must not run
anything on any rank unless the user names that factory on the command line (--model).
"""

import json
import sys
from pathlib import Path

import pytest

from tests.cli_helpers import run

ROOT = Path(__file__).resolve().parents[1]
PROFILE = ROOT / "tests" / "data" / "synthetic_profile_2x2.json"
HOSTILE = ("subprocess:run", "os:system", "builtins:exec", "shutil:rmtree")


def _profile_naming(tmp_path: Path, model: str, args: dict | None = None) -> Path:
    doc = json.loads(PROFILE.read_text())
    doc["workload"]["model"] = model
    doc["workload"]["model_args"] = args if args is not None else {"args": ["touch", str(tmp_path / "pwned")]}
    path = tmp_path / "shared-profile.json"
    path.write_text(json.dumps(doc))
    return path


def _planting_module(tmp_path: Path, monkeypatch) -> str:
    """A module whose import leaves a file behind: proof of whether anything imported it."""
    (tmp_path / "planted_factory.py").write_text(
        f"open({str(tmp_path / 'imported')!r}, 'w').close()\ndef make():\n    raise SystemExit('called')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("planted_factory", None)
    return "planted_factory:make"


@pytest.mark.parametrize("model", HOSTILE)
def test_validate_refuses_a_profile_naming_code_in_one_line(tmp_path, model):
    res = run(
        "validate", "--profile", _profile_naming(tmp_path, model), "--topology", "ring", "--iterations", "3"
    )
    assert res.exit_code == 2, res.output
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and "runs no code a document names" in lines[0] and "--model" in lines[0]
    assert not (tmp_path / "pwned").exists() and list(tmp_path.iterdir()) == [
        tmp_path / "shared-profile.json"
    ]


def test_the_profiles_own_factory_is_never_imported_even_beside_another_model(tmp_path, monkeypatch):
    from calibration.profile_view import profile_from_document
    from rtmodel_validation.errors import ValidationError
    from rtmodel_validation.plan import resolve_workload

    spec = _planting_module(tmp_path, monkeypatch)
    profile = profile_from_document(json.loads(_profile_naming(tmp_path, spec, {}).read_text()), "shared")
    with pytest.raises(ValidationError, match="runs no code a document names"):
        resolve_workload(profile, None, None)
    workload, notes = resolve_workload(
        profile, "synthetic", None
    )  # the user's --model runs, not the profile's
    assert workload.model == "synthetic" and any(spec in n for n in notes)
    assert not (tmp_path / "imported").exists()


def test_a_factory_named_on_the_command_line_is_the_users_choice(tmp_path, monkeypatch):
    from calibration.profile_view import profile_from_document
    from rtmodel_validation.plan import resolve_workload

    spec = _planting_module(tmp_path, monkeypatch)
    profile = profile_from_document(json.loads(PROFILE.read_text()), "mine")
    workload, _ = resolve_workload(profile, spec, None)
    assert workload.model == spec and (tmp_path / "imported").exists()


def test_a_model_name_that_cannot_print_is_shown_escaped(tmp_path):
    res = run(
        "validate",
        "--profile",
        _profile_naming(tmp_path, "evil\udc80:x" + "y" * 5000, {}),
        "--topology",
        "ring",
    )
    assert res.exit_code == 2 and "\\udc80" in res.output and len(res.output) < 600
