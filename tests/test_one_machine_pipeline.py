"""One machine, the documented pipeline: `profile --quick`, then `calibrate` with no flags, works.

And the rules around it, through the real command line: calibrate falls back to the same default
presets as advise (saying so); a bad profile is exit 2 from both; `profile --resume FILE` (the command
the incomplete-profile error suggests) parses and works; one rule for output paths (profile --out,
calibrate --out, validate --results: checked before any work, one `error:` line, nothing left
behind); validate's default results file lives in the working directory (one per project) and a failed write still shows the
result. Only the tests marked `cluster` start ranks (torch); the rest are fast and torch-free.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import typer
from typer.testing import CliRunner

from calibration import load_profile, synthetic_profile
from calibration.synthetic import SyntheticTruth
from rtmodel_cli.app import app
from rtmodel_cli.failing import guard_app
from rtmodel_util.files import OutputPathError, check_output_path
from runtime_model.presets import to_model as presets

ROOT = Path(__file__).parent.parent
DATA = ROOT / "tests" / "data"
runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, [str(a) for a in args])


def one_error_line(res) -> str:
    assert "Traceback" not in res.output
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("error: "), lines
    return lines[0]


def default_links() -> tuple[str, str]:
    """(inter, intra) preset names advise uses when none is given: the expectation, not hard-coded."""
    return presets.link_names(None, None)


def single_node_profile(path: Path, noisy_intra: bool = False) -> Path:
    """A recorded one-machine profile (1 node x 2 ranks); noisy_intra: all-reduce times that do not grow
    with the message size, so no per-byte cost resolves (what a busy laptop records)."""
    doc = synthetic_profile(SyntheticTruth(nodes=1, ranks_per_node=2, iterations=5, samples_per_size=4))
    if noisy_intra:
        rng = np.random.default_rng(3)
        for pat in doc["communication"]["patterns"]:
            for res in pat["results"]:
                res["samples_s"] = [float(1e-3 * rng.uniform(0.5, 1.5)) for _ in res["samples_s"]]
    path.write_text(json.dumps(doc))
    return path


# ----------------------------------------------------------------------------- 1. calibrate falls back like advise


@pytest.mark.parametrize("noisy_intra", [False, True], ids=["single-node", "single-node-noisy"])
def test_calibrate_without_flags_uses_advises_default_presets_and_says_so(tmp_path, monkeypatch, noisy_intra):
    monkeypatch.chdir(tmp_path)
    prof = single_node_profile(tmp_path / "p.json", noisy_intra)
    inter, intra = default_links()
    res = invoke("calibrate", prof, "--format", "json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    prov, notes = doc["provenance"], doc["notes"]
    assert prov["inter.bandwidth_Bps"].startswith(f"preset {inter} (not measured; default preset; --network")
    assert any(n.startswith("inter-node link NOT measured (the profile is single-node") for n in notes)
    assert any(
        n.startswith(f"inter-node link: preset {inter} is the default") and "--network NAME" in n
        for n in notes
    )
    if noisy_intra:  # the intra-node link was measured but resolved no bandwidth: a preset too, said why
        assert prov["intra.latency_s"].startswith(f"preset {intra} (not measured; default preset; --intra")
        assert any("intra-node link NOT measured (no pattern resolved a per-byte cost" in n for n in notes)
        assert any(n.startswith(f"intra-node link: preset {intra} is the default") for n in notes)
    else:
        assert prov["intra.bandwidth_Bps"].startswith("measured")
    assert not any("fallback_network" in n for n in notes)

    # advise --profile falls back to the very same presets
    adv = invoke("advise", "--profile", prof, "--gpus", "16", "--format", "json")
    assert adv.exit_code == 0, adv.output
    adv_prov = json.loads(adv.stdout)["provenance"]
    assert adv_prov["inter.bandwidth_Bps"] == f"preset {inter}"
    assert prov["inter.bandwidth_Bps"].startswith(adv_prov["inter.bandwidth_Bps"] + " ")
    assert sorted(os.listdir(tmp_path)) == ["p.json"]


def test_calibrate_names_the_preset_the_user_chose_and_an_unused_one(tmp_path):
    prof = single_node_profile(tmp_path / "p.json")
    res = invoke("calibrate", prof, "--network", "tcp-25g", "--intra", "pcie3", "--format", "json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["provenance"]["inter.latency_s"] == "preset tcp-25g (not measured; given by --network tcp-25g)"
    assert "--intra pcie3 not used: the profile measured the intra-node link" in doc["notes"]
    bad = invoke("calibrate", prof, "--network", "no-such-net")
    assert bad.exit_code == 2 and "no-such-net" in one_error_line(bad)


def test_library_calibrate_without_a_fallback_names_the_flag_not_the_parameter():
    from calibration.calibrate_profile import calibrate
    from calibration.profile_view import profile_from_document
    from rtmodel_documents.profile_checks import CalibrationError

    with pytest.raises(CalibrationError) as err:
        calibrate(profile_from_document(synthetic_profile(SyntheticTruth(nodes=1, ranks_per_node=2, iterations=5))))
    msg = str(err.value)
    assert "--network NAME" in msg and "fallback_network" not in msg


def _incomplete(doc):
    doc.update(complete=False, sections_done=["shape", "compute"])
    del doc["communication"]


BAD_PROFILES = {
    "missing": None,
    "truncated": '{"tool": "rtmodel-profile", "schema',
    "incomplete": _incomplete,
    "NaN time": lambda d: d["compute"]["forward_s"][0].__setitem__(0, float("nan")),
    "not a profile": lambda d: d.update(schema="something-else/1"),
}


@pytest.mark.parametrize("case", sorted(BAD_PROFILES))
def test_a_bad_profile_is_exit_2_and_the_same_line_from_advise_and_calibrate(case, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    bad = BAD_PROFILES[case]
    path = Path("p.json")
    if isinstance(bad, str):
        path.write_text(bad)
    elif bad is not None:
        doc = synthetic_profile(SyntheticTruth(nodes=1, ranks_per_node=2, iterations=5, samples_per_size=3))
        bad(doc)
        path.write_text(json.dumps(doc))  # json writes NaN as NaN: what a broken writer leaves
    cal = invoke("calibrate", path)
    adv = invoke("advise", "--profile", path, "--gpus", "8")
    assert cal.exit_code == 2 and adv.exit_code == 2, (cal.output, adv.output)
    assert one_error_line(cal) == one_error_line(adv)
    assert sorted(os.listdir(tmp_path)) == ([] if bad is None else ["p.json"])


# ----------------------------------------------------------------------------- 2. profile --resume FILE


@pytest.fixture
def captured_profile_runs(monkeypatch):
    """`rtmodel profile` up to the point where ranks would start: run_profile records its arguments."""
    import profiler.launch

    calls = []
    monkeypatch.setattr(profiler.launch, "run_profile", calls.append)  # its one ProfileOptions
    return calls


def test_the_suggested_resume_command_parses_and_resumes_that_file(
    tmp_path, monkeypatch, captured_profile_runs
):
    monkeypatch.chdir(tmp_path)
    doc = synthetic_profile(SyntheticTruth(nodes=1, ranks_per_node=2, iterations=5, samples_per_size=3))
    _incomplete(doc)
    Path("my profile.json").write_text(json.dumps(doc))  # a space: the suggestion must quote it
    err = one_error_line(invoke("calibrate", "my profile.json"))
    command = re.search(r"`(rtmodel profile --resume [^`]+)`", err).group(1)
    argv = shlex.split(command)
    assert argv[:2] == ["rtmodel", "profile"]
    res = runner.invoke(app, argv[1:])
    assert res.exit_code == 0, res.output
    (opts,) = captured_profile_runs
    assert opts.out == "my profile.json" and opts.resume is True


def test_out_and_resume_of_one_file_resume_or_start_it(tmp_path, monkeypatch, captured_profile_runs):
    """A requeued job script passes both: the first run starts the file, later runs finish it."""
    monkeypatch.chdir(tmp_path)
    assert invoke("profile", "--out", "p.json", "--resume", "./p.json", "--quick").exit_code == 0
    assert invoke("profile", "--out", "q.json").exit_code == 0
    assert [(o.out, o.resume) for o in captured_profile_runs] == [
        ("p.json", True),
        ("q.json", False),
    ]
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize(
    "args, needle",
    [
        ([], "--out FILE is required (or --resume FILE"),
        (["--out", "a.json", "--resume", "b.json"], "--out a.json and --resume b.json name different files"),
        (["--resume", "p.json"], "--resume p.json: that file does not exist, so there is nothing to finish"),
        (["--resume", "missing/p.json"], "--resume missing/p.json: that file does not exist"),
        (["--out", "missing/p.json", "--resume", "missing/p.json"], "directory missing does not exist"),
    ],
)
def test_profile_out_and_resume_mistakes_are_one_line(
    args, needle, tmp_path, monkeypatch, captured_profile_runs
):
    monkeypatch.chdir(tmp_path)
    res = invoke("profile", *args)
    assert res.exit_code == 2
    assert needle in one_error_line(res)
    assert not captured_profile_runs and not any(tmp_path.iterdir())


# ----------------------------------------------------------------------------- 3. one rule for output paths


def test_check_output_path_rule(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "f").write_text("")
    assert check_output_path(tmp_path / "x.json", "--out") == tmp_path / "x.json"
    assert check_output_path(tmp_path / "f", "--out") == tmp_path / "f"  # an existing file is replaced
    for path, needle in (
        (tmp_path / "d", f"--out {tmp_path / 'd'} is a directory"),
        (f"{tmp_path / 'new'}/", "is a directory"),
        (tmp_path / "no" / "x.json", f"directory {tmp_path / 'no'} does not exist"),
        (tmp_path / "f" / "x.json", f"{tmp_path / 'f'} is not a directory"),
        ("", "--out needs a file path"),
    ):
        with pytest.raises(OutputPathError, match=re.escape(needle)):
            check_output_path(path, "--out")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d", "f"]


def _write_only(tmp_path: Path) -> list[tuple[list[str], str, str]]:
    """(command, path flag, path): every command that writes a file, pointed at a directory / a missing one."""
    (tmp_path / "adir").mkdir()
    prof = str(DATA / "synthetic_profile_2x2.json")
    bad = []
    for path in ("adir", "missing/out.json"):
        bad += [
            (["profile", "--out", path, "--quick"], "--out", path),
            (["profile", "--resume", path], "--resume", path),
            (["calibrate", prof, "--out", path], "--out", path),
            (["validate", "--profile", prof, "--topology", "ring", "--results", path], "--results", path),
        ]
    return bad


def test_every_written_path_follows_one_rule_before_any_work(tmp_path, monkeypatch, captured_profile_runs):
    import rtmodel_validation.launch

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(
        rtmodel_validation.launch, "launch_local", lambda *a, **k: pytest.fail("validate started ranks")
    )
    for args, flag, path in _write_only(tmp_path):
        res = invoke(*args)
        assert res.exit_code == 2, (args, res.output)
        line = one_error_line(res)
        assert line.startswith(f"error: {flag} {path}"), (args, line)
        assert "is a directory" in line if path == "adir" else "does not exist" in line
        assert sorted(p.name for p in tmp_path.iterdir()) == ["adir"] and not any(
            (tmp_path / "adir").iterdir()
        )
    assert not captured_profile_runs


def test_atomic_profile_write_leaves_no_temp_file(tmp_path):
    from rtmodel_documents.profile_document import new_document
    from rtmodel_util.files import OutputPathError, write_json_atomic

    (tmp_path / "d").mkdir()
    with pytest.raises(OutputPathError):
        write_json_atomic(tmp_path / "d", new_document().to_json())  # never a rename onto a directory
    with pytest.raises(FileNotFoundError):
        write_json_atomic(tmp_path / "missing" / "p.json", new_document().to_json())  # creates no directory
    assert [p.name for p in tmp_path.iterdir()] == ["d"] and not any((tmp_path / "d").iterdir())


# ----------------------------------------------------------------------------- 4-5. validate's results file


def _fake_ranks(monkeypatch, before_return=None):
    """validate without torch: the launcher returns plausible reports of every rank."""
    import rtmodel_validation.launch

    def launch_local(job, nproc, timeout_s, workdir, progress=None):
        if before_return:
            before_return()
        from rtmodel_validation.job import RankReport

        rng = np.random.default_rng(0)
        return [
            RankReport(
                rank=r,
                local_rank=r % 2,
                host="h0",
                device="cpu",
                backend="gloo",
                allreduce_s=tuple(0.11 + 0.01 * rng.random(3)),
                decentralized_s=tuple(0.09 + 0.01 * rng.random(3)),
                distance_to_consensus=0.0,
            )
            for r in range(nproc)
        ]

    monkeypatch.setattr(rtmodel_validation.launch, "launch_local", launch_local)


VALIDATE = [
    "validate",
    "--profile",
    str(DATA / "synthetic_profile_2x2.json"),
    "--topology",
    "ring",
    "--iterations",
    "3",
    "--warmup",
    "2",
]


@pytest.mark.parametrize("fmt", ["table", "json"])
def test_validate_records_in_the_projects_directory_by_default_and_report_reads_it(tmp_path, monkeypatch, fmt):
    """One results file per project (the working directory), not one per user mixing unrelated runs."""
    work, other = tmp_path / "work", tmp_path / "other"
    work.mkdir()
    other.mkdir()
    monkeypatch.chdir(work)
    _fake_ranks(monkeypatch)
    res = invoke(*VALIDATE, "--format", fmt)
    assert res.exit_code == 0, res.output
    default = work / "rtmodel-validations.jsonl"
    assert len(default.read_text().splitlines()) == 1
    shown = res.stdout if fmt == "table" else res.stderr
    assert f"appended to {default}" in " ".join(shown.split())
    if fmt == "json":
        assert json.loads(res.stdout)["topology"] == "ring"
    rep = invoke("validate", "--report", "--format", "json")
    assert rep.exit_code == 0, rep.output
    assert json.loads(rep.stdout)["path"] == str(default) and json.loads(rep.stdout)["records"] == 1
    monkeypatch.chdir(other)  # another project sees none of it
    assert invoke("validate", "--report", "--format", "json").exit_code != 0
    assert not any(other.iterdir())


def test_the_default_results_file_is_the_working_directorys(tmp_path, monkeypatch):
    from rtmodel_validation.results import default_results_path

    monkeypatch.chdir(tmp_path)
    assert default_results_path() == tmp_path / "rtmodel-validations.jsonl"


def test_validate_help_shows_the_default_results_file(monkeypatch, tmp_path):
    from rtmodel_cli.commands.validate import register

    monkeypatch.chdir(tmp_path)
    local = typer.Typer()
    local.callback()(lambda: None)
    register(local)
    res = CliRunner().invoke(guard_app(local), ["validate", "--help"], env={"COLUMNS": "300"})
    assert res.exit_code == 0
    text = " ".join(res.output.split())
    assert "./rtmodel-validations.jsonl, in the directory validate runs in" in text


def test_validate_shows_the_result_even_when_recording_it_fails(tmp_path, monkeypatch):
    """The directory exists when checked, and is gone when the run ends: the result is still shown."""
    import shutil

    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").mkdir()
    _fake_ranks(monkeypatch, before_return=lambda: shutil.rmtree(tmp_path / "runs"))
    res = invoke(*VALIDATE, "--results", "runs/v.jsonl", "--format", "json", "--quiet")  # no progress lines
    assert res.exit_code == 2
    assert json.loads(res.stdout)["topology"] == "ring"  # shown first
    line = one_error_line(res)
    assert "runs/v.jsonl" in line and "not recorded" in line
    assert not any(tmp_path.iterdir())


# ----------------------------------------------------------------------------- the real thing (torch)


def rtmodel(*args: str, cwd: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    """The installed command line, as a user runs it (a fresh process: ranks, signals, exit codes)."""
    return subprocess.run(
        [sys.executable, "-m", "rtmodel_cli", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout
    )


@pytest.mark.slow
@pytest.mark.cluster
def test_profile_quick_then_calibrate_without_flags_on_one_machine(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    proc = rtmodel("profile", "--out", "profile.json", "--quick", "--quiet", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "" and "Decentralized Data Parallel" not in proc.stderr  # quiet: not Decent-DP's setup log
    inter, _ = default_links()
    monkeypatch.chdir(tmp_path)
    res = invoke("calibrate", "profile.json")
    assert res.exit_code == 0, res.output
    out = " ".join(res.stdout.split())
    assert "inter-node link NOT measured (the profile is single-node" in out
    assert f"inter-node link: preset {inter} is the default inter-node network" in out
    assert "--network NAME" in out and "fallback_network" not in out
    assert invoke("advise", "--profile", "profile.json", "--gpus", "16").exit_code == 0

    # A preempted run: the error suggests a command; that very command finishes the profile.
    doc = json.loads(Path("profile.json").read_text())
    partial = copy.deepcopy(doc)
    _incomplete(partial)
    Path("profile.json").write_text(json.dumps(partial))
    err = one_error_line(invoke("calibrate", "profile.json"))
    command = shlex.split(re.search(r"`(rtmodel profile --resume [^`]+)`", err).group(1))
    proc = rtmodel(*command[1:], "--quiet", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    resumed = load_profile(tmp_path / "profile.json")
    assert resumed.document.to_json()["compute"] == doc["compute"]  # kept, not measured again
    assert invoke("calibrate", "profile.json").exit_code == 0
    assert sorted(os.listdir(tmp_path)) == ["profile.json"]
