"""Measured inputs are bounded by physics, checked on read (issue 67): every damaged trace, nccl-tests log,
profile, preset file or scenario file below is refused in ONE line (exit 2) that names the file, the
field and the bound, never with a traceback and never after a hang; the few that are damaged only in a
way a reader can survive give their answer and say what they left out.

Each table row is one kind of damage to an otherwise valid document (tests/trace_fixtures.py's DDP
trace, tests/nccl_tests_text.py's log, tests/data/synthetic_profile_2x2.json, a preset entry): the
fuzz-ish table docs/trace.md and docs/calibration.md describe.
"""

from __future__ import annotations

import copy
import gzip
import importlib.util
import json
import shutil
from pathlib import Path

import pytest

from tests.cli_helpers import run
from tests.nccl_tests_text import SIZES, model_times, nccl_tests_output, small_network
from tests.test_presets import MODEL_LINES
from tests.trace_fixtures import REAL_A100, ddp_trace, kineto_trace

HAS_HTA = importlib.util.find_spec("hta") is not None
needs_hta = pytest.mark.skipif(not HAS_HTA, reason="the [trace] extra (holistictraceanalysis)")
PROFILE = Path(__file__).parent / "data" / "synthetic_profile_2x2.json"


def refused(res, *fragments: str) -> str:
    """The one error line of a refusal (exit 2, no traceback), holding every fragment."""
    assert res.exit_code == 2, (res.exit_code, res.output, res.exception)
    lines = (res.stderr or "").strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    assert "Traceback" not in res.output
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


# ----------------------------------------------------------------------------- traces

BASE = json.loads(ddp_trace([(1000.0, 800.0), (1100.0, 900.0), (1050.0, 850.0)]))


def _kernels(d):
    return [e for e in d["traceEvents"] if e["cat"] == "kernel"]


def _nccl(d):
    return [e for e in _kernels(d) if "nccl" in e["name"].lower()]


def _steps(d):
    return [e for e in d["traceEvents"] if e["name"].startswith("ProfilerStep")]


def _each(select, key, value):
    def change(d):
        for e in select(d):
            e[key] = value

    return change


def _arg(select, key, value):
    def change(d):
        for e in select(d):
            e["args"][key] = value

    return change


def _header(*path_and_value):
    *path, value = path_and_value

    def change(d):
        node = d
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value

    return change


def _drop(select, key):
    def change(d):
        for e in select(d):
            e.pop(key)

    return change


def _reversed(d):
    end = max(e["ts"] + e["dur"] for e in d["traceEvents"])
    for e in d["traceEvents"]:
        e["ts"] = end - e["ts"] - e["dur"]


def _replace(value):
    return lambda d: value


def _gloo_on_gpus(d):
    """A GPU run whose DDP all-reduces ran on the host (gloo): its hooks' record_param_comms calls on
    autograd's thread, no NCCL kernel."""
    d["distributedInfo"]["backend"] = "gloo"
    d["traceEvents"] = [e for e in d["traceEvents"] if "nccl" not in e["name"].lower()]
    for step in _steps(d):
        at = step["ts"] + 4000.0
        args = {"Collective name": "allreduce", "In msg nelems": 3_000_000, "dtype": "Float"}
        d["traceEvents"].append(
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": "record_param_comms",
                "pid": 1,
                "tid": 2,
                "ts": at,
                "dur": 5.0,
                "args": args,
            }  # fmt: skip
        )


# (id, change to the DDP trace, fragments of the one line: the field and its bound)
TRACE_DAMAGE = [
    ("nelems 1e30", _arg(_nccl, "In msg nelems", 1e30), "args['In msg nelems'] must be an integer in [0, 1,099,511,627,776]"),
    ("nelems 2^70", _arg(_nccl, "In msg nelems", 2**70), "an integer of 22 digits"),
    ("nelems string", _arg(_nccl, "In msg nelems", "x"), "args['In msg nelems'] must be an integer"),
    ("nelems negative", _arg(_nccl, "In msg nelems", -5), "args['In msg nelems'] must be an integer in [0,"),
    ("bytes above the GPU's memory", _arg(_nccl, "In msg nelems", 2**38), "is more than the GPU's memory (85,000,000,000 bytes)"),
    ("all-reduce faster than any link", _arg(_nccl, "In msg nelems", 2**34), "beyond any machine's links (at most 10,000 GB/s)"),
    ("dtype a number", _arg(_nccl, "dtype", 7), "args['dtype'] must be a string"),
    ("collective name a list", _arg(_nccl, "Collective name", [1]), "args['Collective name'] must be a string"),
    ("correlation a string", _arg(_kernels, "correlation", "x"), "args['correlation'] must be an integer"),
    ("stream a string", _arg(_kernels, "stream", "x"), "args['stream'] must be an integer"),
    ("args a list", _each(_kernels, "args", [1]), ".args must be an object"),
    ("time reversed", _reversed, "run backwards in time"),
    ("NaN durations", _each(_kernels, "dur", float("nan")), ".dur must be a number of us in [0, 86,400,000,000] (a day), got nan"),
    ("NaN step", _each(_steps, "dur", float("nan")), "traceEvents[0].dur must be a number of us"),
    ("infinite durations", _each(_kernels, "dur", float("inf")), ".dur must be", "got inf"),
    ("negative durations", _each(_kernels, "dur", -5.0), ".dur must be", "got -5.0"),
    ("huge durations", _each(_kernels, "dur", 1e300), ".dur must be", "got 1e+300"),
    ("all-reduce of 0 us", _each(_nccl, "dur", 0.0), "took 0 us in a world of 2"),
    ("huge timestamps", _each(_kernels, "ts", 1e300), ".ts must be a number of us within 2^53"),
    ("timestamps of 400 digits", _each(_kernels, "ts", 10**400), ".ts must be", "an integer of 401 digits"),
    ("durations of 400 digits", _each(_kernels, "dur", 10**400), ".dur must be", "an integer of 401 digits"),
    ("NaN timestamps", _each(_kernels, "ts", float("nan")), ".ts must be", "got nan"),
    ("string timestamps", _each(_kernels, "ts", "x"), ".ts must be", "got 'x'"),
    ("no timestamps", _drop(_kernels, "ts"), ".ts must be", "got None"),
    ("no names", _drop(_kernels, "name"), ".name must be a string, got None"),
    ("names numbers", _each(_kernels, "name", 5), ".name must be a string, got 5"),
    ("categories numbers", _each(_kernels, "cat", 5), ".cat must be a string, got 5"),
    ("pid a list", _each(_kernels, "pid", [1]), ".pid must be an integer or a string, got a list"),
    ("step number huge", lambda d: [s.__setitem__("name", f"ProfilerStep#{10**30}") for s in _steps(d)] and None, ".name must be ProfilerStep#N with N at most 2^53"),
    ("world size 0", _header("distributedInfo", "world_size", 0), "distributedInfo.world_size must be an integer in [1, 16,777,216], got 0"),
    ("world size a string", _header("distributedInfo", "world_size", "x"), "distributedInfo.world_size must be", "got 'x'"),
    ("world size null", _header("distributedInfo", "world_size", None), "distributedInfo.world_size must be", "got None"),
    ("world size 1e300", _header("distributedInfo", "world_size", 1e300), "distributedInfo.world_size must be", "got 1e+300"),
    ("world size negative", _header("distributedInfo", "world_size", -2), "distributedInfo.world_size must be", "got -2"),
    ("rank true", _header("distributedInfo", "rank", True), "distributedInfo.rank must be an integer in [0, 1], got True"),
    ("rank beyond the world", _header("distributedInfo", "rank", 2), "distributedInfo.rank must be an integer in [0, 1], got 2"),
    ("distributedInfo a list", _header("distributedInfo", [1]), "distributedInfo must be an object, got a list"),
    ("backend a number", _header("distributedInfo", "backend", 5), "distributedInfo.backend must be a string"),
    ("nccl_version a list", _header("distributedInfo", "nccl_version", [1]), "distributedInfo.nccl_version must be a string"),
    ("deviceProperties a string", _header("deviceProperties", "x"), "deviceProperties must be a list of at most 1,024 GPUs"),
    ("GPU name a number", lambda d: d["deviceProperties"][0].__setitem__("name", 5), "deviceProperties[0].name must be a string"),
    ("GPU memory a string", lambda d: d["deviceProperties"][0].__setitem__("totalGlobalMem", "x"), "deviceProperties[0].totalGlobalMem must be an integer in [0, 1,099,511,627,776]"),
    ("GPU memory 1e300", lambda d: d["deviceProperties"][0].__setitem__("totalGlobalMem", 1e300), "deviceProperties[0].totalGlobalMem must be"),
    ("GPU memory negative", lambda d: d["deviceProperties"][0].__setitem__("totalGlobalMem", -1), "deviceProperties[0].totalGlobalMem must be"),
    ("base time a string", _header("baseTimeNanoseconds", "x"), "baseTimeNanoseconds must be a number of ns in [0, 2^63)"),
    ("base time 1e300", _header("baseTimeNanoseconds", 1e300), "baseTimeNanoseconds must be"),
    ("host name a list", _header("host_name", [1]), "host_name must be a string, got a list"),
    ("traceEvents a string", _header("traceEvents", "x"), "traceEvents is a string, not a list"),
    ("no traceEvents", lambda d: d.pop("traceEvents") and None, "no traceEvents list"),
    ("events numbers", _header("traceEvents", [1, 2, 3]), "traceEvents[0] must be an object (an event), got 1"),
    ("an event null", lambda d: d["traceEvents"].append(None), "must be an object (an event), got None"),
    ("no event timed", _header("traceEvents", [{"ph": "i", "name": "x"}]), "none of its 1 events has a duration"),
    ("top level a list", lambda d: [d], "its top level is a list"),
    ("top level a number", _replace(5), "its top level is a number"),
    ("top level a string", _replace("x"), "its top level is a string"),
    ("gloo on GPUs", _gloo_on_gpus, "ran no NCCL kernel on the GPU in a world of 2"),
    ("no all-reduce", lambda d: d.__setitem__("traceEvents", [e for e in d["traceEvents"] if "nccl" not in e["name"].lower()]), "no DDP gradient all-reduce"),
]  # fmt: skip


@needs_hta
@pytest.mark.parametrize(
    ("change", "fragments"), [(c[1], c[2:]) for c in TRACE_DAMAGE], ids=[c[0] for c in TRACE_DAMAGE]
)
def test_a_damaged_trace_is_one_line_naming_the_file_and_field(tmp_path, change, fragments):
    doc = copy.deepcopy(BASE)
    out = change(doc)
    doc = doc if out is None else out
    path = tmp_path / "rank0.json"
    path.write_text(json.dumps(doc))
    refused(run("advise", "--trace", path, "--gpus", "8"), f"--trace {path}", *fragments)


@needs_hta
@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ('{"traceEvents": ' + "[" * 1500 + "]" * 1500 + "}", "nested too deeply"),
        ("[" * 100_000, "nested too deeply"),
        (json.dumps(BASE)[:5000], "not a readable torch.profiler trace"),
        ("", "not a readable torch.profiler trace"),
    ],
    ids=["1,500 levels", "100,000 levels", "truncated", "empty"],
)
def test_deep_nesting_and_truncation_are_one_line(tmp_path, text, fragment):
    path = tmp_path / "rank0.json"
    path.write_text(text)
    refused(run("advise", "--trace", path, "--gpus", "8"), f"--trace {path}", fragment)


@needs_hta
def test_more_steps_than_a_schedule_records_are_refused_before_matching_them(tmp_path, monkeypatch):
    path = tmp_path / "rank0.json"
    path.write_text(kineto_trace(steps=5000))
    _never(monkeypatch, "hta_parse")  # HTA matches every event against every step: refused before it
    refused(run("advise", "--trace", path, "--gpus", "8"), "5,000 ProfilerStep spans", "at most 1,000")


def _never(monkeypatch, name: str) -> None:
    """Make trace_document's `name` fail the test if the command calls it (what a refusal must precede)."""
    from calibration.trace import trace_document

    def called(*_args, **_kwargs):
        raise AssertionError(f"{name} ran before the refusal")

    monkeypatch.setattr(trace_document, name, called)


@needs_hta
def test_a_kernel_before_its_launch_is_a_re_timed_file(tmp_path):
    """One step, so no step order to check: its kernel starts before the host launched it."""
    doc = json.loads(kineto_trace(steps=1))
    _reversed(doc)
    path = tmp_path / "rank0.json"
    path.write_text(json.dumps(doc))
    refused(run("advise", "--trace", path, "--gpus", "8"), "start before the host launched them")


@needs_hta
def test_a_gz_bomb_is_refused_at_the_cap_without_holding_it(tmp_path, monkeypatch):
    """A few KB inflating past the cap (2 GiB; lowered here to keep the test cheap) is refused as it
    inflates, naming the cap."""
    from calibration.trace import trace_errors

    monkeypatch.setattr(trace_errors, "MAX_DOCUMENT_BYTES", 1 << 20)
    path = tmp_path / "rank0.json.gz"
    with gzip.open(path, "wb") as stream:
        stream.write(b'{"traceEvents": [' + b" " * (8 << 20) + b"]}")
    assert path.stat().st_size < 20_000
    refused(
        run("advise", "--trace", path, "--gpus", "8"),
        f"--trace {path}: inflates past the cap",
        "at most 1,048,576 bytes",
    )
    plain = tmp_path / "big.json"
    plain.write_bytes(b" " * (2 << 20))
    refused(run("advise", "--trace", plain, "--gpus", "8"), "more than a trace reader holds")


@needs_hta
def test_a_file_given_twice_or_copied_is_refused_before_any_parse(tmp_path, monkeypatch):
    _never(monkeypatch, "read_document")  # nothing read as a trace: 200 parses of it took over two minutes
    res = run("advise", *(["--trace", REAL_A100] * 200), "--gpus", "8")
    refused(res, "are the same file")
    copy_of = tmp_path / "copy.json.gz"
    shutil.copy(REAL_A100, copy_of)
    refused(run("advise", "--trace", REAL_A100, "--trace", copy_of, "--gpus", "8"), "are copies of one file")


@needs_hta
def test_a_valid_trace_at_the_largest_n_is_answered(tmp_path):
    """2^24 GPUs from a trace (a ZeroDivisionError in the slowest-rank tail before): an answer."""
    path = tmp_path / "rank0.json"
    path.write_text(json.dumps(BASE))
    res = run("advise", "--trace", path, "--gpus", str(1 << 24), "--gpus-per-node", "8", "--format", "json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["inputs"]["traced_shape"] == {"gpus": 2, "gpus_per_node": 2}


# ----------------------------------------------------------------------------- nccl-tests


def _log(times=None, **kw) -> str:
    return nccl_tests_output(times or {s: 100.0 + s / 10e3 for s in SIZES}, **kw)


def _cell(text: str, size: int, column: int, value: str) -> str:
    """The log with one out-of-place cell of `size`'s row replaced (column 0: time, 1: algbw, 2: busbw)."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        words = line.split()
        if words and words[0] == str(size):
            words[5 + column] = value
            lines[i] = " ".join(words)
    return "\n".join(lines) + "\n"


TOP = SIZES[-1]
NCCL_DAMAGE = [
    ("size x 2^64", _log({**{s: 100.0 + s / 10e3 for s in SIZES}, 1 << 64: 100.0}), "a size of 18,446,744,073,709,551,616 B overflows"),
    ("size of 5,000 digits", _log().replace(f"{TOP:12d}", "9" * 5000, 1), "a size of 5000 digits overflows"),
    ("size negative", _log({**{s: 100.0 + s / 10e3 for s in SIZES}, -(1 << 31): 100.0}), "overflows"),
    ("busbw 10 PB/s", _cell(_log(), TOP, 2, "1e7"), "busbw 1e+07 GB/s", "beyond any machine (a number in [0, 10,000] GB/s)"),
    ("algbw NaN", _cell(_log(), TOP, 1, "nan"), "algbw nan GB/s", "[0, 10,000] GB/s"),
    ("busbw negative", _cell(_log(), TOP, 2, "-5"), "busbw -5 GB/s"),
    ("time NaN", _cell(_log(), TOP, 0, "nan"), "a time of nan us", "more than 0, at most 3,600,000,000 us"),
    ("time 0", _cell(_log(), TOP, 0, "0.0"), "a time of 0 us"),
    ("time negative", _cell(_log(), TOP, 0, "-3.5"), "a time of -3.5 us"),
    ("time 1e300", _cell(_log(), TOP, 0, "1e300"), "a time of 1e+300 us"),
    ("size / time above 10 TB/s", _cell(_log(), TOP, 0, "0.01"), "us (", "GB/s) is beyond any machine (at most 10,000 GB/s)"),
    ("every size wrong", _log(wrong=dict.fromkeys(SIZES, "1")), "nccl-tests marked every size wrong"),
    ("a run's rows twice, no header between", _log() + "".join(row + "\n" for row in _log().splitlines() if row[:1].isspace()), "has 2 rows in one run"),
    ("runs of two shapes", _log() + _log(model_times(small_network("auto"), 8, 2), ranks=8, hosts=2), "runs of different shapes"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("text", "fragments"), [(c[1], c[2:]) for c in NCCL_DAMAGE], ids=[c[0] for c in NCCL_DAMAGE]
)
def test_a_damaged_nccl_tests_log_is_one_line_naming_the_file_and_bound(tmp_path, text, fragments):
    path = tmp_path / "all_reduce.txt"
    path.write_text(text)
    refused(run("advise", "--gpus", "16", "--nccl-tests", path), f"--nccl-tests {path}", *fragments)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (_log(wrong={TOP: "12"}), "1 size(s) nccl-tests marked wrong (#wrong / error) are not fitted"),
        (_log(layout="old", wrong={SIZES[0]: "3e-02"}), "1 size(s) nccl-tests marked wrong"),
        (
            _cell(_log(wrong={TOP: "3"}), TOP, 2, "1e7"),
            "1 size(s) nccl-tests marked wrong",
        ),  # wrong: left out
        (_log() + _log(), "the last complete of its 2 all_reduce_perf runs (run 2; not blended"),
    ],
    ids=["#wrong", "old error column", "a wrong row beyond any machine", "two runs"],
)
def test_rows_marked_wrong_and_several_runs_are_left_out_and_said(tmp_path, text, said):
    path = tmp_path / "all_reduce.txt"
    path.write_text(text)
    res = run("advise", "--gpus", "16", "--nccl-tests", path)
    assert res.exit_code == 0, res.output
    assert said in res.stderr


# ----------------------------------------------------------------------------- profiles


def _profile(change) -> dict:
    doc = json.loads(PROFILE.read_text())
    change(doc)
    return doc


def _scaled(key, factor, drop_param_bytes=False):
    def change(d):
        d["workload"][key] = [b * factor for b in d["workload"][key]]
        if drop_param_bytes:
            d["workload"].pop("param_bytes")

    return change


def _result(key, value):
    return lambda d: d["communication"]["patterns"][0]["results"][0].__setitem__(key, value)


PROFILE_DAMAGE = [
    ("ddp buckets 1e13", lambda d: d["workload"]["ddp_buckets_bytes"].__setitem__(1, 10**13), "workload.ddp_buckets_bytes[1] must be at most 1,099,511,627,776"),
    ("ddp buckets x 1e4", _scaled("ddp_buckets_bytes", 10**4), "workload.ddp_buckets_bytes sum to", "more than the model's gradients hold (workload.param_bytes"),
    ("gossip buckets x 1e4", _scaled("gossip_buckets_bytes", 10**4), "workload.gossip_buckets_bytes sum to"),
    ("ddp buckets x 1e4, no param_bytes", _scaled("ddp_buckets_bytes", 10**4, True), "agree within 2x"),
    ("param_bytes 400 digits", lambda d: d["workload"].__setitem__("param_bytes", 10**400), "workload.param_bytes must be an integer in [0,", "an integer of 401 digits"),
    ("world size 1e30", lambda d: d["shape"].__setitem__("world_size", 10**30), "shape.world_size must be an integer in [1,"),
    ("batch 1e30", lambda d: d["workload"].__setitem__("batch_per_rank", 10**30), "workload.batch_per_rank must be an integer"),
    ("bucket cap 1e300", lambda d: d["workload"].__setitem__("bucket_cap_mb", 1e300), "workload.bucket_cap_mb must be in (0, 1e+06)"),
    ("a collective at 1 PB/s", lambda d: _result("samples_s", [1e-12] * len(d["communication"]["patterns"][0]["results"][0]["samples_s"]))(d), "communication.patterns[0].results[0] moved", "beyond any machine's links (at most 10,000 GB/s)"),
    ("median NaN", _result("median_s", float("nan")), "communication.patterns[0].results[0].median_s must be a finite number"),
    ("algbw 1e300", _result("algbw_Bps", 1e300), "results[0].algbw_Bps must be a finite number within 1e+15"),
    ("forward 400 digits", lambda d: d["compute"]["forward_s"][0].__setitem__(0, 10**400), "compute.forward_s[0][0] is an integer of 401 digits s, more than a day"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("change", "fragments"), [(c[1], c[2:]) for c in PROFILE_DAMAGE], ids=[c[0] for c in PROFILE_DAMAGE]
)
def test_a_profile_beyond_physics_is_one_line_naming_the_field(tmp_path, change, fragments):
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(_profile(change)))
    refused(run("advise", "--profile", path, "--gpus", "16"), str(path), *fragments)


# ----------------------------------------------------------------------------- presets and scenario files

GPU = """[G]
tflops = { fp32 = 19.5 }
memory_bandwidth_GBps = 1555
memory_GiB = 40
default_precision = "fp32"
mfu = { fp32 = 0.4 }
memory_efficiency = 0.9
dispatch_us = 10
source = "test"
"""
LINK = '[inter.n]\ndescription = "n"\nbandwidth_Gbps = 100\nlatency_us = 5\nefficiency = 0.9\nsource = "s"\n'
CLUSTER = '[c]\ngpu = "A100"\ngpus_per_node = 8\nintra = "pcie4"\nnetwork = "ib-100"\nnics_per_node = 1\nsource = "s"\n'
MODEL = MODEL_LINES.lstrip("\n")  # the smallest valid model preset, shared with test_presets
PASS = '[optimizer.o]\nbytes_per_param = 16\nhost_ops = 2\nsource = "s"\n'
PRESET_DAMAGE = [
    ("memory_efficiency 1e-9", "gpus.toml", GPU.replace("memory_efficiency = 0.9", "memory_efficiency = 1e-9"), "[G]: memory_efficiency must be in (0.05, 1]"),
    ("efficiency 1e-6", "networks.toml", LINK.replace("efficiency = 0.9", "efficiency = 1e-6"), "[inter.n]: efficiency must be in (0.05, 1]"),
    ("train FLOPs 1e300", "models.toml", MODEL.replace("train_flops_per_unit = 1e9", "train_flops_per_unit = 1e300"), "[m]: train_flops_per_unit must be in [1000, 1e+18]"),
    ("train FLOPs 1e-300", "models.toml", MODEL.replace("train_flops_per_unit = 1e9", "train_flops_per_unit = 1e-300"), "train_flops_per_unit must be in [1000, 1e+18]"),
    ("ops 1e300", "models.toml", MODEL.replace("forward_ops = { amp = 10", "forward_ops = { amp = 1e300"), "forward_ops.amp must be in [0, 1e+07]"),
    ("bytes per unit 1e300", "models.toml", MODEL.replace("forward_bytes_per_unit = { amp = 1e6", "forward_bytes_per_unit = { amp = 1e300"), "forward_bytes_per_unit.amp must be in [0, 1e+12]"),
    ("global batch 1e-300", "models.toml", MODEL.replace("default_global_batch = 8", "default_global_batch = 1e-300"), "default_global_batch must be in [1, 1e+10]"),
    ("params 400 digits", "models.toml", MODEL.replace("params = 10\n", f"params = {'9' * 400}\n"), "params must be an integer in [1, 1e+11]", "an integer of 400 digits"),
    ("gpus_per_node 1e6", "clusters.toml", CLUSTER.replace("gpus_per_node = 8", "gpus_per_node = 1000000"), "[c]: gpus_per_node must be an integer in [1, 1024]"),
    ("nics_per_node 1000", "clusters.toml", CLUSTER.replace("nics_per_node = 1", "nics_per_node = 1000"), "[c]: nics_per_node must be an integer in [1, 64]"),
    ("defaults gpus_per_node 0", "defaults.toml", "gpus_per_node = 0\n", "gpus_per_node must be an integer in [1, 1024]"),
    ("bytes per param 1e9", "traffic.toml", PASS.replace("bytes_per_param = 16", "bytes_per_param = 1e9"), "[optimizer.o]: bytes_per_param must be in [0, 1024]"),
    ("host ops 1e300", "traffic.toml", PASS.replace("host_ops = 2", "host_ops = 1e300"), "host_ops must be in [0, 1e+06]"),
    ("nested 100,000 levels", "gpus.toml", "x = " + "[" * 100_000 + "]" * 100_000 + "\n", "nested too deeply to be a preset file"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("file", "text", "fragments"),
    [c[1:3] + (c[3:],) for c in PRESET_DAMAGE],
    ids=[c[0] for c in PRESET_DAMAGE],
)
def test_a_preset_beyond_physics_is_one_line_naming_the_file_and_key(tmp_path, file, text, fragments):
    (tmp_path / file).write_text(text)
    refused(run("advise", "--gpus", "8", "--presets", tmp_path), str(tmp_path / file), *fragments)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        (
            f"params = {'9' * 400}\ncompute_ms = 100\n",
            "'params' must be a number within a float's range, got an integer of 400 digits",
        ),
        (
            f"gpus = {'9' * 400}\n",
            "'gpus' must be an integer >= 1 (and within a float's range), got an integer of 400 digits",
        ),
        (
            f"param_mb = -{'9' * 400}\ncompute_ms = 100\n",
            "'param_mb' must be a number within a float's range",
        ),
        ("compute_ms = 1e400\n", "'compute_ms' must be in [0.001, 8.64e+07], got inf"),
        ("x = " + "[" * 100_000 + "]" * 100_000 + "\n", "nested too deeply"),
    ],
    ids=["params 400 digits", "gpus 400 digits", "param_mb 400 digits", "compute_ms inf", "nested"],
)
def test_a_scenario_files_number_beyond_a_float_is_one_line(tmp_path, text, fragment):
    path = tmp_path / "team.toml"
    path.write_text(text)
    refused(run("advise", "--scenario", path), f"--scenario {path}", fragment)


# ----------------------------------------------------------------------------- --quiet


@pytest.mark.cluster
@pytest.mark.slow
def test_profile_quiet_with_a_trace_prints_nothing_of_kinetos(tmp_path):
    """Kineto's `USDT: ... profiler_start` lines (torch.profiler's C++ side, on the ranks' stdout) are
    silenced under --quiet (profiler/trace_out.KINETO_QUIET_LEVEL), and the traces are still written."""
    import os
    import subprocess
    import sys

    pytest.importorskip("torch")
    env = {k: v for k, v in os.environ.items() if k != "KINETO_LOG_LEVEL"}
    argv = ["profile", "--quick", "--quiet", "--out", tmp_path / "p.json", "--trace-out", tmp_path / "traces"]
    done = subprocess.run(
        [sys.executable, "-m", "rtmodel_cli", *map(str, argv)], capture_output=True, text=True, env=env,
        timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "USDT" not in done.stdout + done.stderr and "STAGE" not in done.stdout + done.stderr
    assert sorted(p.name for p in (tmp_path / "traces").iterdir()) == [
        "rank0.pt.trace.json.gz",
        "rank1.pt.trace.json.gz",
    ]
