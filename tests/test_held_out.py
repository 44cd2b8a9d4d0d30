"""A class's interval is held out: each source left out in turn must mostly fall inside what the others
state; the kept figures are recomputed from the checks; every network preset declares its fabric."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rtmodel_literature.speedup_evidence import all_checks, class_errors
from runtime_model.advice.confidence import (
    ETHERNET_PRESET,
    IB_PRESET,
    NCCL_TESTS,
    NCCL_TESTS_STEP,
    PRESETS,
    class_margin,
    measured_errors,
    speedup_evidence,
)
from runtime_model.advice.held_out import COVERAGE, held_out_coverage, leave_one_source_out
from runtime_model.presets import to_model as presets
from runtime_model.presets.preset_types import FABRICS
from runtime_model.presets.to_model import load_library

checks_by_source = st.dictionaries(
    st.text("abcdef", min_size=1, max_size=3),
    st.lists(st.floats(-0.9, 0.9, allow_nan=False), min_size=1, max_size=4),
    min_size=2,
    max_size=6,
)


@given(checks_by_source)
def test_the_held_out_interval_covers_its_target_and_never_narrows_the_worst(by_source):
    errors = [(name, e) for name, errs in by_source.items() for e in errs]
    held = leave_one_source_out(errors)
    worst = max(abs(e) for _, e in errors)
    assert held.factor >= 1.0 and held.interval == pytest.approx(held.factor * worst)
    assert held.sources == len(by_source) and held.checks == len(errors)
    if worst > 0 and all(max(map(abs, errs)) > 0 for errs in by_source.values()):
        assert held.coverage >= COVERAGE


def test_a_source_unlike_the_others_widens_the_interval():
    """Ten sources err by 10 %, one by 40 %: held out, the 40 % source is outside the others' 10 %; with
    one check in 11 outside, coverage 10/11 >= 90 % needs no widening. Two such sources (both 40 %)
    cover each other; three sources at 40 % among five at 10 % also do."""
    alike = [(f"s{i}", 0.10) for i in range(10)]
    held = leave_one_source_out([*alike, ("odd", 0.40)])
    assert held.factor == 1.0 and held.coverage == pytest.approx(10 / 11)
    few = [(f"s{i}", 0.10) for i in range(3)] + [("odd", 0.40)]
    widened = leave_one_source_out(few)
    assert widened.factor == pytest.approx(4.0) and widened.interval == pytest.approx(1.6)
    assert held_out_coverage({"a": [0.1], "b": [0.4]}, 1.0) == 0.5


def test_one_source_cannot_be_held_out():
    with pytest.raises(ValueError, match="two sources"):
        leave_one_source_out([("a", 0.1), ("a", 0.2)])


def test_the_kept_class_intervals_are_the_held_out_ones():
    kept, measured = speedup_evidence(), class_errors(all_checks())
    for cls, m in measured.items():
        assert kept[cls].sources == m.sources, cls
        if m.interval is None:
            assert kept[cls].interval is None, cls
            continue
        assert kept[cls].interval == pytest.approx(m.interval, abs=5e-4), cls
        assert kept[cls].held_out_coverage == pytest.approx(m.held_out_coverage, abs=5e-4), cls
        assert kept[cls].held_out_factor == pytest.approx(m.held_out_factor, abs=5e-4), cls


@pytest.mark.parametrize("kind, cls", [("nccl-tests", NCCL_TESTS), ("step-anchor", NCCL_TESTS_STEP)])
def test_the_nccl_tests_classes_are_the_emulated_clusters_measured_the_way_a_user_would(kind, cls):
    """--nccl-tests with the compute measured (--compute-ms), and with it backed out of the measured DDP
    step (--step-ms): each class's kept figures are its checks' (benchmarks/emulated_evidence.py)."""
    from benchmarks.emulated_evidence import checks
    from rtmodel_literature.speedup_evidence import class_error

    measured = class_error([(cluster, predicted / real - 1) for cluster, _, real, predicted in checks(kind)])
    kept = speedup_evidence()[cls]
    assert kept.states_its_own() and (kept.speedups, kept.sources) == (measured.speedups, measured.sources)
    assert kept.interval == pytest.approx(measured.interval, abs=5e-4)
    assert kept.held_out_coverage == pytest.approx(measured.held_out_coverage, abs=5e-4)
    assert kept.mean_abs_error == pytest.approx(measured.mean_abs_error, abs=5e-4)


def test_every_class_that_states_its_own_interval_held_out_covers_ninety_percent():
    stated = [e for e in speedup_evidence().values() if e.states_its_own()]
    assert stated  # the InfiniBand class and the pooled one
    assert all(e.held_out_coverage >= COVERAGE for e in stated)
    for kind in measured_errors().values():
        if kind.speedup_interval is not None:
            assert kind.speedup_held_out_coverage >= COVERAGE and kind.speedup_sources >= 3


def test_the_interval_and_its_evidence_are_in_the_margin():
    m = class_margin(IB_PRESET)
    assert m.interval == speedup_evidence()[IB_PRESET].interval
    assert m.evidence["held_out_coverage"] >= COVERAGE and m.evidence["sources"] >= 3
    borrowed = class_margin(ETHERNET_PRESET)
    assert borrowed.interval == speedup_evidence()[PRESETS].interval and "stand in" in borrowed.why


def test_every_network_preset_declares_its_fabric_and_a_cap_comes_with_its_source():
    lib = load_library()
    for name, net in lib.inter_networks.items():
        assert net.fabric in FABRICS, name
        assert (net.flow_cap_Gbps is None) == (net.flow_cap_source == ""), name
        if net.flow_cap_Gbps is not None:
            assert net.flow_cap_Gbps <= net.achievable_Gbps, name  # one flow never more than the link


def test_a_flow_cap_leaves_one_collective_as_it_was_and_lets_flows_that_share_a_nic_use_more():
    """tcp-25g: one NCCL communicator moves 13.6 Gbit/s (nccl-tests #83), many streams 21: DDP's
    All-Reduce (one flow per NIC) is priced at the cap, gossip groups sharing a NIC at more in all."""
    link = presets.link_from_preset(load_library().inter_networks["tcp-25g"])
    assert link.fabric == "tcp" and link.flow_bandwidth_Bps(1) == pytest.approx(13.6e9 / 8)
    assert 4 * link.flow_bandwidth_Bps(4) == pytest.approx(0.84 * 25e9 / 8)
    ib = presets.link_from_preset(load_library().inter_networks["ib-100"])
    assert ib.fabric == "infiniband" and math.isinf(ib.flow_cap_Bps)


def test_a_step_on_a_measured_network_states_the_step_classes_interval_and_on_presets_the_presets():
    """With --nccl-tests and --step-ms the margin is the class that was checked so (the emulated clusters
    advised from both); a step on preset links has no checks of its own and keeps its network's class."""
    from benchmarks.emulated_evidence import user_options
    from rtmodel_inputs.sources import resolve_inputs

    stepped = resolve_inputs(user_options("2x2-1000mbit-0.5ms", "step-anchor"))
    assert stepped.margin.interval == speedup_evidence()[NCCL_TESTS_STEP].interval
    assert stepped.margin.evidence["class"] == "nccl-tests-network-and-DDP-step"
    assert "DDP-step speedups" in stepped.margin.why
    measured = resolve_inputs(user_options("2x2-1000mbit-0.5ms", "nccl-tests"))
    assert measured.margin.interval == speedup_evidence()[NCCL_TESTS].interval
    on_presets = resolve_inputs({"gpus": 16, "cluster": "a100-ib100", "step_ms": 80.0})
    assert on_presets.margin == resolve_inputs({"gpus": 16, "cluster": "a100-ib100"}).margin
