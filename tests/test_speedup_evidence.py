"""The advisor's stated margin per source class is the measured error of the published speedups the
project keeps in that class, and every one of them lies inside the interval the advisor states."""

from dataclasses import replace

import pytest

from rtmodel_literature.speedup_evidence import all_checks, class_errors
from runtime_model.advice.advisor import advise
from runtime_model.advice.confidence import (
    ETHERNET_PRESET,
    IB_PRESET,
    MIN_OWN_CHECKS,
    NCCL_TESTS,
    NCCL_TESTS_STEP,
    ONE_NODE_PRESET,
    PRESETS,
    class_margin,
    source_class,
    speedup_evidence,
    speedup_interval,
)
from runtime_model.advice.crossover import network_crossover, settle_line, with_crossovers
from runtime_model.core.scenario import Link
from runtime_model.presets import to_model as presets


@pytest.fixture(scope="module")
def checks():
    return all_checks()


def _scenario(gpus: int, **kw):
    return presets.scenario_from_choice(presets.resolve(presets.PresetRequest(gpus, **kw)))


def test_the_kept_figures_are_the_checks(checks):
    """preset_data/accuracy.toml's [speedups.*] recomputed from the published comparisons."""
    kept = speedup_evidence()
    measured = class_errors(checks)
    # the nccl-tests classes: the emulated clusters' (test_held_out.py)
    assert set(kept) == set(measured) | {NCCL_TESTS, NCCL_TESTS_STEP}
    for cls, m in measured.items():
        assert kept[cls].speedups == m.speedups, cls
        assert kept[cls].mean_abs_error == pytest.approx(m.mean_abs_error, abs=5e-4), cls
        assert kept[cls].max_abs_error == pytest.approx(m.max_abs_error, abs=5e-4), cls


def test_every_published_speedup_lies_in_the_interval_its_class_states(checks):
    for c in checks:
        low, high = speedup_interval(c.predicted_x, class_margin(c.source_class).interval)
        assert low <= c.published_x * (1 + 1e-3) and c.published_x <= high * (1 + 1e-3), c


def test_the_interval_is_the_error_as_measured():
    """An error e = predicted / published - 1 in [-m, m] puts the published speedup in s/(1+m)..s/(1-m)."""
    low, high = speedup_interval(2.0, 0.25)
    assert low == pytest.approx(2.0 / 1.25) and high == pytest.approx(2.0 / 0.75)
    assert speedup_interval(2.0, 1.0)[1] == float("inf")


def test_a_class_with_few_checks_of_its_own_borrows_the_pooled_figure():
    kept = speedup_evidence()
    assert kept[ETHERNET_PRESET].speedups < MIN_OWN_CHECKS <= kept[IB_PRESET].speedups
    pooled = class_margin(ETHERNET_PRESET)
    assert pooled.interval == kept[PRESETS].max_abs_error
    assert "fewer than" in pooled.why and "Ethernet" in pooled.why
    own = class_margin(IB_PRESET)
    assert own.interval == kept[IB_PRESET].interval >= kept[IB_PRESET].max_abs_error
    assert own.equivalence == kept[IB_PRESET].mean_abs_error
    assert "none" in class_margin(ONE_NODE_PRESET).why
    nccl = class_margin(NCCL_TESTS)  # evidence of its own, from the emulated clusters
    assert nccl.interval == kept[NCCL_TESTS].interval and "nccl-tests-network speedups" in nccl.why


def test_the_source_class_of_a_scenario():
    assert source_class(_scenario(32, cluster="a100-ib100")) == IB_PRESET
    assert source_class(_scenario(32, network="tcp-25g")) == ETHERNET_PRESET
    assert source_class(_scenario(32, network="roce-200g")) == ETHERNET_PRESET
    assert source_class(_scenario(8, gpus_per_node=8)) == ONE_NODE_PRESET
    sc = _scenario(32)
    measured = replace(sc.network, inter=replace(sc.network.inter, source="nccl-tests all_reduce_perf"))
    assert source_class(replace(sc, network=measured)) == NCCL_TESTS
    custom = replace(sc.network, inter=Link(1e-5, 1e9, source="preset ib-like"))  # no fabric declared
    assert source_class(replace(sc, network=custom)) == PRESETS
    declared = replace(sc.network, inter=Link(1e-5, 1e9, source="preset efa-100", fabric="infiniband"))
    assert source_class(replace(sc, network=declared)) == IB_PRESET  # the fabric decides, not the name


def test_a_verdict_a_preset_network_could_flip_is_too_close_to_call():
    """With a DGX A100 cluster's bandwidth moved to twice the crossover (ring wins above ~24 Gbit/s per
    NIC), a small margin leaves the win standing, but it hangs on the preset network: the verdict keeps
    All-Reduce, names the candidate and the measurement that settles it. At the preset's own bandwidth
    (7x the crossover) the network does not decide it."""
    sc = _scenario(64, cluster="dgx-a100")
    at_preset = with_crossovers(advise(sc, margin=0.02, topologies=["ring"]))
    bw = next(c for c in at_preset.crossovers if c.quantity == "inter_bandwidth_gbit_s")
    assert bw.wins_where == "above" and bw.current / bw.at > 4
    assert network_crossover(at_preset) is None and not at_preset.recommendation.too_close_to_call
    doubtful = replace(sc, network=sc.network.scaled(inter_bandwidth=2 * bw.at / bw.current))
    plain = advise(doubtful, margin=0.02, topologies=["ring"])
    assert plain.recommendation.topology != "allreduce"  # confident before the network is doubted
    adv = with_crossovers(plain)
    c = network_crossover(adv)
    assert c is not None and c.at == pytest.approx(bw.at, rel=0.05)
    rec = adv.recommendation
    assert rec.too_close_to_call and rec.topology == "allreduce" and rec.candidate == c.topology
    assert "nccl-tests" in settle_line(adv)
