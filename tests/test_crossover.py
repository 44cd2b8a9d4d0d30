"""Where the verdict flips (runtime_model.advice.crossover): the pick ties All-Reduce at the crossover it
reports, it wins on the side it says, a pick that wins over the whole range has no crossover, and
advise (table, JSON, CSV) and `rtmodel plot crossover` show them."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import replace

import pytest
from typer.testing import CliRunner

from rtmodel_cli.app import app
from runtime_model.advice.advisor import advise
from runtime_model.advice.crossover import (
    BANDWIDTH,
    COMPUTE,
    CV,
    bandwidth_speedups,
    crossover_sentence,
    crossovers,
    inter_scaled,
)
from runtime_model.core.scenario import AffineCost
from tests.helpers import scenario

runner = CliRunner()


def _overhead_scenario(gossip_overhead: float):
    """16 GPUs = 4 nodes x 4 whose Decent-DP compute costs `gossip_overhead` x DDP's: gossip pays
    where communication is dear (a slow network, little compute) and loses where it is cheap."""
    sc = scenario(n=16, k=4, sd=0.0)
    return replace(sc, gossip_compute=sc.compute.scaled(gossip_overhead))


def _speedup_at(sc, c) -> float:
    """The topology's speedup over All-Reduce with c's quantity set to c.at (the others as they are)."""
    from runtime_model.advice.crossover import _bandwidth_search, _compute_search, _cv_search

    search = {BANDWIDTH: _bandwidth_search, COMPUTE: _compute_search, CV: _cv_search}[c.quantity](sc)
    picked = advise(search.at(c.at), topologies=[c.topology])
    return picked.allreduce.mean_s / picked.rows[0].prediction.mean_s


@pytest.mark.parametrize("overhead", [1.2, 1.3])
def test_the_pick_ties_all_reduce_at_each_crossover_it_reports(overhead):
    sc = _overhead_scenario(overhead)
    found = {c.quantity: c for c in crossovers(advise(sc, topologies=["alternating-exp-ring"]))}
    assert found[BANDWIDTH].at is not None and found[COMPUTE].at is not None
    for c in (found[BANDWIDTH], found[COMPUTE]):
        assert _speedup_at(sc, c) == pytest.approx(1.0, abs=0.01)
        assert c.wins_where == "below"  # gossip pays on a slower network and with less compute
        assert c.low < c.at < c.high


def test_the_side_it_wins_on_is_where_the_speedup_exceeds_one():
    sc = _overhead_scenario(1.2)
    c = next(
        c for c in crossovers(advise(sc, topologies=["alternating-exp-ring"])) if c.quantity == BANDWIDTH
    )
    below, above = bandwidth_speedups(sc, c.topology, [c.at / 2, c.at * 2])
    assert below > 1.0 > above


def test_with_all_reduce_kept_the_crossover_is_the_best_gossip_options():
    adv = advise(_overhead_scenario(1.3), topologies=["alternating-exp-ring"])
    assert adv.recommendation.topology == "allreduce"
    assert {c.topology for c in crossovers(adv)} == {"alternating-exp-ring"}


def test_with_all_reduce_kept_a_hopeless_consensus_is_not_the_option_named():
    """The fastest runnable gossip row is passed over when its consensus is hopeless at this n: the network's
    doubt must not make a verdict name, as the option to try, one that cannot reach All-Reduce's loss."""
    from runtime_model.advice.crossover import crossover_topology
    from runtime_model.convergence.consensus_cost import HOPELESS

    adv = advise(_overhead_scenario(1.3), topologies=["alternating-exp-ring", "ring"])
    assert adv.recommendation.topology == "allreduce"
    fastest = min((r for r in adv.rows if r.applicable), key=lambda r: r.prediction.mean_s)
    other = next(r for r in adv.rows if r.applicable and r.topology != fastest.topology)
    hopeless = replace(fastest, convergence=replace(fastest.convergence, kind=HOPELESS))
    rows = [hopeless if r.topology == fastest.topology else r for r in adv.rows]
    assert crossover_topology(replace(adv, rows=rows)) == other.topology
    every = [
        replace(r, convergence=replace(r.convergence, kind=HOPELESS)) if r.convergence else r for r in rows
    ]
    assert crossover_topology(replace(adv, rows=every)) is None


def test_a_pick_that_wins_over_the_whole_range_has_no_crossover_and_says_so():
    """Decent-DP's complete graph all-reduces what DDP does, hidden behind the whole next iteration: it
    is never slower (helper scenario, no gossip overhead)."""
    adv = advise(scenario(n=16, k=4, sd=0.001), topologies=["complete"])
    found = crossovers(adv)
    assert [c.quantity for c in found] == [BANDWIDTH, COMPUTE, CV]
    assert all(c.at is None and c.wins_where == "everywhere" for c in found)
    assert min(bandwidth_speedups(adv.scenario, "complete", [found[0].low, found[0].high])) > 1.0
    line = crossover_sentence(found)
    assert line.startswith("Where it flips: complete beats All-Reduce at every inter-node bandwidth from")
    assert "(now 8)" in line and "compute cv from 0.00 to 1.00" in line


def test_the_bandwidth_moves_measured_multi_node_fits_with_the_nic():
    net = scenario().network
    net = replace(net, group_costs={"p2-s2-q1": AffineCost(1e-4, 1e-9), "p2-s1-q1": AffineCost(1e-5, 1e-10)})
    fast = inter_scaled(net, 4.0)
    assert fast.inter.bandwidth_Bps == 4 * net.inter.bandwidth_Bps
    assert fast.group_costs["p2-s2-q1"].per_byte_s == pytest.approx(0.25e-9)
    assert fast.group_costs["p2-s2-q1"].fixed_s == 1e-4
    assert fast.group_costs["p2-s1-q1"] == net.group_costs["p2-s1-q1"]  # inside a node: untouched


def test_advise_states_the_crossovers_in_the_table_json_and_csv():
    args = ["advise", "--gpus", "16", "--gpus-per-node", "4", "--topology", "alternating-exp-ring"]
    table = runner.invoke(app, args)
    assert table.exit_code == 0, table.output
    assert "Where it flips: " in " ".join(table.output.split())
    doc = json.loads(runner.invoke(app, [*args, "--format", "json"]).stdout)
    assert [c["quantity"] for c in doc["crossover"]] == [BANDWIDTH, COMPUTE, CV]
    pick = doc["crossover"][0]["topology"]
    entry = next(e for e in doc["predictions"] if e["topology"] == pick)
    assert set(entry["crossover"]) == {BANDWIDTH, COMPUTE, CV}
    assert doc["crossover"][0]["unit"] == "Gbit/s per NIC"
    rows = list(csv.DictReader(io.StringIO(runner.invoke(app, [*args, "--format", "csv"]).stdout)))
    assert "crossover_inter_bandwidth_gbit_s" in rows[0]
    for row in rows:
        if row["topology"] != pick:
            assert row["crossover_compute_ms"] == ""


def test_plot_crossover_draws_a_figure(tmp_path):
    out = tmp_path / "flip.png"
    res = runner.invoke(app, ["plot", "crossover", "--gpus", "16", "--gpus-per-node", "4", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert out.stat().st_size > 10_000 and out.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--gpus", "0"], "--gpus"),
        (["--gpus", "abc"], "--gpus"),
        (["--out", "flip.txt"], "--out"),
        (["--batch-per-gpu", "0"], "--batch-per-gpu"),
    ],
)
def test_plot_crossover_refuses_bad_input_in_one_line(tmp_path, args, says):
    base = {"--out": str(tmp_path / "flip.png"), "--gpus": "16"}
    given = dict(zip(args[::2], args[1::2], strict=True))
    argv = ["plot", "crossover", *[x for k, v in {**base, **given}.items() for x in (k, v)]]
    res = runner.invoke(app, argv)
    assert res.exit_code == 2, res.output
    assert says in res.output and "Traceback" not in res.output


def test_a_preset_network_near_its_crossover_is_named_as_what_to_measure():
    """The bandwidth crossover (17.6 Gbit/s) lies within 4x of the preset's 8: published clusters miss
    their presets by that much, so the verdict is too close to call (a win the margin alone would let
    stand) and says it depends on the network and how to measure it."""
    from runtime_model.advice.crossover import settle_line, with_crossovers

    plain = advise(_overhead_scenario(1.2), topologies=["alternating-exp-ring"])
    assert plain.recommendation.topology == "alternating-exp-ring"
    adv = with_crossovers(plain)
    rec = adv.recommendation
    assert rec.too_close_to_call and rec.on_network and rec.candidate == "alternating-exp-ring"
    assert "flips at 17.6 Gbit/s per NIC" in rec.verdict
    line = settle_line(adv)
    assert line.startswith("It depends on the network: it flips at 17.6 Gbit/s per NIC")
    assert "--nccl-tests" in line


def test_a_measured_network_is_not_second_guessed():
    from runtime_model.advice.crossover import settle_line, with_crossovers

    sc = _overhead_scenario(1.2)
    sc = replace(
        sc, network=replace(sc.network, inter=replace(sc.network.inter, source="nccl-tests run.txt"))
    )
    assert settle_line(with_crossovers(advise(sc, topologies=["alternating-exp-ring"]))) == ""


def test_a_too_close_verdict_names_the_nearest_crossovers_measurement():
    """Compute flips at 52.5 ms from 32 (1.6x), the network at 17.6 from 8 Gbit/s (2.2x): measure the step."""
    from runtime_model.advice.crossover import settle_line, with_crossovers

    adv = with_crossovers(advise(_overhead_scenario(1.2), margin=0.5, topologies=["alternating-exp-ring"]))
    assert adv.recommendation.too_close_to_call
    assert settle_line(adv) == "What would settle it: " + (
        "your own step time: --compute-ms from your training logs, or rtmodel profile on one node."
    )


def test_a_too_close_verdict_with_nothing_in_range_asks_for_a_validation_run():
    from runtime_model.advice.crossover import settle_line, with_crossovers

    adv = with_crossovers(advise(scenario(n=16, k=4, sd=0.001), margin=0.9, topologies=["complete"]))
    assert adv.recommendation.too_close_to_call
    assert settle_line(adv).endswith("rtmodel validate --recommended.")


def test_a_search_reads_the_very_means_the_full_predictions_give():
    """run_means (the searches' mean-only finish) equals each full prediction's mean_s, bit for bit,
    for full per-rank schedules, reduced systems and complete's own job."""
    from runtime_model.prediction.iteration import allreduce_prediction
    from runtime_model.prediction.pending import run_means, run_pending
    from runtime_model.prediction.reduced_system import topology_model
    from runtime_model.topology.symmetry import FULL_MAX_N

    for n, k, sd in (
        (16, 4, 0.05),
        (64, 4, 0.0),
        (64, 8, 0.05),
        (4 * FULL_MAX_N, 8, 0.05),
        (4 * FULL_MAX_N, 8, 0.0),
    ):
        sc = scenario(n=n, k=k, sd=sd)
        ar = allreduce_prediction(sc)
        for name in ("ring", "one-peer-exp", "alternating-exp-ring", "complete", "static-exp"):
            pending = [topology_model(name, sc.shape).pending(sc, ar)]
            assert run_means(pending) == [p.mean_s for p in run_pending(pending)]
