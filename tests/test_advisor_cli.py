"""`rtmodel advise` / `rtmodel topologies` behaviour: JSON schema, verdicts, clear errors, no torch."""

import json
import math
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from rtmodel_cli.app import app
from runtime_model import presets
from runtime_model.advisor import advise

runner = CliRunner()


def run(*args):
    return runner.invoke(app, list(args))


def test_json_schema_and_consistency():
    res = run("advise", "--gpus", "64", "--format", "json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["schema"] == "rtmodel-advice/1"
    preds = {p["topology"]: p for p in doc["predictions"]}
    assert preds["allreduce"]["speedup_vs_allreduce"] == 1.0
    ar = preds["allreduce"]["iteration_s"]["mean"]
    for p in doc["predictions"][1:]:
        assert {"topology", "iteration_s", "speedup_vs_allreduce", "factors", "consensus", "applicable"} <= set(p)
        if p["applicable"]:
            assert p["speedup_vs_allreduce"] == pytest.approx(ar / p["iteration_s"]["mean"])
            f = p["factors"]
            assert f["overlap_s"] + f["links_s"] + f["variance_s"] == pytest.approx(ar - p["iteration_s"]["mean"])
            assert p["iteration_s"]["p50"] <= p["iteration_s"]["p99"]
    rec = doc["recommendation"]
    assert rec["topology"] in preds
    if rec["topology"] != "allreduce" and not rec["too_close_to_call"]:
        best = max((p for p in doc["predictions"][1:] if p["applicable"] and p["runs_on_decent_dp"]),
                   key=lambda p: p["speedup_vs_allreduce"])
        assert rec["topology"] == best["topology"]
        assert f'topology="{rec["topology"]}"' in rec["code"]
    assert "--nnodes 8 --nproc-per-node 8" in rec["torchrun"]


def test_inapplicable_topology_listed_with_reason():
    res = run("advise", "--gpus", "12", "--gpus-per-node", "4", "--format", "json")
    assert res.exit_code == 0, res.output
    preds = {p["topology"]: p for p in json.loads(res.stdout)["predictions"]}
    assert preds["one-peer-exp"]["applicable"] is False
    assert "power of 2" in preds["one-peer-exp"]["reason"]
    assert preds["base-2"]["applicable"] is True


def test_table_output_has_verdict_and_run_lines():
    res = run("advise", "--gpus", "32", "--cluster", "t4-ib100")
    assert res.exit_code == 0, res.output
    assert "allreduce (DDP)" in res.stdout
    assert "torchrun --nnodes 4 --nproc-per-node 8" in res.stdout
    assert any(w in res.stdout for w in ("Use ", "Keep All-Reduce", "Too close to call"))


def test_csv_output():
    res = run("advise", "--gpus", "16", "--format", "csv")
    assert res.exit_code == 0
    lines = res.stdout.strip().splitlines()
    assert lines[0].startswith("topology,applicable,mean_ms")
    assert lines[1].startswith("allreduce,")


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--gpus", "0"], "--gpus must be an integer >= 1"),
        (["--gpus", "64", "--gpus-per-node", "3"], "does not divide"),
        (["--gpu", "V100X"], "choose one of: A100, A40, H100, H200, T4"),
        (["--network", "carrier-pigeon"], "unknown network"),
        (["--model", "gpt5"], "unknown model"),
        (["--mfu", "2"], "--mfu must be in"),
        (["--compute-cv", "-1"], "--compute-cv"),
        (["--global-batch", "-5"], "--global-batch"),
        (["--topology", "star"], "unknown topology"),
        (["--profile", "/nonexistent/profile.json"], ""),
    ],
)
def test_bad_input_one_clear_line(args, needle):
    res = run("advise", *args)
    assert res.exit_code != 0
    out = res.output
    assert "Traceback" not in out
    assert needle in out
    assert len([ln for ln in out.strip().splitlines() if ln.strip()]) <= 2


def test_too_close_to_call_when_gap_inside_margin():
    sc = presets.scenario_from_choice(presets.resolve(8, gpus_per_node=8, gpu="H100", model="resnet50"))
    adv = advise(sc, margin=0.99)
    assert adv.recommendation.too_close_to_call
    assert "Too close to call" in adv.recommendation.verdict


def test_decentralization_wins_on_slow_network_with_big_message():
    """25 GbE with a 210 M-parameter model: All-Reduce's 2M bytes over the NIC should lose to AER."""
    sc = presets.scenario_from_choice(presets.resolve(64, gpus_per_node=8, network="eth-25g", model="transformer-big"))
    adv = advise(sc)
    rows = {r.topology: r for r in adv.rows}
    assert rows["alternating-exp-ring"].speedup > 1.2
    assert adv.recommendation.topology != "allreduce"


def test_topologies_command():
    res = run("topologies", "--gpus", "8", "--gpus-per-node", "2", "--format", "json")
    assert res.exit_code == 0, res.output
    rows = {r["topology"]: r for r in json.loads(res.stdout)}
    assert rows["one-peer-exp"]["consensus"]["exact_rounds"] == 3
    assert rows["ring"]["period"] == 2
    res = run("topologies", "--gpus", "6", "--gpus-per-node", "4")
    assert res.exit_code != 0 and "does not divide" in res.output


def test_advise_never_imports_torch():
    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from rtmodel_cli.app import app\n"
        "r = CliRunner().invoke(app, ['advise', '--gpus', '64', '--format', 'json'])\n"
        "assert r.exit_code == 0, r.output\n"
        "bad = [m for m in ('torch', 'decent_dp') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_advise_from_a_profile_says_what_was_measured():
    """A real CPU profile (2 pretend nodes x 1 rank) drives the prediction at a larger shape."""
    res = run("advise", "--profile", "tests/data/real_profile_2x1.json", "--gpus", "16", "--gpus-per-node", "1",
              "--format", "json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["inputs"]["measured_shape"] == {"gpus": 2, "gpus_per_node": 1}
    prov = " ".join(f"{k}: {v}" for k, v in doc["provenance"].items())
    assert "measured" in prov and "preset" in prov  # inter-node link measured, intra-node from a preset
    assert any("extrapolat" in n.lower() or "measured" in n.lower() for n in doc["notes"])
    ar = doc["predictions"][0]["iteration_s"]["mean"]
    assert ar > 0 and math.isfinite(ar)


def test_advise_rejects_a_corrupt_profile(tmp_path):
    bad = tmp_path / "p.json"
    bad.write_text('{"tool": "rtmodel-profile", "schema_version": 1, "compl')
    res = run("advise", "--profile", str(bad), "--gpus", "8")
    assert res.exit_code != 0 and "Traceback" not in res.output
    assert len(res.output.strip().splitlines()) <= 2
