"""--straggler, --rank-cv, --node-cv and `rtmodel plot variance`: bad values are one line naming the flag,
a straggler slows every topology (no schedule escapes it), i.i.d. jitter favours gossip, and the figure
gets written."""

from pathlib import Path

import pytest

from tests.cli_helpers import advise_json, run

ROOT = Path(__file__).parent.parent
PROFILE = ROOT / "tests" / "data" / "synthetic_profile_2x2.json"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
SHAPE = ["--gpus", "32", "--gpus-per-node", "4", "--network", "ib-100"]


def assert_one_line(res, flag: str) -> str:
    assert res.exit_code == 2, (res.exit_code, res.output)
    assert "Traceback" not in res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("error:") and flag in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize(
    "args, flag, fragment",
    [
        (["--straggler", "0.5"], "--straggler", "slower than the rest"),
        (["--straggler", "2:0"], "--straggler", "COUNT"),
        (["--gpus", "64", "--straggler", "2:65"], "--straggler", "at most the number of GPUs (64)"),
        (["--straggler", "abc"], "--straggler", "FACTOR[:COUNT]"),
        (["--straggler", "nan"], "--straggler", "[1, 100]"),
        (["--straggler", "1.5:x"], "--straggler", "FACTOR[:COUNT]"),
        (["--rank-cv", "-0.1"], "--rank-cv", "[0, 1]"),
        (["--node-cv", "nan"], "--node-cv", "[0, 1]"),
        (["--profile", PROFILE, "--straggler", "2"], "--straggler", "--profile"),
        (["--profile", PROFILE, "--rank-cv", "0.1"], "--rank-cv", "--profile"),
    ],
)
def test_advise_refuses_bad_variation_with_one_line_naming_the_flag(args, flag, fragment):
    assert fragment in assert_one_line(run("advise", *args), flag)


def _means(doc: dict) -> dict[str, dict]:
    """All-Reduce and every applicable topology Decent-DP runs: name -> prediction."""
    return {
        p["topology"]: p
        for p in doc["predictions"]
        if p["topology"] == "allreduce" or (p["applicable"] and p["runs_on_decent_dp"])
    }


def test_a_straggler_slows_every_topology_no_schedule_escapes_it():
    # DDP as tuned in both: where tuning it changes only one verdict, that answer's All-Reduce row is the
    # tuned DDP's (tuned_ddp.led_by_tuning), and the two rows would not be the same DDP
    plain = _means(advise_json(*SHAPE, "--compute-cv", "0", "--ddp-bucket-view"))
    slow = _means(advise_json(*SHAPE, "--compute-cv", "0", "--straggler", "2.0", "--ddp-bucket-view"))
    assert plain.keys() == slow.keys() and len(slow) >= 4
    for name, p in slow.items():
        compute_part = plain[name][
            "compute_wait_s"
        ]  # without the straggler, without jitter: the mean compute
        assert p["compute_wait_s"] >= 1.9 * compute_part, name
        assert p["iteration_s"]["mean"] >= 1.9 * compute_part, name  # every rank at the slowest's pace


def test_iid_jitter_favours_gossip():
    def best(doc):
        return max(p["speedup_vs_allreduce"] for t, p in _means(doc).items() if t != "allreduce")

    assert best(advise_json(*SHAPE, "--compute-cv", "0.3")) > best(advise_json(*SHAPE, "--compute-cv", "0"))


def test_the_table_says_where_the_stragglers_sit():
    res = run("advise", *SHAPE, "--straggler", "2:4", "--node-cv", "0.1", env={"COLUMNS": "300"})
    assert res.exit_code == 0, res.output
    line = next(x for x in res.stdout.splitlines() if x.startswith("compute per worker"))
    assert "ranks 0-3 2x slower, node cv 0.1" in line
    plain = run("advise", *SHAPE, env={"COLUMNS": "300"}).stdout
    assert "slower" not in plain and "node cv" not in plain


def test_a_scenario_file_takes_the_straggler_as_text_or_number(tmp_path):
    (tmp_path / "text.toml").write_text('straggler = "2:4"\nrank_cv = 0.05\nnode_cv = 0.1\n')
    (tmp_path / "number.json").write_text('{"straggler": 2}')
    (tmp_path / "bad.toml").write_text('straggler = "0.5"\n')
    flags = advise_json(*SHAPE, "--straggler", "2:4", "--rank-cv", "0.05", "--node-cv", "0.1")
    assert advise_json(*SHAPE, "--scenario", tmp_path / "text.toml")["predictions"] == flags["predictions"]
    one = advise_json(*SHAPE, "--straggler", "2")["predictions"]
    assert advise_json(*SHAPE, "--scenario", tmp_path / "number.json")["predictions"] == one
    line = assert_one_line(run("advise", "--scenario", tmp_path / "bad.toml"), "'straggler'")
    assert "--scenario" in line


@pytest.mark.slow
def test_plot_variance_writes_a_png_and_refuses_a_directory(tmp_path):
    out = tmp_path / "x.png"
    res = run("plot", "variance", "--out", out)
    assert res.exit_code == 0, res.output
    assert out.read_bytes().startswith(PNG_MAGIC)
    (tmp_path / "d.png").mkdir()
    assert "directory" in assert_one_line(run("plot", "variance", "--out", tmp_path / "d.png"), "--out")
    assert_one_line(
        run("plot", "variance", "--out", tmp_path / "y.png", "--straggler-max", "1"), "--straggler-max"
    )
    assert_one_line(run("plot", "variance", "--out", tmp_path / "y.png", "--cv-max", "-1"), "--cv-max")
    assert not (tmp_path / "y.png").exists()


def test_variance_sweeps_vary_one_thing_of_the_scenario():
    import rtmodel_plots as plots
    from runtime_model.advice.advisor import advise

    sc = plots.preset_scenario(16, network="ib-100", gpus_per_node=4, compute_cv=0.0)
    by_factor, by_cv = plots.variance_sweeps(sc, [1.0, 2.0], [0.0, 0.3], topologies=["ring"])
    assert list(by_factor["factor"]) == [1.0, 2.0] and list(by_cv["cv"]) == [0.0, 0.3]
    base = advise(sc, topologies=["ring"])
    assert by_factor["allreduce_ms"].iloc[0] == pytest.approx(base.allreduce.mean_s * 1e3)
    assert by_factor["allreduce_ms"].iloc[1] > 1.5 * by_factor["allreduce_ms"].iloc[0]
    assert by_cv["speedup"].iloc[1] > by_cv["speedup"].iloc[0]  # gossip escapes part of i.i.d. jitter
