"""The nccl-tests and step-anchor evidence from the emulated cluster's kept runs (benchmarks/emulated_evidence).

Why these checks: the files committed must be the profiles' own measurements in a form the reader takes,
every cluster must count, and the routes must keep the invariants they promise (the run's own shape
priced at its measured times; the step anchor reproducing the step), else the errors measure a bug.
"""

from __future__ import annotations

import math

import pytest

from benchmarks import emulated_evidence as ev
from calibration.nccl_tests_output import ALL_REDUCE, read_nccl_tests

CLUSTERS = ev.clusters()


def test_every_kept_cluster_is_found():
    assert len(CLUSTERS) >= 9
    assert all(ev.nccl_tests_path(c).is_file() for c in CLUSTERS)


@pytest.mark.parametrize("cluster", CLUSTERS)
def test_nccl_tests_file_is_the_profiles_two_node_measurement(cluster):
    """The committed file is what the profile writes now, and parses to its two nodes, all of both nodes'
    ranks, and the measured mean times (to the printed 0.1 us)."""
    doc = ev.load_profile_doc(cluster)
    path = ev.nccl_tests_path(cluster)
    assert path.read_text() == ev.nccl_tests_text(doc, cluster)
    run = read_nccl_tests(path)
    assert run.collective == ALL_REDUCE
    assert (run.hosts, run.ranks) == (2, 2 * doc.shape.ranks_per_node)
    measured = ev.two_node_times_us(doc)
    assert {r.nbytes for r in run.rows} == set(measured)
    for row in run.rows:
        assert row.time_s * 1e6 == pytest.approx(measured[row.nbytes], abs=0.051)
        assert row.check is None  # results not checked: N/A, never a made-up 0
    assert sum(r.nbytes >= 1 << 20 for r in run.rows) >= 3  # what the link fit needs


@pytest.mark.parametrize("kind", ev.KINDS)
def test_checks_are_finite_and_named_by_cluster(kind):
    rows = ev.checks(kind)
    assert rows
    for source, topology, measured_x, predicted_x in rows:
        assert source in CLUSTERS and topology
        assert math.isfinite(measured_x) and measured_x > 0
        assert math.isfinite(predicted_x) and predicted_x > 0
        assert math.isfinite(predicted_x / measured_x - 1)


def test_every_cluster_contributes_nccl_tests_checks_for_every_validated_topology():
    rows = ev.checks("nccl-tests")
    for cluster in CLUSTERS:
        assert {t for s, t, *_ in rows if s == cluster} == {r.topology for r in ev.validations(cluster)}


def test_a_refused_step_is_named_not_dropped_silently():
    rows, refused = ev.all_checks("step-anchor")
    assert {c.cluster for c in rows} | set(refused) == set(CLUSTERS)
    assert not {c.cluster for c in rows} & set(refused)
    assert all(why and "\n" not in why for why in refused.values())


@pytest.mark.parametrize("cluster", CLUSTERS)
def test_the_runs_own_shape_is_priced_at_its_measured_times(cluster):
    """nccl_tests_link keeps the run's group shape size by size: the route's all-reduce there is the
    file's time at every size it fits (>= 1 MiB)."""
    from rtmodel_inputs.sources import resolve_inputs
    from runtime_model.prediction.collectives import allreduce_s, global_allreduce_shape

    run = read_nccl_tests(ev.nccl_tests_path(cluster))
    net = resolve_inputs(ev.user_options(cluster, "nccl-tests")).scenario.network
    group = global_allreduce_shape(run.ranks, run.ranks_per_host, net.nics_per_node)
    for row in run.rows:
        if row.nbytes >= 1 << 20:
            assert allreduce_s(group, row.nbytes, net) == pytest.approx(row.time_s, rel=1e-9)


def test_the_step_anchor_reproduces_the_measured_ddp_step():
    rows, _ = ev.all_checks("step-anchor")
    for cluster in {c.cluster for c in rows}:
        step_ms = ev.measured_ddp_ms(ev.validations(cluster))
        for c in rows:
            if c.cluster == cluster:
                assert c.allreduce_pred_ms == pytest.approx(step_ms, rel=1e-6)


def test_the_user_reads_the_injected_stragglers_off_the_per_rank_compute():
    """The straggler a user gives is measured, and it is the one the cluster injected (its name)."""
    for cluster in CLUSTERS:
        given = ev.user_compute(ev.load_profile_doc(cluster)).straggler
        if "straggler" not in cluster:
            assert given is None
            continue
        injected = float(cluster.split("straggler")[1].split("-")[0])
        slow = cluster.split("-r")[-1].split("-")
        factor, count = given.split(":")
        assert int(count) == int(slow[-1]) - int(slow[0]) + 1
        assert float(factor) == pytest.approx(injected, rel=0.15)
