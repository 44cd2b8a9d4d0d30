"""A topology is one object (runtime_model/topology/kind.py TopologyInfo): one module of topology/kinds
fills it, one registry line lists it, and no model module switches on a topology's name.

The contract is shown by a toy topology defined here alone, registered for one test (registry.registered):
the advisor, `rtmodel topologies`' rows and the reduced system above FULL_MAX_N pick it up, through its
object, without any other module knowing its name.
"""

from __future__ import annotations

import ast
import importlib
import math
from pathlib import Path

import numpy as np
import pytest

from runtime_model.core.scenario import ClusterShape
from runtime_model.presets import to_model as presets
from runtime_model.topology.kind import ClosedConsensus, TopologyInfo
from runtime_model.topology.quotient import FULL_MAX_N, rotation_quotient
from runtime_model.topology.registry import (
    TOPOLOGIES,
    TopologyError,
    UnknownTopology,
    registered,
    topology_info,
    topology_names,
    unreduced_names,
)
from runtime_model.topology.schedule import Round, Schedule

ROOT = Path(__file__).parent.parent
KINDS = ROOT / "runtime_model" / "topology" / "kinds"
# The modules that once switched on topology names: they must ask the topology's object instead.
NAME_BLIND = [
    ROOT / "runtime_model" / "topology" / "symmetry.py",
    ROOT / "runtime_model" / "topology" / "quotient.py",
    ROOT / "runtime_model" / "topology" / "kind.py",
    ROOT / "runtime_model" / "topology" / "registry.py",
    ROOT / "runtime_model" / "prediction" / "reduced_system.py",
    *sorted((ROOT / "runtime_model" / "convergence").glob("*.py")),
]


def _code_strings(path: Path) -> set[str]:
    """Every string literal of a module but its docstrings (prose may name topologies; code may not)."""
    tree = ast.parse(path.read_text())
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    }


@pytest.mark.parametrize("path", NAME_BLIND, ids=lambda p: p.name)
def test_no_model_module_switches_on_a_topology_name(path):
    assert not _code_strings(path) & set(topology_names()), path


def test_the_name_scan_sees_a_switch():
    assert "ring" in _code_strings(KINDS / "ring.py")  # the kind module itself names its topology


def test_every_kind_module_is_registered_once_and_in_its_own_module():
    modules = sorted(p.stem for p in KINDS.glob("*.py") if p.stem != "__init__")
    infos = [importlib.import_module(f"runtime_model.topology.kinds.{m}").TOPOLOGY for m in modules]
    assert sorted(info.name for info in infos) == sorted(TOPOLOGIES)
    assert all(TOPOLOGIES[info.name] is info for info in infos)


def test_the_unreduced_topologies_are_those_whose_object_has_no_quotient():
    assert unreduced_names() == [n for n in TOPOLOGIES if TOPOLOGIES[n].reduce is None]
    assert "bluefog-dynamic-exp" in unreduced_names()


@pytest.mark.parametrize("name", list(TOPOLOGIES))
def test_a_built_schedule_carries_its_objects_decent_dp_name(name):
    info = topology_info(name)
    shape = ClusterShape(64, 8)
    if info.applicability(shape) is None:
        assert info.build(shape).decent_dp_name == info.decent_dp_name


# ---------------------------------------------------------------- a toy topology, defined here alone


def _toy_applicability(shape: ClusterShape) -> str | None:
    return None if shape.gpus % 2 == 0 else f"toy-ring needs an even number of GPUs; n = {shape.gpus}"


def _toy_build(shape: ClusterShape) -> Schedule:
    """Pairs (2j, 2j+1), then (2j+1, 2j+2 mod n): the groups of Decent-DP's ring, built from scratch."""
    ranks = np.arange(shape.gpus)
    first = Round(ranks // 2, np.full(shape.gpus // 2, 0.5))
    second = Round((ranks + 1) % shape.gpus // 2, np.full(shape.gpus // 2, 0.5))
    return Schedule("toy-ring", (first, second), "toy: ring's pairs, built in a test")


def _toy_reduce(name, shape, build, target):
    k = shape.gpus_per_node
    return rotation_quotient(name, shape, build, target, k * 2 // math.gcd(2, k))


def _toy_consensus(red) -> ClosedConsensus:
    return ClosedConsensus(2, None, abs(math.cos(2.0 * math.pi / red.full.gpus)), "toy-closed-form", 1.0)


TOY = TopologyInfo(
    "toy-ring",
    "toy: ring's pairs, defined in a test",
    None,
    _toy_applicability,
    _toy_build,
    reduce=_toy_reduce,
    consensus=_toy_consensus,
)


@pytest.fixture
def toy():
    with registered(TOY):
        yield TOY
    assert "toy-ring" not in topology_names()


def _scenario(n, k):
    choice = presets.resolve(
        presets.PresetRequest(n, gpus_per_node=k, compute_cv=0.0, global_batch=max(n, 25_000))
    )
    return presets.scenario_from_choice(choice)


def test_a_registered_toy_is_listed_and_advised_like_a_built_in(toy):
    from runtime_model.advice.advisor import advise
    from runtime_model.advice.report import topology_rows

    assert topology_names()[-1] == "toy-ring" and topology_info("toy-ring") is toy
    listed = {r["topology"]: r for r in topology_rows(ClusterShape(64, 8))}
    assert listed["toy-ring"]["description"] == toy.description and listed["toy-ring"]["period"] == 2
    rows = {r.topology: r for r in advise(_scenario(64, 8)).rows}
    assert rows["toy-ring"].applicable and not rows["toy-ring"].decent_dp_builtin
    # the same groups as Decent-DP's ring: the same prediction and consensus, bit for bit
    assert rows["toy-ring"].prediction.mean_s == rows["ring"].prediction.mean_s
    assert rows["toy-ring"].consensus.rho == rows["ring"].consensus.rho
    odd = {r.topology: r for r in advise(_scenario(63, 1)).rows}
    assert not odd["toy-ring"].applicable and "toy-ring needs an even number" in odd["toy-ring"].reason


def test_above_full_max_n_the_toys_own_quotient_and_closed_form_answer(toy):
    from runtime_model.prediction.reduced_system import topology_model

    shape = ClusterShape(2 * FULL_MAX_N, 8)
    model, ring = topology_model("toy-ring", shape), topology_model("ring", shape)
    assert model.reduction is not None and model.reduction.n < shape.gpus
    assert model.consensus().method == "toy-closed-form"
    assert model.consensus().rho == ring.consensus().rho
    sc = _scenario(shape.gpus, 8)
    assert model.predict(sc).mean_s == pytest.approx(ring.predict(sc).mean_s, rel=1e-12)


def test_a_toy_without_a_quotient_says_so_above_full_max_n():
    from runtime_model.prediction.reduced_system import topology_model
    from runtime_model.topology.registry import TopologyNotApplicable

    plain = TopologyInfo("toy-plain", "toy: no quotient", None, _toy_applicability, _toy_build)
    with registered(plain):
        assert "toy-plain" in unreduced_names()
        with pytest.raises(TopologyNotApplicable, match="no symmetry known"):
            topology_model("toy-plain", ClusterShape(2 * FULL_MAX_N, 8))
    with pytest.raises(UnknownTopology):
        topology_info("toy-plain")


def test_a_name_is_registered_once():
    with pytest.raises(TopologyError, match="registered already"), registered(TOPOLOGIES["ring"]):
        pass
    assert topology_names().count("ring") == 1
