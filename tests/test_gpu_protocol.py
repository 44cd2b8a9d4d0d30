"""The CUDA/NCCL path, checked by protocol on a machine without a GPU.

Why: CI has no GPU, so a slip in the GPU path (set_device after init, a missing synchronize, the
wrong device index, a group first used inside a timed region) would only show on a cluster. Here
torch.cuda's and torch.distributed's calls are recording fakes (2 GPUs, NCCL, a world of 4, this
process rank 0 with LOCAL_RANK=1); the real profiler and validation code runs on CPU tensors while
every device it names is cuda:1, and the tests check the order and arguments of the calls. No timing
value is asserted. The warm-up rule tests at the top need no torch.
"""

from __future__ import annotations

import copy
import itertools
from datetime import timedelta
from types import SimpleNamespace

import pytest

RANK, WORLD, GPU = 0, 4, 1  # GPU = LOCAL_RANK: the device every call must name
SMALL_MLP = {"d_in": 16, "hidden": 32, "depth": 2, "classes": 4}
DIST_CALLS = ("init_process_group", "new_group", "barrier", "all_reduce", "destroy_process_group")


# ----------------------------------------------------------------------------- warm-up rule (no torch)


@pytest.mark.parametrize("name, n, k, asked, used", [
    ("one-peer-exp", 32, 8, 5, 7),  # period 5
    ("alternating-exp-ring", 64, 8, 5, 8),  # 8 nodes: period 6
    ("one-peer-exp", 32, 8, 12, 12),  # the user's longer warm-up is kept
    ("complete", 8, 2, 5, 5),  # period 1: the All-Reduce-like case needs nothing more
])
def test_warmup_covers_one_schedule_period_plus_two(name, n, k, asked, used):
    from rtmodel_validation.plan import MIN_WARMUP, effective_warmup
    from runtime_model.core.scenario import ClusterShape
    from runtime_model.topology.registry import build_schedule

    schedule = build_schedule(name, ClusterShape(n, k))
    assert effective_warmup(asked, schedule) == used >= schedule.period + MIN_WARMUP


def test_plan_raises_warmup_and_says_so(tmp_path):
    from dataclasses import replace

    from calibration.profile_view import load_profile
    from calibration.synthetic import write_synthetic_profile
    from rtmodel_validation.options import ValidateOptions
    from rtmodel_validation.plan import make_plan, run_shape

    profile = write_synthetic_profile(tmp_path / "p32.json", nodes=4, ranks_per_node=8)
    opts = ValidateOptions(topology="one-peer-exp", iterations=5, warmup=5)
    plan = make_plan(load_profile(profile), run_shape(32, 8), opts)
    assert plan.warmup == 7 and plan.rank_job(60).warmup == 7  # what the ranks run and the result records
    assert any("warm-up raised from 5 to 7" in note for note in plan.notes)
    kept = make_plan(load_profile(profile), run_shape(32, 8), replace(opts, warmup=9))
    assert kept.warmup == 9 and not any("warm-up" in note for note in kept.notes)


@pytest.mark.cluster
@pytest.mark.parametrize("name, n, k", [("one-peer-exp", 32, 8), ("alternating-exp-ring", 64, 8),
                                        ("ring", 8, 2), ("complete", 8, 2)])
def test_decent_dp_cycles_through_the_period_the_warmup_assumes(monkeypatch, name, n, k):
    """Decent-DP's own class (private `_edges`: this rank's round per step) has rtmodel's period."""
    topo = pytest.importorskip("decent_dp.topo")
    import torch.distributed as dist

    from runtime_model.core.scenario import ClusterShape
    from runtime_model.topology.registry import build_schedule

    for attr, fn in {"is_available": lambda: True, "is_initialized": lambda: True, "get_rank": lambda: 0,
                     "get_world_size": lambda: n, "new_group": lambda ranks, **kw: tuple(ranks)}.items():
        monkeypatch.setattr(dist, attr, fn)
    assert len(topo.TopologyReg.registry[name](k)._edges) == build_schedule(name, ClusterShape(n, k)).period


# ----------------------------------------------------------------------------- recording fakes


class Log(list):
    """(name, args) of every faked call, in order."""

    def add(self, name: str, **args) -> None:
        self.append((name, args))

    def names(self) -> list[str]:
        return [n for n, _ in self]

    def where(self, name: str) -> list[int]:
        return [i for i, (n, _) in enumerate(self) if n == name]

    def calls(self, name: str) -> list[dict]:
        return [a for n, a in self if n == name]


def _cuda(index):
    import torch

    return torch.device("cuda", index) if isinstance(index, int) else torch.device(index)


def _install(monkeypatch, log: Log, cuda: bool = True, backend: str = "nccl") -> None:
    import torch
    import torch.distributed as dist

    import profiler.comm
    import rtmodel_harness.distributed
    import rtmodel_harness.workloads

    ids = itertools.count()

    class Event:
        def __init__(self, enable_timing=False, **kw):
            self.id = next(ids)
            log.add("Event", id=self.id, enable_timing=enable_timing)

        def record(self, stream=None):
            log.add("record", id=self.id)

        def elapsed_time(self, end):
            log.add("elapsed_time", start=self.id, end=end.id)
            return 1.0

    fakes = {
        "is_available": lambda: cuda,
        "device_count": lambda: 2 if cuda else 0,
        "set_device": lambda device: log.add("set_device", device=device),
        "synchronize": lambda device=None: log.add("synchronize", device=device),
        "Event": Event,
        "get_device_name": lambda device=None: log.add("get_device_name", device=device) or "Fake GPU",
        # the peak-memory probe's counters (rtmodel_harness/peak_memory.py: the profile's and validate's)
        "memory_allocated": lambda device=None: log.add("memory_allocated", device=device) or 0,
        "max_memory_allocated": lambda device=None: log.add("max_memory_allocated", device=device) or 1 << 30,
        "reset_peak_memory_stats": lambda device=None: log.add("reset_peak_memory_stats", device=device),
        "get_device_properties": lambda device=None: SimpleNamespace(total_memory=80 << 30, name="Fake GPU"),
    }
    for attr, fn in fakes.items():
        monkeypatch.setattr(torch.cuda, attr, fn)
    monkeypatch.setattr(torch.cuda.nccl, "version", lambda: log.add("nccl.version") or (2, 21, 5))

    up = [False]

    def init_process_group(backend, **kw):
        log.add("init_process_group", backend=backend, **kw)
        up[0] = True

    def destroy_process_group(group=None):
        log.add("destroy_process_group")
        up[0] = False

    group_ids = itertools.count()  # not id(): a freed group's id() can be reused by a later group

    def new_group(ranks=None, **kw):
        group = SimpleNamespace(ranks=tuple(ranks), id=next(group_ids))
        log.add("new_group", ranks=tuple(ranks), group=group.id)
        return group

    class Work:  # what an async collective returns: waiting for it is logged
        def __init__(self, group):
            self.group = group

        def wait(self):
            log.add("wait", group=self.group)
            return True

    def all_reduce(tensor, op=None, group=None, async_op=False):
        gid = group.id if group is not None else None
        log.add("all_reduce", group=gid, numel=tensor.numel(), async_op=async_op)
        return Work(gid) if async_op else None

    def all_gather_object(out, obj, group=None):
        out[:] = [copy.deepcopy(obj) for _ in out]  # every rank "sent" what this one did

    dist_fakes = {
        "is_initialized": lambda: up[0], "init_process_group": init_process_group,
        "destroy_process_group": destroy_process_group, "get_rank": lambda group=None: RANK,
        "get_world_size": lambda group=None: WORLD, "get_backend": lambda group=None: backend,
        "new_group": new_group, "all_reduce": all_reduce, "all_gather_object": all_gather_object,
        "broadcast_object_list": lambda objs, src=0, group=None: None,
        "barrier": lambda group=None, async_op=False, device_ids=None: log.add("barrier", device_ids=device_ids),
    }
    for attr, fn in dist_fakes.items():
        monkeypatch.setattr(dist, attr, fn)

    clock = itertools.count(1)

    def perf_counter():
        log.add("perf_counter")
        return float(next(clock))

    monkeypatch.setattr(profiler.comm, "time", SimpleNamespace(perf_counter=perf_counter))
    monkeypatch.setattr(rtmodel_harness.distributed, "time", SimpleNamespace(perf_counter=perf_counter))

    def zeros(*size, device=None, **kw):  # comm buffers: record the device asked for, allocate on CPU
        log.add("zeros", device=device)
        return torch.zeros(*size, **kw)

    monkeypatch.setattr(profiler.comm, "torch", SimpleNamespace(
        zeros=zeros, float32=torch.float32, cuda=torch.cuda, device=torch.device, Tensor=torch.Tensor))

    real_build = rtmodel_harness.workloads.build_workload

    def build_workload(name, model_args, batch, device, *, rank=None):  # the model lives on the CPU
        from dataclasses import replace

        log.add("build_workload", device=device)
        return replace(real_build(name, model_args, batch, "cpu", rank=0), device=device)

    monkeypatch.setattr(rtmodel_harness.workloads, "build_workload", build_workload)


@pytest.fixture
def gpu(monkeypatch) -> Log:
    """Fakes installed; this process is rank 0 of 4 with LOCAL_RANK=1 on a machine with 2 GPUs."""
    pytest.importorskip("torch")
    for var in ("RTMODEL_DEVICE_INDEX", "RTMODEL_RANKS_PER_NODE", "LOCAL_WORLD_SIZE", "RTMODEL_ERROR_DIR"):
        monkeypatch.delenv(var, raising=False)
    for var, value in (("RANK", RANK), ("WORLD_SIZE", WORLD), ("LOCAL_RANK", GPU)):
        monkeypatch.setenv(var, str(value))
    log = Log()
    _install(monkeypatch, log)
    return log


# ----------------------------------------------------------------------------- protocol checks


def check_bound_init(log: Log, timeout_s: float, index: int = GPU) -> None:
    """set_device(index) first, then one init_process_group(nccl, device_id=cuda:index, timeout)."""
    first_dist = min(i for i, (n, _) in enumerate(log) if n in DIST_CALLS)
    assert log[first_dist][0] == "init_process_group", "the process group must exist before any collective"
    sets = log.where("set_device")
    assert sets and sets[0] < first_dist, "torch.cuda.set_device must come before init_process_group"
    assert [_cuda(a["device"]) for a in log.calls("set_device")] == [_cuda(index)]
    assert log.calls("init_process_group") == [
        {"backend": "nccl", "device_id": _cuda(index), "timeout": timedelta(seconds=timeout_s)}]


def check_barriers_name_device(log: Log) -> None:
    assert log.calls("barrier") and all(a["device_ids"] == [GPU] for a in log.calls("barrier"))


STRETCH = ("all_reduce", "synchronize", "wait")  # what a timed stretch holds between its clock reads


def check_timed_all_reduces(log: Log) -> None:
    """Each group this rank is in gets one untimed all-reduce before any timed one. A timed stretch is
    synchronize, clock, its all-reduces (each followed by synchronize, or launched in flight and each
    waited for), synchronize, clock: one all-reduce (the patterns) or a bucket list (in flight)."""
    names, mine, warmed, timed = log.names(), set(), set(), 0
    for i, (name, a) in enumerate(log):
        if name == "new_group" and RANK in a["ranks"]:
            mine.add(a["group"])
        if name != "all_reduce":
            continue
        assert a["group"] in mine, "all_reduce on a group this rank is not in"
        start, end = i, i
        while names[start - 1] in STRETCH:
            start -= 1
        while end + 1 < len(names) and names[end + 1] in STRETCH:
            end += 1
        if names[start - 1] == "perf_counter":
            assert names[start - 2] == "synchronize" and names[start] == "all_reduce", "clock read before a sync"
            assert names[end] == "synchronize" and names[end + 1] == "perf_counter", "clock read before a sync"
            if a["async_op"]:
                waits = [j for j in range(i + 1, end) if names[j] == "wait" and log[j][1]["group"] == a["group"]]
                assert waits, "an all_reduce in flight was not waited for before the clock"
            else:
                assert names[i + 1] == "synchronize", "one all_reduce at a time: each finished before the next"
            assert a["group"] in warmed, "a group's first collective (communicator set-up) was timed"
            timed += 1
        else:
            assert a["group"] not in warmed, "one warm-up per group"
            later = [n for n in names[i + 1:] if n in ("synchronize", "perf_counter")]
            assert later[:1] == ["synchronize"], "the warm-up must finish before the clock is read"
            warmed.add(a["group"])
    assert timed and warmed == mine
    assert any(a["async_op"] for a in log.calls("all_reduce")), "the buckets in flight were not timed"


def check_events_complete_before_read(log: Log) -> None:
    """Events are timing events, both ends recorded, and the GPU synchronised before elapsed_time."""
    names, recorded, reads = log.names(), {}, 0
    assert all(a["enable_timing"] for a in log.calls("Event"))
    for i, (name, a) in enumerate(log):
        if name == "record":
            recorded[a["id"]] = i
        elif name == "elapsed_time":
            last = max(recorded[a["start"]], recorded[a["end"]])
            assert "synchronize" in names[last + 1:i], "elapsed_time read before synchronize"
            reads += 1
    assert reads


def check_torn_down(log: Log) -> None:
    dist_calls = [n for n in log.names() if n in DIST_CALLS]
    assert dist_calls.count("destroy_process_group") == 1 and dist_calls[-1] == "destroy_process_group"


# ----------------------------------------------------------------------------- the profiler


def _fake_wrappers(monkeypatch, log) -> None:
    """The profile's wrapped Decent-DP and DDP iterations (profiler/wrapped.py) with recording stand-ins: the
    real classes need real GPUs; what is checked here is that the wrapped iterations keep the protocol
    (their barriers and DDP's device ids name this rank's device) and that their samples reach the document."""
    import torch

    timed = pytest.importorskip("rtmodel_decentdp.timed")

    class FakeTimedDecentDP(torch.nn.Module):
        def __init__(self, model, optim_fn, topology, bucket_size_in_mb, _local_world_size, **kw):
            super().__init__()
            self.model, self.optim = model, optim_fn(list(model.named_parameters()))
            self.step_work_s: list[float] = []
            log.add("DecentralizedDataParallel", topology=topology)

        def forward(self, *args):
            self.step_work_s.append(1e-3)
            return self.model(*args)

        def flush(self) -> None:
            pass

    monkeypatch.setattr(timed, "TimedDecentralizedDataParallel", FakeTimedDecentDP)

    class FakeDDP(torch.nn.Module):
        """The profile's DDP-wrapped iterations: DDP must name this rank's GPU and skip its exchanges."""

        def __init__(self, module, device_ids=None, bucket_cap_mb=None, gradient_as_bucket_view=False, **kw):
            super().__init__()
            self.module = module
            self.gradient_as_bucket_view = gradient_as_bucket_view  # as torch's DDP keeps it
            log.add("DistributedDataParallel", device_ids=device_ids)

        def register_comm_hook(self, state, hook) -> None:
            log.add("register_comm_hook", hook=hook.__name__)

        def forward(self, *args):
            return self.module(*args)

    monkeypatch.setattr(torch.nn.parallel, "DistributedDataParallel", FakeDDP)


def _profile(tmp_path, monkeypatch, log) -> dict:
    from profiler.options import ProfileOptions
    from profiler.rank import run_rank

    _fake_wrappers(monkeypatch, log)
    return run_rank(ProfileOptions(out=str(tmp_path / "p.json"), model="mlp", model_args=SMALL_MLP,
                                   batch_per_rank=2, quick=True, ranks_per_node=2, timeout_s=77, progress=False))


def check_profile_protocol(log: Log) -> None:
    check_bound_init(log, 77)
    check_barriers_name_device(log)
    check_timed_all_reduces(log)
    check_events_complete_before_read(log)
    assert log.calls("zeros") and all(_cuda(a["device"]) == _cuda(GPU) for a in log.calls("zeros"))
    built = [_cuda(a["device"]) for a in log.calls("build_workload")]  # the bare model, DDP's fresh one
    assert len(built) == 2 and all(d == _cuda(GPU) for d in built)
    assert [_cuda(a["device"]) for a in log.calls("get_device_name")] == [_cuda(GPU)]
    check_torn_down(log)


@pytest.mark.cluster
def test_profiler_rank_follows_the_cuda_nccl_protocol(gpu, tmp_path, monkeypatch):
    doc = _profile(tmp_path, monkeypatch, gpu)
    check_profile_protocol(gpu)
    assert gpu.calls("DecentralizedDataParallel") == [{"topology": "ring"}]
    assert gpu.calls("DistributedDataParallel") == [{"device_ids": [GPU]}]
    assert gpu.calls("register_comm_hook") == [{"hook": "noop_hook"}]
    for key in ("gossip_step_s", "ddp_forward_s", "ddp_backward_s", "ddp_optimizer_s"):
        assert all(len(rank) > 0 for rank in doc["compute"][key]), key
    assert doc["complete"] and doc["shape"]["device"] == "cuda" and doc["shape"]["backend"] == "nccl"
    assert doc["shape"]["device_name"] == "Fake GPU" and doc["shape"]["nccl_version"] == "2.21.5"


def _no_sync(*args, **kwargs) -> None:
    return None


@pytest.mark.cluster
@pytest.mark.parametrize("target, attr, replacement", [
    ("profiler.comm", "sync", _no_sync),  # a timed all-reduce without synchronize
    ("profiler.compute", "Clock.sync", _no_sync),  # elapsed_time before the events completed
    ("rtmodel_harness.distributed", "device_index", lambda: 0),  # the wrong GPU
])
@pytest.mark.slow
def test_protocol_checks_catch_a_slip(gpu, tmp_path, monkeypatch, target, attr, replacement):
    """The checks above are not vacuous: each slip in the real code makes them fail."""
    import importlib

    obj = importlib.import_module(target)
    *owner, name = attr.split(".")
    for part in owner:
        obj = getattr(obj, part)
    monkeypatch.setattr(obj, name, replacement)
    _profile(tmp_path, monkeypatch, gpu)
    with pytest.raises(AssertionError):
        check_profile_protocol(gpu)


@pytest.mark.cluster
@pytest.mark.parametrize("env, index", [({}, GPU), ({"RTMODEL_DEVICE_INDEX": "0"}, 0)])
def test_device_comes_from_local_rank_or_the_launchers_index(gpu, monkeypatch, env, index):
    from rtmodel_harness.distributed import init_distributed

    for var, value in env.items():
        monkeypatch.setenv(var, value)
    assert init_distributed("auto", 30) == ("nccl", _cuda(index))
    check_bound_init(gpu, 30, index)


@pytest.mark.cluster
@pytest.mark.parametrize("cuda, requested", [(False, "auto"), (True, "gloo")])
def test_gloo_binds_no_device(gpu, monkeypatch, cuda, requested):
    from rtmodel_harness.distributed import init_distributed

    log = Log()
    _install(monkeypatch, log, cuda=cuda, backend="gloo")
    backend, device = init_distributed(requested, 30)
    assert backend == "gloo" and device.type == ("cuda" if cuda else "cpu")
    assert log.calls("init_process_group") == [{"backend": "gloo", "timeout": timedelta(seconds=30)}]
    assert len(log.where("set_device")) == int(cuda)


# ----------------------------------------------------------------------------- validation's ranks


@pytest.mark.cluster
def test_validation_rank_follows_the_cuda_nccl_protocol(gpu, monkeypatch):
    import torch

    ddp_mod = pytest.importorskip("decent_dp.ddp")
    from rtmodel_validation.runner import run_rank

    def fake_ddp(module, device_ids=None, **kw):
        gpu.add("DistributedDataParallel", device_ids=device_ids)
        return module

    class FakeDecentDP(torch.nn.Module):
        def __init__(self, model, optim_fn, topology, bucket_size_in_mb, _local_world_size):
            super().__init__()
            self.model, self.optim = model, optim_fn(list(model.named_parameters()))
            gpu.add("DecentralizedDataParallel", topology=topology)

        def forward(self, *args):
            return self.model(*args)

        def global_avg(self, will_revert=True, return_d2c=False):
            return 0.0

    monkeypatch.setattr(torch.nn.parallel, "DistributedDataParallel", fake_ddp)
    monkeypatch.setattr(ddp_mod, "DecentralizedDataParallel", FakeDecentDP)
    import rtmodel_validation.preflight  # steps real tensors on the GPU: recorded here, tested in test_decentdp_preflight

    monkeypatch.setattr(rtmodel_validation.preflight, "preflight_job", lambda job, device, recipe=None: gpu.add("preflight", device=device))
    warmup, iterations = 4, 3
    from rtmodel_validation.job import RankJob

    job = RankJob.from_json(
        {"world_size": WORLD, "ranks_per_node": 2, "topology": "ring", "decent_dp_topology": "ring",
         "registered_by_rtmodel": False, "iterations": iterations, "warmup": warmup, "timeout_s": 60,
         "workload": {"model": "mlp", "model_args": SMALL_MLP, "batch_per_rank": 2, "bucket_cap_mb": 25.0}})
    reports = run_rank(job)
    from rtmodel_validation.runner import BARE_ITERATIONS, BARE_WARMUP

    check_bound_init(gpu, 60)
    check_barriers_name_device(gpu)
    check_torn_down(gpu)
    assert gpu.calls("DistributedDataParallel") == [{"device_ids": [GPU]}]
    assert [_cuda(a["device"]) for a in gpu.calls("preflight")] == [_cuda(GPU)]  # before any training
    assert gpu.names().index("preflight") < gpu.names().index("DistributedDataParallel")
    # the bare step (the drift check: rtmodel_validation/drift.py), DDP, Decent-DP: each on this rank's GPU
    assert [_cuda(a["device"]) for a in gpu.calls("build_workload")] == [_cuda(GPU)] * 3
    names = gpu.names()
    clocks = gpu.where("perf_counter")
    for i in clocks:  # the clock is read only once the GPU is idle
        assert gpu[i - 1] == ("synchronize", {"device": _cuda(GPU)})
    runs = [(BARE_WARMUP, BARE_ITERATIONS), (warmup, iterations), (warmup, iterations)]
    assert len(clocks) == sum(2 * (w + n) for w, n in runs)
    for run, barrier in enumerate(gpu.where("barrier")):  # ranks line up exactly where timing starts
        before = sum(2 * (w + n) for w, n in runs[:run]) + 2 * runs[run][0]
        assert names[:barrier].count("perf_counter") == before
    assert reports[0].device == f"cuda:{GPU}" and reports[0].backend == "nccl"
    assert len(reports[0].allreduce_s) == len(reports[0].decentralized_s) == iterations
