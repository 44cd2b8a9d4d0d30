"""The accuracy benchmark's bookkeeping without an emulated cluster: choosing clusters, the straggler
clusters' workload arguments, and merging some clusters' rows into recorded results."""

import pytest

from benchmarks import accuracy
from benchmarks.accuracy import ClusterConfig, Row


def _row(cluster: str, topology: str, err: float) -> Row:
    return Row(cluster, 2, 2, 1000, 0.5, 0.0, topology, 100.0, 100.0, err, 60.0, 60.0, -err, 1.67, 1.67,
               "ring", "ring", 0.05, True)


def test_straggler_clusters_slow_their_ranks_in_profile_and_validate():
    stragglers = accuracy.select("full", ["straggler"])
    assert len(stragglers) >= 2 and all("straggler" in c.name for c in stragglers)
    for cfg in stragglers:
        args = cfg.model_args()
        assert f"slow_ranks={cfg.slow_ranks}" in args and f"slowdown={cfg.slowdown:g}" in args
        assert cfg.straggler_args() == args[-4:] and len(cfg.topologies) >= 2
    assert {c.slow_ranks for c in stragglers} >= {"0", "0-1"}
    plain = ClusterConfig(2, 2, 1000, 0.5, ("ring",))
    assert plain.straggler_args() == [] and plain.name == "2x2-1000mbit-0.5ms"
    assert "straggler" not in "".join(c.name for c in accuracy.select("full", skip=["straggler"]))
    with pytest.raises(SystemExit, match="no cluster"):
        accuracy.select("full", ["nothing-like-this"])


def test_merge_replaces_rerun_clusters_in_place_and_appends_new_ones(tmp_path):
    old = [_row("a", "ring", 0.01), _row("b", "ring", 0.02), _row("b", "complete", 0.03), _row("c", "ring", 0.04)]
    new = [_row("b", "ring", 0.20), _row("d", "ring", 0.05)]
    merged = accuracy.merge_rows(old, new)
    assert [(r.cluster, r.topology) for r in merged] == [("a", "ring"), ("b", "ring"), ("c", "ring"), ("d", "ring")]
    assert merged[1].allreduce_error == 0.20

    accuracy.write_results(old, "full", tmp_path)
    assert accuracy.read_rows(tmp_path / "accuracy-full.csv") == old  # types and text survive a round trip
    runs = tmp_path / "kept"
    runs.mkdir()
    (runs / "b.profile.json").write_text("{}")
    (runs / "b.validations.jsonl").write_text("")
    summary = accuracy.merge_into(new, "full", tmp_path, runs)
    assert summary == accuracy.summarise(merged) and summary["clusters"] == 4
    assert accuracy.read_rows(tmp_path / "accuracy-full.csv") == merged
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["b.profile.json", "b.validations.jsonl"]
    assert "| b | ring |" in (tmp_path / "accuracy-full.md").read_text()


def test_merge_refuses_to_write_the_partial_results_over_the_merged_ones(tmp_path):
    with pytest.raises(SystemExit, match="--out-dir must differ"):
        accuracy.run("full", out_dir=tmp_path, only=["straggler"], merge_dir=tmp_path)
