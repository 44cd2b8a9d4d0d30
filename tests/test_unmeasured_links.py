"""Links a profile could not measure (issue 25): ranks sharing one GPU, nodes pretended on one machine.

The profiler marks them in shape.unmeasured_links (checked here on a recording of what the ranks
gathered: 2 GPUs, a world of 4); calibration and `rtmodel advise --profile` then fill such a link like
one the profile has no pattern for (--intra / --network or the default preset, said in one line);
`rtmodel validate` keeps it, since its run has that very link; profiles without marks are unchanged.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from calibration import calibrate, profile_from_document, synthetic_profile
from rtmodel_cli.app import app
from rtmodel_documents.profile_checks import ProfileError

DATA = Path(__file__).parent / "data"
SHARED = "2 ranks share 1 GPU (cuda:0): their exchange is a copy through the host, not a GPU link"
PRETEND = "the 2 pretend nodes of --ranks-per-node are one machine"
runner = CliRunner()


def marked(doc: dict, **marks: str) -> dict:
    out = copy.deepcopy(doc)
    out["shape"]["unmeasured_links"] = dict(marks)
    return out


def write(tmp_path: Path, doc: dict, name: str = "p.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


# ----------------------------------------------------------------------------- the profiler's marks


@pytest.fixture
def gathered(monkeypatch):
    """collect_shape on a world of 4 whose ranks "sent" the recorded (node, host, GPU) triples."""
    torch = pytest.importorskip("torch")
    import torch.distributed as dist

    import profiler.shape as shape_mod

    record: list = []

    def all_gather_object(out, obj, group=None):
        record.append(obj)  # what this rank sent: its own place
        out[:] = [copy.deepcopy(o) for o in gathered.ranks]

    monkeypatch.setattr(dist, "get_world_size", lambda group=None: 4)
    monkeypatch.setattr(dist, "all_gather_object", all_gather_object)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "fake GPU")
    monkeypatch.setattr(shape_mod, "nccl_version", lambda: None)

    def collect(ranks, k, device, pretend=False):
        gathered.ranks = ranks
        monkeypatch.setenv(shape_mod.PRETEND_NODES_ENV, "1" if pretend else "")
        shape, _ = shape_mod.collect_shape(k, "gloo", device)
        return shape.to_json()  # as the profile holds it

    gathered.ranks = []
    collect.record = record
    return collect


def test_two_pretend_nodes_on_two_gpus_mark_only_the_inter_link(gathered):
    import torch

    ranks = [(f"h-node{r // 2}", "h", r % 2) for r in range(4)]  # the local launcher: GPU = rank % 2
    shape = gathered(ranks, 2, torch.device("cuda", 1), pretend=True)
    assert shape["unmeasured_links"] == {"inter": PRETEND}
    assert shape["node_names"] == ["h-node0", "h-node0", "h-node1", "h-node1"]
    assert gathered.record[-1][2] == 1  # this rank sent the GPU it runs on


def test_four_ranks_on_two_gpus_of_one_node_mark_the_intra_link(gathered):
    import torch

    shape = gathered([("h", "h", r % 2) for r in range(4)], 4, torch.device("cuda", 0))
    assert shape["unmeasured_links"] == {
        "intra": "4 ranks share 2 GPUs (cuda:0, cuda:1): their exchange is a copy through the host, not a GPU link"
    }


def test_pretend_nodes_sharing_one_gpu_mark_both_links(gathered):
    import torch

    shape = gathered(
        [(f"h-node{r // 2}", "h", 0) for r in range(4)], 2, torch.device("cuda", 0), pretend=True
    )
    assert shape["unmeasured_links"] == {
        "intra": "4 ranks share 1 GPU (cuda:0): their exchange is a copy through the host, not a GPU link",
        "inter": PRETEND,
    }


def test_emulated_nodes_and_cpu_ranks_keep_their_links(gathered):
    import torch

    # the emulated cluster: namespaces share a hostname, each node's rank on its GPU 0, no pretend mark
    emulated = [(f"node{r}", "h", 0) for r in range(4)]
    assert gathered(emulated, 1, torch.device("cuda", 0))["unmeasured_links"] == {}
    # gloo on CPU: the links the ranks have are what the emulated cluster has; nothing is shared
    cpu = [(f"node{r // 2}", "h", None) for r in range(4)]
    assert gathered(cpu, 2, torch.device("cpu"))["unmeasured_links"] == {}


def test_a_resume_starts_over_when_the_links_were_measured_otherwise(tmp_path):
    from dataclasses import replace

    from calibration.synthetic import synthetic_document
    from profiler.document import resume_plan
    from rtmodel_util.files import write_json_atomic

    full = synthetic_document(nodes=1, ranks_per_node=2, iterations=5, samples_per_size=3)
    shape = replace(full.shape, unmeasured_links={"intra": SHARED})
    old = replace(full, complete=False, sections_done=("shape", "compute"), shape=shape, communication=None)
    path = tmp_path / "p.json"
    write_json_atomic(path, old.to_json())
    assert resume_plan(path, shape, old.workload, [4096])[0].compute == full.compute
    doc, msg = resume_plan(path, replace(shape, unmeasured_links={}), old.workload, [4096])
    assert doc is None and "unmeasured_links" in msg and "starting over" in msg
    before = replace(shape, unmeasured_links=None)  # a profile from before the marks
    write_json_atomic(path, replace(old, shape=before).to_json())
    assert resume_plan(path, shape, old.workload, [4096])[0].compute == full.compute


# ----------------------------------------------------------------------------- calibration


def test_profiles_without_marks_measure_every_link_and_bad_marks_are_refused():
    doc = synthetic_profile()
    assert profile_from_document(doc).unmeasured_links == {}
    assert profile_from_document(marked(doc, intra=SHARED)).unmeasured_links == {"intra": SHARED}
    for bad in ({"nvlink": "x"}, {"intra": ""}, ["intra"]):
        bad_doc = copy.deepcopy(doc)
        bad_doc["shape"]["unmeasured_links"] = bad
        with pytest.raises(ProfileError, match="shape.unmeasured_links"):
            profile_from_document(bad_doc)


def test_a_marked_link_is_filled_from_the_fallback_and_its_patterns_left_out():
    from runtime_model.presets.to_model import network_preset

    fallback = network_preset("tcp-25g", "pcie4")
    doc = synthetic_profile()
    plain = calibrate(profile_from_document(doc), fallback_network=fallback)
    cal = calibrate(profile_from_document(marked(doc, intra=SHARED)), fallback_network=fallback)
    assert plain.provenance["intra.bandwidth_Bps"].startswith("measured")
    assert cal.provenance["intra.bandwidth_Bps"] == "preset pcie4"
    assert cal.network.intra.bandwidth_Bps == fallback.intra.bandwidth_Bps
    assert cal.provenance["intra-node link"] == f"not measured ({SHARED}); using preset pcie4"
    assert cal.provenance["inter.bandwidth_Bps"].startswith("measured")  # pair-inter: one rank per node
    # every group crossing the marked link is gone, as a group cost and as a link estimate
    # pairs across nodes, one rank per node
    one_per_node = {key for key in plain.network.group_costs if key.startswith("p2-s2-")}
    assert set(cal.network.group_costs) == one_per_node and one_per_node < set(plain.network.group_costs)
    assert any("not used" in n and SHARED in n for n in cal.notes)

    both = calibrate(
        profile_from_document(marked(doc, intra=SHARED, inter=PRETEND)), fallback_network=fallback
    )
    assert both.network.inter.bandwidth_Bps == fallback.inter.bandwidth_Bps and not both.network.group_costs
    assert PRETEND in both.provenance["inter-node link"]
    # the network's name (advise's header) says which link was measured
    assert plain.network.name == "measured 2x2 synthetic"
    assert cal.network.name == "inter measured 2x2 synthetic, intra preset pcie4"
    assert both.network.name == "presets pcie4 + tcp-25g (neither link measured)"


def test_validation_keeps_a_marked_link_as_measured(tmp_path):
    from calibration.profile_view import load_profile
    from rtmodel_validation.options import ValidateOptions
    from rtmodel_validation.plan import make_plan, run_shape

    doc, opts = synthetic_profile(), ValidateOptions(topology="ring", iterations=5, warmup=5)
    plain = make_plan(load_profile(write(tmp_path, doc, "a.json")), run_shape(4, 2), opts)
    path = write(tmp_path, marked(doc, intra=SHARED, inter=PRETEND), "b.json")
    plan = make_plan(load_profile(path), run_shape(4, 2), opts)
    assert plan.predicted == plain.predicted  # the run has the profile's very links


# ----------------------------------------------------------------------------- advise and calibrate


def advise_json(*args) -> dict:
    res = runner.invoke(app, ["advise", *map(str, args), "--format", "json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_advise_fills_a_marked_link_from_intra_or_the_default_and_says_so(tmp_path):
    doc = json.loads((DATA / "synthetic_profile_2x2.json").read_text())
    path = write(tmp_path, marked(doc, intra=SHARED))
    default = advise_json("--profile", path, "--gpus", 16, "--gpus-per-node", 4)
    line = default["provenance"]["intra-node link"]
    assert line.startswith(f"not measured ({SHARED}); using preset ") and "--intra NAME chooses" in line
    given = advise_json("--profile", path, "--gpus", 16, "--gpus-per-node", 4, "--intra", "pcie3")
    assert given["provenance"]["intra-node link"].endswith("using preset pcie3 (given by --intra pcie3)")
    assert given["provenance"]["intra.bandwidth_Bps"] == "preset pcie3"
    assert "inter-node link" not in given["provenance"]  # measured between real nodes
    res = runner.invoke(
        app,
        ["advise", "--profile", str(path), "--gpus", "16", "--gpus-per-node", "4", "--network", "tcp-25g"],
    )
    assert res.exit_code == 2 and "would not be used" in res.output  # the inter link it did measure

    table = runner.invoke(
        app,
        ["advise", "--profile", str(path), "--gpus", "16", "--gpus-per-node", "4"],
        env={"COLUMNS": "400"},
    )
    lines = [ln for ln in table.output.splitlines() if ln.startswith("intra-node link: not measured")]
    assert len(lines) == 1 and "2 ranks share 1 GPU" in lines[0], table.output

    pretend = write(tmp_path, marked(doc, inter=PRETEND), "q.json")
    out = advise_json("--profile", pretend, "--gpus", 16, "--gpus-per-node", 4, "--network", "tcp-25g")
    assert out["provenance"]["inter-node link"].endswith("using preset tcp-25g (given by --network tcp-25g)")


def test_advise_without_marks_is_unchanged(tmp_path):
    doc = json.loads((DATA / "synthetic_profile_2x2.json").read_text())
    args = ("--gpus", 16, "--gpus-per-node", 4)
    plain = advise_json("--profile", DATA / "synthetic_profile_2x2.json", *args)
    empty = advise_json("--profile", write(tmp_path, marked(doc)), *args)
    for out in (plain, empty):
        out["inputs"].pop("profile")  # the file's name
        assert out["provenance"].pop("measured").startswith("profile (")  # with the file's name
    assert empty == plain and not any(k.endswith("-node link") for k in plain["provenance"])


def test_calibrate_says_which_preset_stood_in(tmp_path):
    doc = json.loads((DATA / "synthetic_profile_2x2.json").read_text())
    path = write(tmp_path, marked(doc, inter=PRETEND))
    res = runner.invoke(app, ["calibrate", str(path), "--format", "json", "--network", "tcp-25g"])
    assert res.exit_code == 0, res.output
    assert "given by --network tcp-25g" in json.loads(res.stdout)["provenance"]["inter-node link"]
