"""`rtmodel advise` / `rtmodel topologies` behaviour: JSON schema, verdicts, clear errors, no torch."""

import json
import math
import subprocess
import sys
import typing
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rtmodel_cli.app import app
from runtime_model.advice.advisor import advise
from runtime_model.presets import to_model as presets

runner = CliRunner()
ROOT = Path(__file__).parent.parent


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
    assert [p["family"] for p in doc["predictions"]][:2] == ["all-reduce", "gossip"]
    for p in [q for q in doc["predictions"] if q["family"] == "gossip"]:
        assert {"topology", "iteration_s", "speedup_vs_allreduce", "factors", "consensus", "applicable"} <= set(p)
        if p["applicable"]:
            assert p["speedup_vs_allreduce"] == pytest.approx(ar / p["iteration_s"]["mean"])
            f = p["factors"]
            parts = f["overlap_s"] + f["links_s"] + f["variance_s"] + f["uneven_s"]
            assert parts == pytest.approx(f["total_s"]) == pytest.approx(ar - p["iteration_s"]["mean"])
            assert p["iteration_s"]["p50"] <= p["iteration_s"]["p99"]
    rec = doc["recommendation"]
    assert rec["topology"] in preds
    if rec["topology"] != "allreduce" and not rec["too_close_to_call"]:
        runnable = [p for p in doc["predictions"][1:] if p["applicable"] and p["runs_on_decent_dp"]]
        fastest = max(p["speedup_vs_allreduce"] for p in runnable)
        # inside the margin of the fastest, the best consensus is picked
        tied = [p for p in runnable if p["speedup_vs_allreduce"] >= fastest / (1 + doc["margin"])]
        best = min(tied, key=lambda p: (p["convergence"]["transient_ratio"], -p["speedup_vs_allreduce"]))
        assert rec["topology"] == best["topology"]
        assert f'topology="{rec["topology"]}"' in rec["code"]
    assert "--nnodes 16 --nproc-per-node 4" in rec["torchrun"]  # the defaults: 4-GPU nodes


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




def test_too_close_to_call_when_gap_inside_margin():
    sc = presets.scenario_from_choice(presets.resolve(presets.PresetRequest(8, gpus_per_node=8, gpu="H100", model="resnet50")))
    adv = advise(sc, margin=0.99)
    assert adv.recommendation.too_close_to_call
    assert "Too close to call" in adv.recommendation.verdict


def test_decentralization_wins_on_slow_network_with_big_message():
    """25 GbE with a 210 M-parameter model: All-Reduce's 2M bytes over the NIC should lose to AER."""
    sc = presets.scenario_from_choice(presets.resolve(presets.PresetRequest(64, gpus_per_node=8, network="tcp-25g", model="transformer-big")))
    adv = advise(sc)
    rows = {r.topology: r for r in adv.rows}
    assert rows["alternating-exp-ring"].speedup > 1.2
    assert adv.recommendation.topology != "allreduce"


def test_topologies_command():
    res = run("topologies", "--gpus", "8", "--gpus-per-node", "2", "--format", "json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["schema"] == "rtmodel-topologies/1" and (doc["gpus"], doc["gpus_per_node"]) == (8, 2)
    rows = {r["topology"]: r for r in doc["topologies"]}
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


def test_the_executable_builds_only_the_command_it_runs():
    """`rtmodel advise` neither imports nor builds the other commands (issue 51: the main job near its import
    floor); --help, --version and a mistyped name get every command, so the list and the suggestion stay."""
    from rtmodel_cli.app import COMMANDS, build_app, commands_for

    assert commands_for(["advise", "--gpus", "64"]) == ("advise",)
    for argv in ([], ["--help"], ["--version"], ["advize"], ["--gpus", "advise"]):
        assert commands_for(argv) == COMMANDS
    built = build_app(commands_for(["plot", "speedup"]))
    assert [g.name for g in built.registered_groups] == ["plot"] and not built.registered_commands
    code = (
        "import sys\n"
        "sys.argv = ['rtmodel', 'advise', '--gpus', '64', '--format', 'json']\n"
        "from rtmodel_cli.app import main\n"
        "try:\n    main()\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
        "others = [m for m in sys.modules if m.startswith('rtmodel_cli.commands.') and m != 'rtmodel_cli.commands.advise']\n"
        "assert not others, others\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["recommendation"]


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


# ----------------------------------------------------------------------------- bad input: one line, exit 2

PROFILE = "tests/data/synthetic_profile_2x2.json"


def assert_refused(res, *fragments):
    """Exit 2, nothing on stdout, exactly one stderr line 'error: ...' holding every fragment."""
    assert res.exit_code == 2, res.output
    assert res.stdout == ""
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("error: ") and "Traceback" not in res.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]




def test_advise_accepts_the_edges_and_network_links_with_a_profile(monkeypatch, tmp_path):
    from calibration.synthetic import write_synthetic_profile

    monkeypatch.chdir(ROOT)
    assert run("advise", "--compute-cv", "0", "--format", "json").exit_code == 0  # no variance: meaningful
    assert run("advise", "--compute-cv", "1", "--mfu", "0.01", "--format", "json").exit_code == 0
    assert run("advise", "--gpus", "64", "--global-batch", "64", "--format", "json").exit_code == 0
    one_node = write_synthetic_profile(tmp_path / "one-node.json", nodes=1, ranks_per_node=2)
    res = run("advise", "--profile", str(one_node), "--gpus", "16", "--network", "tcp-25g", "--format", "json")
    assert res.exit_code == 0, res.output  # the link between nodes it could not measure comes from --network
    assert "tcp-25g" in json.loads(res.stdout)["provenance"]["inter.bandwidth_Bps"]


@pytest.mark.parametrize(
    "given, fragment",
    [
        (["--network", "tcp-25g"], "--network tcp-25g would not be used: the profile measured the link between nodes"),
        (["--intra", "pcie3"], "--intra pcie3 would not be used: the profile measured the link inside a node"),
        (["--nics-per-node", "4"], "--nics-per-node cannot be used with --profile"),
        (["--nccl-algo", "ring"], "--nccl-algo cannot be used with --profile"),
    ],
)
def test_a_profile_refuses_link_options_it_would_ignore(given, fragment, monkeypatch):
    """The 2x2 profile measured both links and how its collectives ran: a preset for them has no effect."""
    monkeypatch.chdir(ROOT)
    assert_refused(run("advise", "--profile", PROFILE, *given), fragment)


def test_advise_help_states_the_ranges_it_checks():
    from rtmodel_cli.commands.advise import advise as advise_command
    from runtime_model.core.constraints import COMPUTE_CV, MFU

    hints = typing.get_type_hints(advise_command, include_extras=True)
    assert "[0, 1]" in COMPUTE_CV.describe() and "[0.01, 1]" in MFU.describe()
    assert COMPUTE_CV.describe() in hints["compute_cv"].__metadata__[0].help
    assert MFU.describe() in hints["mfu"].__metadata__[0].help




def test_calibrate_refuses_more_than_max_gpus(monkeypatch):
    monkeypatch.chdir(ROOT)
    assert_refused(run("calibrate", PROFILE, "--gpus", "1000000000000"), "--gpus must be at most 16777216")




@pytest.mark.slow
def test_group_shape_keys_are_exact_beyond_max_gpus():
    """n = 2^21 used to overflow the int64 key that packs (size, nodes, q) with one base n + 1, and
    reported GroupShape(size=-2097148, ...). The keys must stay exact past the limit, so that
    MAX_GPUS is the only reason n is refused."""
    from runtime_model.core.defaults import MAX_GPUS
    from runtime_model.core.scenario import ClusterShape, GroupShape
    from runtime_model.topology.topology_builders import build_complete

    n, k = 2 * MAX_GPUS, 8
    shape = object.__new__(ClusterShape)  # bypass the MAX_GPUS check: this tests the arithmetic only
    object.__setattr__(shape, "gpus", n)
    object.__setattr__(shape, "gpus_per_node", k)
    seen = []
    costs = build_complete(shape).rounds[0].per_rank_cost(shape, lambda g: seen.append(g) or 1.0)
    assert seen == [GroupShape(size=n, nodes=n // k, nic_sharing=1)]
    assert costs.shape == (n,)


def _allreduce_comm_s(*args) -> float:
    res = run("advise", *args, "--format", "json")
    assert res.exit_code == 0, res.output
    return next(p["comm_s"] for p in json.loads(res.stdout)["predictions"] if p["topology"] == "allreduce")


def test_eight_rails_cut_allreduce_comm_at_least_fourfold():
    """An HGX H100 node has one 400G NIC per GPU: 8 rails carry All-Reduce's inter-node bytes in parallel,
    bounded by NVLink inside the node, so its communication falls well below one shared NIC's."""
    base = ("--gpus", "64", "--gpus-per-node", "8", "--gpu", "H100", "--network", "ib-400")
    eight = _allreduce_comm_s(*base, "--nics-per-node", "8")
    one = _allreduce_comm_s(*base, "--nics-per-node", "1")
    assert one >= 4 * eight


@pytest.mark.parametrize("cluster", ["dgx-a100", "dgx-h100"])
def test_dgx_clusters_are_named_presets_with_a_nic_per_gpu(cluster):
    res = run("advise", "--gpus", "64", "--cluster", cluster, "--format", "json")
    assert res.exit_code == 0, res.output
    inputs = json.loads(res.stdout)["inputs"]
    assert inputs["gpus_per_node"] == 8
    assert inputs["preset"]["nics_per_node"] == 8
    assert "8 NICs per node" in inputs["network"]["name"]


def test_verbose_shows_every_column_the_default_leaves_out():
    """--verbose differs from the default on presets too: the columns that do not fit the width follow
    in tables of their own (each led by the topology), and no 'not shown at this width' line is left."""
    from runtime_model.advice.columns import TABLE_COLUMNS

    plain = runner.invoke(app, ["advise", "--gpus", "64"], terminal_width=80).output
    verbose = runner.invoke(app, ["advise", "--gpus", "64", "--verbose"], terminal_width=80).output
    assert "not shown at this width" in plain and "not shown at this width" not in verbose
    for col in TABLE_COLUMNS:
        assert col.label in verbose, col.label
    assert all(len(line) <= 80 for line in verbose.splitlines())
