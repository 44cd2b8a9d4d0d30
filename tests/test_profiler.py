"""The profiler, run for real: 2 and 4 local gloo ranks on CPU with the sleeping synthetic model.

Comm-time assertions use the minimum over repetitions (robust to a busy 2-core machine, where a
single sample can be dominated by process scheduling).
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")

from profiler.document import resume_plan  # noqa: E402
from profiler.errors import ProfilingError, RankFailure, WorkloadError  # noqa: E402
from profiler.launch import run_profile  # noqa: E402
from profiler.options import ProfileOptions  # noqa: E402
from rtmodel_documents.profile_patterns import message_sizes, patterns_for  # noqa: E402
from rtmodel_harness.buckets import layout_from_order  # noqa: E402
from rtmodel_harness.model_choice import parse_model_args, resolve_model_args  # noqa: E402
from rtmodel_harness.workloads import build_workload, jitter_multiplier, slowdown_multiplier  # noqa: E402
from rtmodel_util.files import write_json_atomic  # noqa: E402
from tests.host_device import expected_device_and_backend  # noqa: E402

pytestmark = pytest.mark.cluster
SYNTH = {"param_mb": 4, "layers": 4, "forward_ms": 4, "backward_ms": 8, "jitter": "normal", "jitter_cv": 0.2}
SCHEMA_TOP = ("schema", "created_utc", "complete", "sections_done", "shape", "workload",
              "compute", "communication")


def _profile(path, nproc, bucket_cap_mb=1.0, **kw):
    return run_profile(ProfileOptions(path, "synthetic", SYNTH, 2, quick=True, nproc_per_node=nproc,
                                      bucket_cap_mb=bucket_cap_mb, reps=4, timeout_s=60, progress=False, **kw))


@pytest.fixture(scope="module")
def two_rank(tmp_path_factory):
    path = tmp_path_factory.mktemp("p2") / "profile.json"
    doc = _profile(path, 2, trace_out=str(path.parent / "traces"))
    return path, doc


# ----------------------------------------------------------------------------- pure parts


def test_patterns_follow_the_shape_and_count_nic_sharing():
    by = {p.name: p for p in patterns_for(8, 4)}
    assert list(by) == ["pair-intra", "pair-inter", "pair-inter-alone", "node", "two-nodes", "all"]
    assert by["pair-inter"].groups[0] == (0, 4) and by["pair-inter"].nic_sharing == 4
    # the same pair with its flow alone on the NIC: tells a per-flow cap from the NIC's capacity
    alone = by["pair-inter-alone"]
    assert alone.groups == ((0, 4),) and (alone.group_size, alone.nodes_spanned, alone.nic_sharing) == (2, 2, 1)
    # two-nodes groups do not share a NIC (q = 1), so their alone run would repeat them: not run
    assert "two-nodes-alone" not in by
    assert [p.name for p in patterns_for(8, 1)] == ["pair-inter", "two-nodes", "all"]  # k = 1: q = 1 everywhere
    assert (by["two-nodes"].group_size, by["two-nodes"].nodes_spanned, by["two-nodes"].nic_sharing) == (8, 2, 1)
    assert {p.name for p in patterns_for(4, 4)} == {"pair-intra", "node", "all"}  # one node: nothing crosses
    assert {p.name for p in patterns_for(4, 1)} == {"pair-inter", "two-nodes", "all"}  # k = 1: no intra pairs


def test_pattern_entry_keeps_each_groups_own_time_and_the_max_over_all():
    from profiler.comm import pattern_entry

    pattern = next(p for p in patterns_for(4, 2) if p.name == "pair-inter")  # groups (0, 2) and (1, 3)
    # per rank, per size, per repetition; size 0 only
    per_rank = [[[1.0, 4.0]], [[2.0, 2.0]], [[3.0, 1.0]], [[5.0, 1.5]]]
    entry = pattern_entry(pattern, [4096], per_rank).to_json()  # as the profile holds it
    res = entry["results"][0]
    assert res["samples_s"] == [5.0, 4.0]  # the slowest rank of any group, per repetition
    assert res["group_samples_s"] == [[3.0, 4.0], [5.0, 2.0]]  # (0, 2) and (1, 3): the max of their own ranks
    assert entry["concurrent_groups"] == 2 and entry["nic_sharing"] == 2


def test_message_sizes_reach_the_largest_bucket():
    assert message_sizes(2 * 2**20, 8) == [4096, 32768, 262144, 2097152]
    assert message_sizes(2 * 2**20 + 1, 8)[-1] == 16 * 2**20
    assert len(message_sizes(10, 2)) == 2


def test_bucket_rules_on_hand_made_sizes():
    mib = 2**20 // 4  # fp32 elements per MiB
    sizes = [(mib // 2, 4), (mib, 4), (3 * mib, 4), (100, 4)]  # registration order
    lay = layout_from_order(sizes, [3, 2, 1, 0], cap_mb=2.0, first_bucket_mb=1.0)
    # DDP: first bucket closes at >= 1 MiB (param 3 = 400 B + param 2 = 3 MiB), then >= 2 MiB
    assert lay.ddp_buckets_bytes == [400 + 3 * 2**20, 2**20 + 2**19]
    # Decent-DP: 100 elements pad to 128 and the bucket closes at >= 2 MiB
    assert lay.gossip_buckets_bytes == [(128 + 3 * mib) * 4, (mib + mib // 2) * 4]
    assert lay.closers("ddp") == [2, 0] and lay.gossip_param_to_bucket[1] == 1
    same = layout_from_order([(64, 4), (64, 4)], [1, 0], cap_mb=64 * 4 / 2**20, first_bucket_mb=1.0)
    assert same.gossip_buckets_bytes == [256, 384]  # equal buffers are made unique by +32 elements


def test_model_args_parse_and_fail_clearly():
    assert parse_model_args(["layers=4", "param_mb=2.5", "jitter=none", "flag=true"]) == {
        "layers": 4, "param_mb": 2.5, "jitter": "none", "flag": True}
    with pytest.raises(WorkloadError, match="KEY=VALUE"):
        parse_model_args(["layers"])
    with pytest.raises(WorkloadError, match="no argument 'hidden'"):
        resolve_model_args("synthetic", {"hidden": 3})
    with pytest.raises(WorkloadError, match="jitter must be one of"):
        resolve_model_args("synthetic", {"jitter": "gamma"})


def test_resume_plan_starts_over_on_another_shape(tmp_path):
    from dataclasses import replace

    from rtmodel_documents.profile_document import (
        ProfileCompute,
        ProfileDocument,
        ProfileShape,
        ProfileWorkload,
    )

    shape = ProfileShape(world_size=2, ranks_per_node=2, nodes=1, node_names=("a", "a"), backend="gloo", device="cpu")
    workload = ProfileWorkload(model="synthetic", model_args={"layers": 2}, batch_per_rank=2, bucket_cap_mb=25.0,
                               ddp_first_bucket_mb=1.0, ddp_buckets_bytes=(4096,), gossip_buckets_bytes=(4096,))
    rows, ready = ((0.01,), (0.01,)), (((0.005,),), ((0.005,),))
    compute = ProfileCompute(forward_s=rows, backward_s=rows, optimizer_s=rows, ddp_bucket_ready_s=ready,
                             gossip_bucket_ready_s=ready)
    path = tmp_path / "p.json"
    assert resume_plan(path, shape, workload, [4096])[0] is None
    old = ProfileDocument(sections_done=("shape", "compute"), shape=shape, workload=workload, compute=compute)
    header = {"tool": "rtmodel-profile", "schema_version": 1}  # the header before rtmodel-profile/1: resumed too
    write_json_atomic(path, {**header, **{k: v for k, v in old.to_json().items() if k != "schema"}})
    doc, msg = resume_plan(path, shape, workload, [4096])
    assert doc.compute == compute and "keeping compute" in msg
    doc, msg = resume_plan(path, replace(shape, world_size=4), workload, [4096])
    assert doc is None and "world_size 2 there, 4 now" in msg and "starting over" in msg
    doc, msg = resume_plan(path, shape, replace(workload, model_args={"layers": 3}), [4096])
    assert doc is None and "model_args.layers 2 there, 3 now" in msg
    write_json_atomic(path, {**old.to_json(), "compute": {"x": 1}})  # a profile, but not one that reads
    doc, msg = resume_plan(path, shape, workload, [4096])
    assert doc is None and "compute.forward_s is missing" in msg and "starting over" in msg
    path.write_text("{not json")
    with pytest.raises(ProfilingError, match="not valid JSON.*left untouched"):
        resume_plan(path, shape, workload, [4096])  # never overwritten: it may be the user's own file
    assert path.read_text() == "{not json"


# ----------------------------------------------------------------------------- workloads


def test_synthetic_model_sleeps_and_readies_gradients_layer_by_layer():
    w = build_workload("synthetic", {**SYNTH, "jitter": "none", "forward_ms": 20, "backward_ms": 40}, 2, "cpu",
                       rank=0)
    lay = w.bucket_layout()
    assert lay.backward_order == [3, 2, 1, 0]  # last layer's gradient first, like a real backward
    import time

    t0 = time.perf_counter()
    loss = w.loss(w.model, w.make_batch(0))
    t1 = time.perf_counter()
    loss.backward()
    t2 = time.perf_counter()
    assert t1 - t0 >= 0.020 and t2 - t1 >= 0.040  # sleeps are never shorter than asked
    for p in w.model.parameters():
        assert p.grad is not None and p.grad.shape == p.shape and p.grad.dtype == torch.float32
    assert w.param_bytes == 4 * 2**20


def test_jitter_is_seeded_by_rank_and_step_with_the_stated_spread():
    a = [jitter_multiplier("normal", 0.1, 0, 0, s) for s in range(4000)]
    assert a[:5] == [jitter_multiplier("normal", 0.1, 0, 0, s) for s in range(5)]
    assert a[0] != jitter_multiplier("normal", 0.1, 0, 1, 0)
    assert abs(statistics.fmean(a) - 1) < 0.01 and abs(statistics.stdev(a) - 0.1) < 0.01
    b = [jitter_multiplier("lognormal", 0.3, 0, 0, s) for s in range(4000)]
    assert min(b) > 0 and abs(statistics.fmean(b) - 1) < 0.03 and abs(statistics.stdev(b) - 0.3) < 0.04
    assert jitter_multiplier("none", 0.5, 0, 3, 7) == 1.0


def test_slow_ranks_multiply_their_compute_every_iteration():
    slow = resolve_model_args("synthetic", {"slow_ranks": "0", "slowdown": 1.5})
    assert slow["slow_ranks"] == [0] and slow["slowdown"] == 1.5
    assert [slowdown_multiplier(slow["slow_ranks"], 1.5, r) for r in range(4)] == [1.5, 1.0, 1.0, 1.0]
    node = resolve_model_args("synthetic", parse_model_args(["slow_ranks=0-1", "slowdown=1.3"]))
    assert node["slow_ranks"] == [0, 1] and resolve_model_args("synthetic", node) == node  # idempotent
    assert [slowdown_multiplier(node["slow_ranks"], 1.3, r) for r in range(4)] == [1.3, 1.3, 1.0, 1.0]
    assert resolve_model_args("synthetic", {"slow_ranks": "0-1,5, 3"})["slow_ranks"] == [0, 1, 3, 5]
    assert resolve_model_args("synthetic", {"slow_ranks": [2, 0]})["slow_ranks"] == [0, 2]
    assert resolve_model_args("synthetic", {})["slow_ranks"] == []
    for bad in ("a", "3-1", "-1", 1.5, True):
        with pytest.raises(WorkloadError, match="slow_ranks"):
            resolve_model_args("synthetic", {"slow_ranks": bad})
    with pytest.raises(WorkloadError, match="slowdown must be a number >= 1"):
        resolve_model_args("synthetic", {"slowdown": 0.5})
    # the batch carries slowdown x jitter to the sleeping layers: rank 0 slow, rank 1 not
    args = {**SYNTH, "jitter": "none", "slow_ranks": "0", "slowdown": 1.5}
    m = [float(build_workload("synthetic", args, 2, "cpu", rank=r).make_batch(3)[0][0, 0]) for r in (0, 1)]
    assert m == [1.5, 1.0]
    jittered = {**args, "jitter": "normal", "jitter_cv": 0.2}
    got = float(build_workload("synthetic", jittered, 2, "cpu", rank=0).make_batch(3)[0][0, 0])
    assert got == pytest.approx(1.5 * jitter_multiplier("normal", 0.2, 0, 0, 3))


def test_the_first_bucket_rule_is_read_from_ddps_own_source():
    """Old torch handed the Reducer 1 MiB for the first bucket whatever the cap; torch 2.11 (measured on an
    H200 host, where the layout test below failed with the old check) and later size it by an explicit cap."""
    from rtmodel_harness.buckets import reducer_gets_default_first_bucket

    old = "param_to_name_mapping,\n            # bucket.\n            dist._DEFAULT_FIRST_BUCKET_BYTES,\n        )"
    older = "param_to_name_mapping,\n            dist._DEFAULT_FIRST_BUCKET_BYTES\n        )"
    new = ("param_to_name_mapping,\n            (\n                dist._DEFAULT_FIRST_BUCKET_BYTES\n"
           "                if self.bucket_bytes_cap_default\n                else self.bucket_bytes_cap\n            ),\n        )")
    initial = "bucket_size_limits = [\n    dist._DEFAULT_FIRST_BUCKET_BYTES,\n    self.bucket_bytes_cap,\n]"
    assert reducer_gets_default_first_bucket(old) and reducer_gets_default_first_bucket(older)
    assert not reducer_gets_default_first_bucket(new + initial)


@pytest.mark.slow
def test_bucket_layout_matches_ddp_and_decent_dp():
    """Our layout against the libraries' own buckets (world of one gloo rank), on the device Decent-DP
    puts the model on (the current GPU on a CUDA host)."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    from rtmodel_harness.buckets import ddp_first_bucket_mb

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    device = torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else torch.device("cpu")
    try:
        for name, args, cap in [("transformer-tiny", {}, None), ("mlp", {}, 5.0),
                                ("synthetic", {"param_mb": 30, "layers": 7}, None)]:
            w = build_workload(name, args, 2, device, rank=0)
            lay = w.bucket_layout(cap or 25.0, ddp_first_bucket_mb(cap))
            ddp = DDP(w.model, bucket_cap_mb=cap)
            for step in range(2):  # DDP rebuilds its buckets in gradient-ready order after iteration 1
                w.loss(ddp, w.make_batch(step)).backward()
            got = [b.buffer().numel() * 4 for b in ddp.reducer._get_zeros_like_grad_buckets()]
            assert got == lay.ddp_buckets_bytes, name
            decent_dp = pytest.importorskip("decent_dp.ddp")
            w = build_workload(name, args, 2, device, rank=0)
            ddd = decent_dp.DecentralizedDataParallel(
                w.model, lambda ps: torch.optim.Adam([p for _, p in ps]), topology="complete",
                bucket_size_in_mb=cap or 25)
            w.loss(ddd, w.make_batch(0)).backward()  # its trace pass
            ddd._initialize_params()
            assert [b.numel() * 4 for b in ddd._comm_blocks] == lay.gossip_buckets_bytes, name
    finally:
        dist.destroy_process_group()


# ----------------------------------------------------------------------------- real runs


@pytest.mark.slow
def test_two_rank_profile_has_schema_compute_and_communication(two_rank):
    from rtmodel_documents.profile_document import ProfileDocument

    path, doc = two_rank
    assert doc == json.loads(path.read_text())
    assert all(k in doc for k in SCHEMA_TOP) and doc["schema"] == "rtmodel-profile/1"
    assert ProfileDocument.from_json(doc, need_complete=True).to_json() == doc  # the reader reads what it wrote
    assert doc["complete"] is True and doc["sections_done"] == ["shape", "compute", "communication"]
    shape = doc["shape"]
    assert (shape["world_size"], shape["ranks_per_node"], shape["nodes"]) == (2, 2, 1)
    assert (shape["device"], shape["backend"]) == expected_device_and_backend(2) and len(shape["node_names"]) == 2
    wl = doc["workload"]
    assert wl["param_bytes"] == 4 * 2**20 and len(wl["gossip_buckets_bytes"]) == 4  # cap 1 MiB: one per layer
    assert sum(wl["ddp_buckets_bytes"]) == wl["param_bytes"]

    comp = doc["compute"]
    iters = comp["iterations"]
    for key in ("forward_s", "backward_s", "optimizer_s"):
        assert len(comp[key]) == 2 and all(len(r) == iters and min(r) > 0 for r in comp[key])
    for rank in range(2):
        for it in range(iters):
            for key, n_b in (("ddp_bucket_ready_s", len(wl["ddp_buckets_bytes"])),
                             ("gossip_bucket_ready_s", len(wl["gossip_buckets_bytes"]))):
                ready = comp[key][rank][it]
                assert len(ready) == n_b
                assert all(a < b for a, b in zip(ready, ready[1:], strict=False))  # layer by layer
                assert 0 < ready[-1] <= comp["backward_s"][rank][it]
        c = [f + b for f, b in zip(comp["forward_s"][rank], comp["backward_s"][rank], strict=True)]
        assert statistics.stdev(c) > 0 and statistics.fmean(c) >= 0.012 * 0.8  # jitter on: compute varies

    comm = doc["communication"]
    pats = {p["pattern"]: p for p in comm["patterns"]}
    assert set(pats) == {"pair-intra", "node", "all"}  # one node of two: all three are the same pair
    assert pats["all"]["same_as"] == "pair-intra" and pats["all"]["results"] == pats["pair-intra"]["results"]
    res = pats["pair-intra"]["results"]
    assert [r["bytes"] for r in res] == comm["sizes_bytes"] and comm["sizes_bytes"][-1] >= 2**20
    for r in res:
        assert len(r["samples_s"]) == 4 and min(r["samples_s"]) > 0
        assert r["median_s"] == statistics.median(r["samples_s"])
        assert r["algbw_Bps"] == pytest.approx(r["bytes"] / r["median_s"])
        assert r["busbw_Bps"] == pytest.approx(r["algbw_Bps"])  # p = 2: 2(p-1)/p = 1
    # no ordering of measured times here: load on 2 shared cores can invert a 4 KiB vs 1 MiB comparison
    # the training's own buckets, one at a time and all in flight: Decent-DP's on the pairs, DDP's on all
    wl = doc["workload"]
    flights = {f["pattern"]: f for f in comm["in_flight"]}
    assert flights["pair-intra"]["buckets_bytes"] == wl["gossip_buckets_bytes"]
    assert flights["all"]["buckets_bytes"] == wl["ddp_buckets_bytes"]
    for f in flights.values():
        assert len(f["one_at_a_time_s"]) == len(f["in_flight_s"]) == 4
        assert min(f["one_at_a_time_s"] + f["in_flight_s"]) > 0
    # Decent-DP's also over two groups of the same ranks (its rounds' groups are its own); DDP has one group
    assert len(flights["pair-intra"]["two_groups_s"]) == 4 and min(flights["pair-intra"]["two_groups_s"]) > 0
    assert "two_groups_s" not in flights["all"]


@pytest.mark.slow
def test_four_ranks_as_two_pretend_nodes_form_inter_node_patterns(tmp_path):
    # 4 MB buckets: sizes up to 4 MB, so the transfer outweighs 4 ranks' scheduling noise on 2 cores
    doc = _profile(tmp_path / "p4.json", 4, bucket_cap_mb=4.0, ranks_per_node=2)
    shape = doc["shape"]
    assert (shape["world_size"], shape["ranks_per_node"], shape["nodes"]) == (4, 2, 2)
    names = shape["node_names"]
    assert names[0] == names[1] != names[2] == names[3]
    pats = {p["pattern"]: p for p in doc["communication"]["patterns"]}
    assert set(pats) == {"pair-intra", "pair-inter", "pair-inter-alone", "node", "two-nodes", "all"}
    inter = pats["pair-inter"]
    assert (inter["group_size"], inter["nodes_spanned"], inter["nic_sharing"], inter["concurrent_groups"]) == \
        (2, 2, 2, 2)
    alone = pats["pair-inter-alone"]
    assert (alone["nic_sharing"], alone["concurrent_groups"], alone["groups"]) == (1, 1, [[0, 2]])
    for r in inter["results"]:  # each group's own time per repetition, never above the max over all
        assert len(r["group_samples_s"]) == 2
        assert all(max(g) <= m for g, m in zip(zip(*r["group_samples_s"], strict=True), r["samples_s"], strict=True))
    assert (pats["two-nodes"]["group_size"], pats["two-nodes"]["nodes_spanned"]) == (4, 2)
    assert "same_as" not in pats["two-nodes"] and pats["all"]["same_as"] == "two-nodes"
    for p in doc["communication"]["patterns"]:  # structure only: measured times may be inverted by load
        sizes = [r["bytes"] for r in p["results"]]
        assert sizes == sorted(sizes) and all(min(r["samples_s"]) > 0 for r in p["results"])
    assert len(doc["compute"]["forward_s"]) == 4


@pytest.mark.slow
def test_trace_out_writes_each_ranks_ddp_trace(two_rank):
    """--trace-out: one torch.profiler trace per rank, its three active DDP iterations as ProfilerSteps,
    with the run's rank and world and DDP's all-reduce calls (what `advise --trace` reads on a GPU host;
    a CPU host's trace is read there as CPU ranks over gloo)."""
    import gzip

    from profiler.trace_out import ACTIVE

    path, _ = two_rank
    files = sorted((path.parent / "traces").glob("rank*.pt.trace.json.gz"))
    assert [f.name.split(".")[0] for f in files] == ["rank0", "rank1"]
    for rank, f in enumerate(files):
        doc = json.loads(gzip.decompress(f.read_bytes()))
        assert (doc["distributedInfo"]["rank"], doc["distributedInfo"]["world_size"]) == (rank, 2)
        names = [e.get("name", "") for e in doc["traceEvents"]]
        # the host's steps: on a GPU Kineto repeats them on the device's timeline (gpu_user_annotation)
        host_steps = [e for e in doc["traceEvents"] if e.get("cat") == "user_annotation"]
        assert sum(e["name"].startswith("ProfilerStep#") for e in host_steps) == ACTIVE
        assert "c10d::allreduce_" in names  # DDP's bucket all-reduces (gloo here; NCCL's kernels on GPUs)


@pytest.mark.slow
def test_resume_keeps_finished_sections_and_measures_the_rest(two_rank, tmp_path):
    _, full = two_rank
    partial = {**full, "complete": False, "sections_done": ["shape", "compute"]}
    del partial["communication"]
    path = tmp_path / "resumed.json"
    write_json_atomic(path, partial)
    doc = _profile(path, 2, resume=True)
    assert doc["complete"] is True and doc["sections_done"] == ["shape", "compute", "communication"]
    assert doc["compute"] == full["compute"]  # kept, not re-measured
    assert doc["created_utc"] == full["created_utc"]
    assert {p["pattern"] for p in doc["communication"]["patterns"]} == {"pair-intra", "node", "all"}
    assert [f["pattern"] for f in doc["communication"]["in_flight"]] == ["pair-intra", "all"]
    kept = _profile(path, 2, resume=True)  # a finished profile resumed: in flight is kept too
    assert kept["communication"]["in_flight"] == doc["communication"]["in_flight"]


@pytest.mark.slow
def test_a_failing_rank_is_named_with_its_phase(tmp_path, monkeypatch):
    (tmp_path / "brokenmodel.py").write_text(textwrap.dedent("""
        import os
        import torch

        def factory():
            def make_batch(step, batch, device):
                if os.environ["RANK"] == "1" and step == 2:
                    raise RuntimeError("data loader broke")
                return torch.randn(batch, 4), torch.randn(batch, 2)
            return torch.nn.Linear(4, 2), make_batch, torch.nn.functional.mse_loss
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    with pytest.raises(RankFailure) as info:
        run_profile(ProfileOptions(tmp_path / "p.json", "brokenmodel:factory", {}, 2, quick=True, nproc_per_node=2,
                                   timeout_s=30, progress=False))
    msg = str(info.value)
    assert msg.startswith("rank 1 failed during compute: RuntimeError: data loader broke")
    assert "partial profile kept" in msg and "--resume" in msg
    assert json.loads((tmp_path / "p.json").read_text())["sections_done"] == ["shape"]


def test_a_full_disk_while_the_lead_checkpoints_is_one_line_naming_the_file(tmp_path, monkeypatch):
    """ENOSPC (or a quota, a read-only remount) while rank 0 writes the profile: a RankFailure saying which
    file and why, which the launcher prints as one line beside the partial profile, not the rank's OSError."""
    import errno
    import types

    import rtmodel_util.files as files
    from profiler.rank import PhaseTracker, _Run
    from rtmodel_documents.profile_document import new_document

    def full(path, doc, *args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    monkeypatch.setattr(files, "write_json_atomic", full)
    run = _Run.__new__(_Run)
    run.opts, run.rank, run.tracker = types.SimpleNamespace(out=tmp_path / "p.json"), 0, PhaseTracker(0)
    run.doc = new_document().done("shape")
    with pytest.raises(RankFailure) as info:
        run.checkpoint("compute")
    assert str(info.value) == (
        f"rank 0 failed during writing the profile after compute: could not write {tmp_path / 'p.json'}: "
        "No space left on device"
    )


@pytest.mark.parametrize("model, expected", [
    ("nosuchpkg.models:factory", "cannot import 'nosuchpkg.models'"),
    ("resnet9000", "unknown model 'resnet9000'"),
])
def test_bad_model_is_one_clear_line_without_traceback(tmp_path, model, expected):
    proc = subprocess.run([sys.executable, "-m", "profiler", "--out", str(tmp_path / "x.json"), "--model", model],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert expected in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and not (tmp_path / "x.json").exists()


def test_options_are_checked_before_anything_starts():
    with pytest.raises(ProfilingError, match="--ranks-per-node 3 does not divide"):
        run_profile(ProfileOptions("x.json", nproc_per_node=4, ranks_per_node=3))
    with pytest.raises(ProfilingError, match="--iterations must be"):
        run_profile(ProfileOptions("x.json", iterations=0))


def test_a_users_batches_are_moved_to_the_models_device():
    """A make_batch that ignores `device` still feeds a GPU model ("meta" stands in for cuda here)."""
    from rtmodel_harness.workloads import on_device

    meta = torch.device("meta")
    batch = ({"tokens": torch.ones(2, 3)}, [torch.zeros(2)], "label", 3)
    moved = on_device(batch, meta)
    assert moved[0]["tokens"].device == meta and moved[1][0].device == meta
    assert isinstance(moved[1], list) and moved[2:] == ("label", 3)


def test_a_rank_ended_by_a_signal_is_named_with_its_usual_cause(tmp_path):
    """A native abort (glibc's 'double free or corruption' in torch's CPU kernels) leaves no Python error:
    the launcher names the signal and what it usually means instead of a bare number."""
    from profiler.failures import read_failures

    (tmp_path / "rank1.phase").write_text("setup/workload")
    reports = read_failures(tmp_path, {0: 0, 1: -6, 2: -9, 3: -99}, killed=set())
    messages = {r["rank"]: r["message"] for r in reports}
    assert messages[1].startswith("process killed by signal 6 (SIGABRT, an abort in native code")
    assert "out-of-memory killer" in messages[2]
    assert messages[3] == "process killed by signal 99 without an error message"
    assert [r["phase"] for r in reports if r["rank"] == 1] == ["setup/workload"]
