"""Where the verdict flips (runtime_model.advice.crossover): the pick ties All-Reduce at the crossover it
reports, it wins on the side it says, a pick that wins over the whole range has no crossover, and
advise (table, JSON, CSV) and `rtmodel plot crossover` show them."""

from __future__ import annotations

import csv
import functools
import io
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from rtmodel_cli.app import app
from runtime_model.advice.advisor import advise
from runtime_model.advice.crossover import (
    BANDWIDTH,
    COMPUTE,
    CV,
    SPAN,
    bandwidth_speedups,
    crossover_sentence,
    crossovers,
    inter_scaled,
)
from runtime_model.advice.run_lines import validate_line
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
    """With All-Reduce kept outright (no candidate), the best gossip row is passed over when its consensus
    is hopeless at this n: the network's doubt must not make a verdict name, as the option to try, one
    that cannot reach All-Reduce's loss."""
    from runtime_model.advice.crossover import crossover_topology
    from runtime_model.convergence.consensus_cost import HOPELESS

    adv = advise(_overhead_scenario(1.3), topologies=["alternating-exp-ring", "ring"])
    assert adv.recommendation.topology == "allreduce"
    kept = replace(adv.recommendation, too_close_to_call=False, candidate=None)
    adv = replace(adv, recommendation=kept)
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
    args = ["advise", "--gpus", "16", "--gpus-per-node", "4", "--topologies", "alternating-exp-ring"]
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


def test_with_nothing_decentralized_that_fits_the_plot_says_why_instead_of_a_curve(tmp_path):
    """7e9 parameters on 40 GB A100s: every gossip row needs a full replica; the figure draws the bands,
    and says why there is no curve, on the figure and in one line, as advise's verdict does."""
    from matplotlib.text import Text

    from rtmodel_inputs import advise as advise_from_options
    from rtmodel_plots.crossover_plot import crossover_curve

    args = ["--gpus", "64", "--params", "7e9", "--compute-ms", "2000"]
    out, data = tmp_path / "none.png", tmp_path / "none.csv"
    res = runner.invoke(app, ["plot", "crossover", *args, "--out", str(out), "--data", str(data)])
    assert res.exit_code == 0, res.output
    assert "note: no curve drawn: no decentralized option fits in GPU memory" in res.output
    assert "needs 131 GiB of 40 before activations" in res.output
    assert "curve" not in {row["kind"] for row in csv.DictReader(io.StringIO(data.read_text()))}
    answer = advise_from_options(gpus=64, params=7e9, compute_ms=2000)
    texts = [t.get_text() for t in crossover_curve(answer, "preset").axes[0].findobj(Text)]
    assert any(t.startswith("no curve: no decentralized option fits") for t in texts)


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
    """The bandwidth crossover lies within 4x of the preset's 8 Gbit/s: published clusters miss their
    presets by that much, so the verdict is too close to call (a win the margin alone would let stand)
    and says it depends on the network, where it flips, and how to measure it."""
    from runtime_model.advice.crossover import (
        PRESET_NETWORK_SPREAD,
        network_crossover,
        settle_line,
        with_crossovers,
    )

    plain = advise(_overhead_scenario(1.2), topologies=["alternating-exp-ring"])
    assert plain.recommendation.topology == "alternating-exp-ring"
    adv = with_crossovers(plain)
    rec = adv.recommendation
    assert rec.too_close_to_call and rec.on_network and rec.candidate == "alternating-exp-ring"
    near = network_crossover(adv)
    assert near is not None and near.at is not None and near.at < 1000
    assert 1 / PRESET_NETWORK_SPREAD <= near.at / near.current <= PRESET_NETWORK_SPREAD
    flips = f"flips at {near.at:,.3g}{near.unit}"  # the crossover the search found, as the verdict rounds it
    assert flips in rec.verdict
    line = settle_line(adv)
    assert line.startswith(f"It depends on the network: it {flips}")
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
    assert settle_line(adv).endswith(f"{validate_line()}.")


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


# ---------------------------------------------------------------- a measured network moved with its NIC (issue 64 A)

SIZES = [(1 << 20) << i for i in range(11)]  # 1 MiB .. 1 GiB, as all_reduce_perf -b 1M -e 1G -f 2
# (preset request, the nccl-tests run's ranks and hosts): one GPU per node, whose gossip pairs are the run's
# own shape (p2-s2-q1), and a DGX pair of nodes, whose run covers All-Reduce's shape instead
MEASURED_SHAPES = {
    "T4 x 16 nodes, 2x1 run": (dict(gpus=16, gpus_per_node=1, gpu="T4", ddp_bucket_view=True), 2, 2),
    "dgx-h100 x 2 nodes, 2x8 run": (dict(gpus=16, cluster="dgx-h100"), 16, 2),
}


def _measured(shape: str, fixed_us: float, gbyte_s: float, scale: float = 1.0):
    """The preset scenario with the inter-node link of an nccl-tests run whose times are `fixed_us` + S at
    `gbyte_s`, all multiplied by `scale` (a network 1/scale as fast), as --nccl-tests reads it."""
    import tempfile
    from pathlib import Path

    from rtmodel_inputs.nccl_tests import with_nccl_tests
    from runtime_model.presets import to_model as presets
    from tests.nccl_tests_text import nccl_tests_output

    request, ranks, hosts = MEASURED_SHAPES[shape]
    times = {s: scale * (fixed_us + s / (gbyte_s * 1e3)) for s in SIZES}
    sc = presets.scenario_from_choice(presets.resolve(presets.PresetRequest(**request)))
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "all_reduce.txt"
        log.write_text(nccl_tests_output(times, ranks, hosts))
        return with_nccl_tests(sc, log)[0]


def _means(adv) -> dict[str, float]:
    """Every row's mean iteration time, All-Reduce's included."""
    means = {r.topology: r.prediction.mean_s for r in adv.rows if r.prediction is not None}
    return {"allreduce": adv.allreduce.mean_s, **means}


measured_networks = st.tuples(
    st.sampled_from(sorted(MEASURED_SHAPES)),
    st.floats(5.0, 200.0),  # the run's fixed part, us
    st.floats(2.0, 50.0),  # its bandwidth, GB/s
)


@settings(max_examples=4, deadline=None)
@given(measured_networks)
def test_every_rows_time_falls_as_a_measured_network_speeds_up(net):
    """The what-if moves every measured cost with the NIC (Network.scaled): no row is slower on a faster
    network, All-Reduce's included, across the crossover search's whole range."""
    from runtime_model.advice.advisor import advise_many

    sc = _measured(*net)
    factors = np.geomspace(1 / SPAN, SPAN, 7)
    advices = advise_many([replace(sc, network=sc.network.scaled(f)) for f in factors])
    for name in _means(advices[0]):
        times = np.array([_means(a)[name] for a in advices])
        assert np.all(np.diff(times) <= 1e-9 * times[:-1]), (name, times)


@settings(max_examples=4, deadline=None)
@given(measured_networks)
def test_the_sweep_at_the_current_bandwidth_is_the_advice_itself(net):
    """Factor 1 of a sweep is the network advise answered on: every row's speedup there within 0.5 % of the
    advice's (the crossover's 'now' and the plot's point at this cluster)."""
    sc = _measured(*net)
    adv = advise(sc)
    rows = [r for r in adv.rows if r.prediction is not None]
    current = sc.network.inter.bandwidth_Bps * 8 / 1e9
    for r in rows:
        (swept,) = bandwidth_speedups(sc, r.topology, [current])
        assert swept == pytest.approx(r.speedup, rel=5e-3), r.topology
    again = _means(advise(replace(sc, network=sc.network.scaled(1.0))))
    assert again == pytest.approx(_means(adv), rel=5e-3)


@pytest.mark.parametrize("shape", sorted(MEASURED_SHAPES))
@pytest.mark.parametrize("factor", [1 / 16, 4.0])
def test_a_scaled_measured_network_answers_as_a_run_that_slow(shape, factor):
    """A network `factor` times as fast (its latency 1/factor too) predicts what advise predicts on an
    nccl-tests run whose every time is 1/factor as long: the measured table moves with the link, so the
    gossip pairs a 2x1 run covers slow down with All-Reduce (they stayed put: 65x at 1/240, issue 64)."""
    sc = _measured(shape, 60.0, 12.0)
    moved = _means(advise(replace(sc, network=sc.network.scaled(factor, 1 / factor))))
    assert moved == pytest.approx(_means(advise(_measured(shape, 60.0, 12.0, 1 / factor))), rel=0.01)


@pytest.mark.parametrize("factor", [1 / 240, 1 / 16, 4.0])
def test_the_bandwidth_sweep_answers_as_a_run_that_slow(factor):
    """The crossover's own sweep (bandwidth alone) on a run whose fixed part is small: within a few % of
    advise on the run with its times 1/factor as long, the one-GPU-per-node case of issue 64 included."""
    shape = "T4 x 16 nodes, 2x1 run"
    sc = _measured(shape, 5.0, 12.0)
    slow = advise(_measured(shape, 5.0, 12.0, 1 / factor))
    current = sc.network.inter.bandwidth_Bps * 8 / 1e9
    for r in (r for r in slow.rows if r.prediction is not None):
        (swept,) = bandwidth_speedups(sc, r.topology, [current * factor])
        assert swept == pytest.approx(r.speedup, rel=0.03), r.topology


def test_a_scaled_network_moves_its_measured_table_and_keeps_what_stays_inside_a_node():
    from runtime_model.core.scenario import TabulatedCost

    net = scenario().network
    table = TabulatedCost(1e-4, 1e-9, "nccl-tests", sizes=(1e6, 2e6), times_s=(1.1e-3, 2.1e-3))
    inside = AffineCost(1e-5, 1e-10)
    net = replace(net, group_costs={"p2-s2-q1": table, "p4-s1-q1": inside})
    fast = net.scaled(inter_bandwidth=4.0, inter_latency=0.5)
    moved = fast.group_costs["p2-s2-q1"]
    assert moved.time_s(1e6) == pytest.approx(0.5e-4 + 1e-3 / 4)  # the fixed part x 0.5, the rest / 4
    assert moved.time_s(4e6) == pytest.approx(moved.time_s(2e6) + 2e6 * 0.25e-9)  # the line beyond, too
    assert fast.group_costs["p4-s1-q1"] == inside
    assert fast.inter.flow_cap_Bps == net.inter.flow_cap_Bps * 4  # inf stays inf; a cap moves with the NIC
    assert net.scaled() == net


# ---------------------------------------------------------------- never ask for what was given (issue 64 B)

DATA = Path(__file__).resolve().parent / "data"
# How a user gives each measurement, as advise's options, and which of the settle line's asks it answers
# (the line that asks for it must then never be printed)
SOURCES = {
    "nccl-tests": (["--nccl-tests", "{log}"], {BANDWIDTH}),
    "step-ms": (["--step-ms", "300"], {COMPUTE}),
    "compute-ms": (["--compute-ms", "100"], {COMPUTE}),
    "profile": (["--profile", str(DATA / "synthetic_profile_2x2.json")], {BANDWIDTH, COMPUTE, CV}),
    "trace": (["--trace", str(DATA / "traces" / "hta-a100x2-rank0.json.gz")], {COMPUTE, CV}),
}
# the combinations advise takes: presets with a run and/or your step; a profile (your compute over it);
# a trace (with a run)
COMBINATIONS = [
    (),
    ("nccl-tests",),
    ("step-ms",),
    ("compute-ms",),
    ("nccl-tests", "step-ms"),
    ("nccl-tests", "compute-ms"),
    ("profile",),
    ("profile", "compute-ms"),
    ("trace",),
    ("trace", "nccl-tests"),
]


@functools.cache
def _advise_doc(sources: tuple[str, ...]) -> dict:
    """advise's JSON for these sources (16 GPUs, 2 per node where a trace's shape rules, else 4)."""
    import tempfile

    from tests.cli_helpers import advise_json
    from tests.nccl_tests_text import nccl_tests_output

    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "all_reduce.txt"
        log.write_text(nccl_tests_output({s: 80.0 + s / 20e3 for s in SIZES}, 16, 2))
        args = ["--gpus", "16", "--gpus-per-node", "2" if "trace" in sources else "4"]
        for name in sources:
            args += [a.format(log=log) for a in SOURCES[name][0]]
        return advise_json(*args)


def _given(sources: tuple[str, ...]) -> set[str]:
    return set().union(*(SOURCES[name][1] for name in sources))


def _too_close_with(nearest: str, provenance: dict[str, str], on_network: bool):
    """A too-close verdict (margin 0.9) whose crossovers put `nearest` nearest the current value, the
    others far, its provenance `provenance`; `on_network`: made too close by a preset network's doubt."""
    from runtime_model.advice.crossover import Crossover

    adv = advise(scenario(n=16, k=4, sd=0.001), margin=0.9, topologies=["complete"])
    assert adv.recommendation.too_close_to_call
    rec = replace(adv.recommendation, on_network=on_network)
    ranges = {BANDWIDTH: (8.0, 1 / 64, 64.0), COMPUTE: (30.0, 1 / 64, 64.0), CV: (0.1, 0.0, 1.0)}
    found = []
    for q, (now, low, high) in ranges.items():
        at = (now * 1.5 if q != CV else now + 0.05) if q == nearest else (now * 30 if q != CV else 0.9)
        found.append(Crossover(q, "complete", now, at, "below", now * low if q != CV else low, high))
    return replace(adv, recommendation=rec, provenance=provenance, crossovers=found)


@settings(max_examples=12, deadline=None)
@given(st.sampled_from(COMBINATIONS), st.sampled_from([BANDWIDTH, COMPUTE, CV]), st.booleans())
@pytest.mark.slow
def test_the_settle_line_never_asks_for_a_measurement_given(sources, nearest, on_network):
    """Whatever was given (an nccl-tests run, your step or compute, a profile, a trace), the line under a
    too-close verdict never asks for it again; where what would flip it was measured, it names the next
    step, a validation run."""
    from runtime_model.advice.crossover import MEASUREMENTS, settle_line

    line = settle_line(_too_close_with(nearest, _advise_doc(sources)["provenance"], on_network))
    assert line
    for q in _given(sources):
        assert MEASUREMENTS[q] not in line, (sources, line)
    if nearest in _given(sources):
        assert line.endswith(MEASUREMENTS["validation"])


@pytest.mark.parametrize("sources", COMBINATIONS, ids=lambda s: "+".join(s) or "presets")
def test_advise_itself_never_asks_for_a_measurement_given(sources):
    """The answer advise prints for each combination of sources (its JSON's settle, the table's line)."""
    from runtime_model.advice.crossover import MEASUREMENTS

    settle = _advise_doc(sources).get("settle") or ""
    assert not any(MEASUREMENTS[q] in settle for q in _given(sources)), settle
