"""The bad-input corpus: every verb, the mistakes a careful user makes, each answered the same way.

Each case must exit 2 (a user error), print one line on stderr that starts with "error:" and names
the problem (the `names` fragment: usually the flag), show no traceback, and leave the working
directory exactly as it was (nothing written, nothing lost). All cases are offline and need no root:
checks happen before any rank, namespace or file is created.
"""

from __future__ import annotations

import importlib.util
import json
import os
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rtmodel_cli.app import app
from tests.nccl_tests_text import nccl_tests_output
from tests.trace_fixtures import DAY_NS, kineto_trace, truncated_real_trace

ROOT = Path(__file__).parent.parent
PROFILE = ROOT / "tests" / "data" / "synthetic_profile_2x2.json"
runner = CliRunner()


@dataclass(frozen=True)
class Case:
    argv: tuple[str, ...]
    names: str  # a fragment the error line must contain (case-insensitive)

    @property
    def id(self) -> str:
        return " ".join(self.argv)[:70]


def case(names: str, *argv: str) -> Case:
    return Case(tuple(argv), names)


def _bad_group_samples() -> str:
    """The profile with one group's own time not a number (the profiler's group_samples_s)."""
    doc = json.loads(PROFILE.read_text())
    doc["communication"]["patterns"][1]["results"][0]["group_samples_s"] = [[0.1, "x"]]
    return json.dumps(doc)


def _impossible(change) -> str:
    """The profile with one physically impossible value (`change` edits the parsed document)."""
    doc = json.loads(PROFILE.read_text())
    change(doc)
    return json.dumps(doc)


def _zero_compute(doc):
    doc["compute"]["forward_s"][1] = [0.0] * len(doc["compute"]["forward_s"][1])
    doc["compute"]["backward_s"][1] = [0.0] * len(doc["compute"]["backward_s"][1])


def _ddp_rows(keys, ranks=None):
    """The profile with DDP-wrapped phases under `keys` (each the bare phase's rows, `ranks` of them)."""

    def change(doc):
        c = doc["compute"]
        for key in keys:
            c[key] = c[key.removeprefix("ddp_")][:ranks]

    return change


def _pattern(key, value):
    return lambda doc: doc["communication"]["patterns"][0].__setitem__(key, value)


# Files each case may refer to, made in the working directory before it runs: a profile, a corrupt
# profile, one with a bad group sample, an existing result the failed command must not touch, a
# directory, and two bad scenario files.
FIXTURES = {
    "profile.json": PROFILE.read_text(),
    "bad-group.json": _bad_group_samples(),
    "uneven-in-flight.json": _impossible(
        lambda d: d["communication"].__setitem__(
            "in_flight",
            [{"pattern": "all", "buckets_bytes": [4096], "one_at_a_time_s": [0.1], "in_flight_s": [0.1, 0.2]}],
        )
    ),
    "uneven-two-groups.json": _impossible(
        lambda d: d["communication"].__setitem__(
            "in_flight",
            [{"pattern": "pair-intra", "buckets_bytes": [4096], "one_at_a_time_s": [0.1], "in_flight_s": [0.1],
              "two_groups_s": [0.1, 0.2]}],
        )
    ),  # fmt: skip
    "bad-in-flight.json": _impossible(
        lambda d: d["communication"].__setitem__(
            "in_flight",
            [{"pattern": "all", "buckets_bytes": [4096], "one_at_a_time_s": [0.1], "in_flight_s": [-0.1]}],
        )
    ),
    "corrupt.json": '{"schema": "rtmodel-profile/1", "cluster": ',
    "params.json": '{"kept": true}\n',
    "notes.txt": "not a profile\n",
    # documents no JSON reader should meet with a traceback (one loader for all: rtmodel_util/json_document)
    "deep.json": '{"tool": ' + "[" * 100_000 + "]" * 100_000 + "}",
    "huge-int.json": PROFILE.read_text().replace('"batch_per_rank": ', '"batch_per_rank": ' + "9" * 5000 + ", \"x\": ", 1),
    "long-reason.json": _impossible(lambda d: d["shape"].__setitem__("unmeasured_links", {"inter": "x" * 1000})),
    "huge-string.json": _impossible(lambda d: d["workload"].__setitem__("model", "m" * 1_000_000)),
    "surrogate.json": _impossible(lambda d: d["workload"].__setitem__("model", "evil\udc80")),
    "nan-profile.json": PROFILE.read_text().replace('"batch_per_rank": ', '"batch_per_rank": NaN, "x": ', 1),
    "true-schema.json": _impossible(lambda d: d.__setitem__("schema_version", True)),
    "deep-scenario.json": '{"gpus": ' + "[" * 100_000 + "]" * 100_000 + "}",
    "profile.png": PROFILE.read_text(),  # inputs a user named like figures: a plot must not replace them
    "results.png": "",
    # an nccl-tests all_reduce_perf output whose 8 ranks ran on one host: it measured no network
    "one-host.txt": nccl_tests_output({(1 << 20) << i: 50.0 + ((1 << 20) << i) / 9e4 for i in range(8)}, 8, 1),
    # torch.profiler traces with one thing wrong each (tests/trace_fixtures.py); the truncated one is binary
    "trace-cpu-only.json": kineto_trace(gpu=None),
    "trace-no-steps.json": kineto_trace(step_spans=False),
    "trace-two-processes.json": kineto_trace(pids=(1, 2)),
    "trace-mi300.json": kineto_trace(gpu="AMD Instinct MI300X"),
    "trace-unlinked.json": kineto_trace(linked=False),
    "trace-rank0.json": kineto_trace(world=2),
    "trace-rank0-again.json": kineto_trace(world=2, base_ns=1_700_000_000 * 10**9 + 1000),
    "trace-rank1-next-day.json": kineto_trace(rank=1, world=2, base_ns=1_700_000_000 * 10**9 + DAY_NS),
    "trace-not-json.txt": "a trace\n",
    # issue 67: outputs that would destroy an input or a file of another kind, and measured absurdities
    "fast.txt": nccl_tests_output({(1 << 20) << i: 1e-3 for i in range(8)}, 16, 2),  # 1 GiB in 1 ns
    "nt.png": nccl_tests_output({(1 << 20) << i: 50.0 + ((1 << 20) << i) / 9e4 for i in range(8)}, 8, 1),
    "nt-scenario.toml": 'nccl_tests = "nt.png"\n',
    "not-results.json": '{"a": 1}\n',
    "unknown-key.toml": "gpu_count = 64\n",
    "wrong-type.toml": 'gpus = "64"\n',
    "zero-params.toml": "params = 0\ncompute_ms = 100\n",
    "nan-params.toml": "params = nan\ncompute_ms = 100\n",
    "huge-params.toml": "params = 1e30\ncompute_ms = 100\n",
    "text-params.toml": 'params = "1e8"\ncompute_ms = 100\n',
    "bad-param-mb.toml": "param_mb = -1\ncompute_ms = 100\n",
    "both-sizes.toml": "params = 1e8\nparam_mb = 256\ncompute_ms = 100\n",
    "params-and-model.toml": 'params = 1e8\nmodel = "resnet50"\ncompute_ms = 100\n',
    "params-alone.toml": "params = 1e8\n",
    "params-profile.toml": 'params = 1e8\ncompute_ms = 100\nprofile = "profile.json"\n',
    "calibration.toml": 'calibration = "profile.json"\n',  # a profile is no calibration file
    # a profile of a model that does not build on the meta device (its activations are estimated there)
    "badmodel.py": "def make(**kw):\n    raise RuntimeError('needs a real GPU')\n",
    "badmodel-profile.json": PROFILE.read_text().replace('"model": "synthetic"', '"model": "badmodel:make"', 1),
    "bad-objective.toml": 'objective = "fastest"\n',
    "number-objective.toml": "objective = 1\n",
    "tiny-dispatch.toml": "dispatch_us = 0.01\n",
    "text-dispatch.toml": 'dispatch_us = "30"\n',
    "unused-dispatch.toml": "dispatch_us = 30\ncompute_ms = 100\noptimizer_ms = 4\n",
    "text-bucket-view.toml": 'ddp_bucket_view = "yes"\n',
    "zero-compute.json": _impossible(_zero_compute),
    "day-long-step.json": _impossible(lambda d: d["compute"]["backward_s"][0].__setitem__(0, 1e30)),
    "huge-bucket.json": _impossible(lambda d: d["workload"]["ddp_buckets_bytes"].__setitem__(0, 10**300)),
    "ghost-ranks.json": _impossible(_pattern("group_size", 64)),
    "half-ddp.json": _impossible(_ddp_rows(("ddp_forward_s", "ddp_backward_s"))),
    "null-ddp-backward.json": _impossible(
        lambda d: (_ddp_rows(("ddp_forward_s", "ddp_backward_s", "ddp_optimizer_s"))(d),
                   d["compute"].__setitem__("ddp_backward_s", None))
    ),
    "day-long-ddp.json": _impossible(
        lambda d: (_ddp_rows(("ddp_forward_s", "ddp_backward_s", "ddp_optimizer_s"))(d),
                   d["compute"].__setitem__("ddp_backward_s", [[86400.0] * len(r) for r in d["compute"]["backward_s"]]))
    ),
    "null-ddp-forward.json": _impossible(
        lambda d: (_ddp_rows(("ddp_forward_s", "ddp_backward_s", "ddp_optimizer_s"))(d),
                   d["compute"].__setitem__("ddp_forward_s", None))
    ),
    "short-ddp.json": _impossible(_ddp_rows(("ddp_forward_s", "ddp_backward_s", "ddp_optimizer_s"), ranks=1)),
    "ghost-nodes.json": _impossible(_pattern("nodes_spanned", 9)),
    "ghost-groups.json": _impossible(_pattern("concurrent_groups", 5)),
}
# Special files (made by the fixture): reading a FIFO blocks, renaming over one replaces it.
FIFOS = ("pipe.toml", "pipe.jsonl", "pipe.json", "pipe.png")

CASES = [
    # advise: the cluster
    case("--gpus", "advise", "--gpus", "0"),
    case("--gpus", "advise", "--gpus", "-4"),
    case("--gpus", "advise", "--gpus", "1000000000000"),
    case("--gpus", "advise", "--gpus", "33554432"),
    case("--gpus-per-node", "advise", "--gpus-per-node", "0"),
    case("--gpus-per-node", "advise", "--gpus", "12", "--gpus-per-node", "5"),
    case("gpu", "advise", "--gpu", ""),
    case("nosuch", "advise", "--gpu", "nosuch"),
    case("nosuch", "advise", "--network", "nosuch"),
    case("network", "advise", "--network", ""),
    case("nosuch", "advise", "--intra", "nosuch"),
    case("nosuch", "advise", "--model", "nosuch"),
    case("nosuch", "advise", "--cluster", "nosuch"),
    case("fp8", "advise", "--precision", "fp8"),
    # advise: numbers that mean nothing
    case("--mfu", "advise", "--mfu", "1e-300"),
    case("--mfu", "advise", "--mfu", "1.5"),
    case("--mfu", "advise", "--mfu", "nan"),
    case("--global-batch", "advise", "--gpus", "64", "--global-batch", "10"),
    case("--compute-cv", "advise", "--compute-cv", "-0.1"),
    case("--compute-cv", "advise", "--compute-cv", "nan"),
    # advise: stragglers and structured variation
    case("--straggler", "advise", "--straggler", "0.5"),
    case("--straggler", "advise", "--straggler", "2:0"),
    case("--straggler", "advise", "--gpus", "64", "--straggler", "2:65"),
    case("--straggler", "advise", "--straggler", "abc"),
    case("--straggler", "advise", "--straggler", "nan"),
    case("--straggler", "advise", "--straggler", "101"),
    case("--rank-cv", "advise", "--rank-cv", "-0.1"),
    case("--rank-cv", "advise", "--rank-cv", "1.5"),
    case("--node-cv", "advise", "--node-cv", "nan"),
    case("--straggler", "advise", "--profile", "profile.json", "--straggler", "2"),
    case("--node-cv", "advise", "--profile", "profile.json", "--node-cv", "0.1"),
    case("--margin", "advise", "--margin", "1.5"),
    case("--bucket", "advise", "--bucket-cap-mb", "0"),
    case("--bucket", "advise", "--bucket-cap-mb", "inf"),
    case("nosuch", "advise", "--topologies", "nosuch"),
    # advise: your own numbers
    case("--compute-ms", "advise", "--compute-ms", "0"),
    case("--compute-ms", "advise", "--compute-ms", "-1"),
    case("--compute-ms", "advise", "--compute-ms", "nan"),
    case("--nics-per-node", "advise", "--nics-per-node", "0"),
    case("--nics-per-node", "advise", "--nics-per-node", "-2"),
    case("--nics-per-node", "advise", "--nics-per-node", "nan"),
    case("--nccl-algo", "advise", "--nccl-algo", "collnet"),
    case("--nics-per-node", "plot", "speedup", "--out", "f.png", "--nics-per-node", "0"),
    case("--optimizer-ms", "advise", "--optimizer-ms", "-1"),
    # advise: memory (issue 66)
    case("--activation-gib", "advise", "--activation-gib", "-1"),
    case("--activation-gib", "advise", "--activation-gib", "nan"),
    case("--activation-gib", "advise", "--activation-gib", "1e9"),
    case("--gpu-memory-gib", "advise", "--gpu-memory-gib", "0"),
    case("--gpu-memory-gib", "advise", "--gpu-memory-gib", "-40"),
    case("--gpu-memory-gib", "advise", "--gpu-memory-gib", "inf"),
    case("--gpu-memory-gib", "advise", "--gpu-memory-gib", "1e12"),
    case("badmodel:make", "advise", "--profile", "badmodel-profile.json", "--gpu-memory-gib", "40"),
    # advise and the preset plots: your host's dispatch figure (profiler.opcount --dispatch), in us
    case("--dispatch-us must be in [0.1, 10000]", "advise", "--dispatch-us", "0"),
    case("--dispatch-us", "advise", "--dispatch-us", "-1"),
    case("--dispatch-us", "advise", "--dispatch-us", "nan"),
    case("--dispatch-us", "advise", "--dispatch-us", "inf"),
    case("--dispatch-us", "advise", "--dispatch-us", "1e9"),
    case("--dispatch-us", "advise", "--dispatch-us", "0.01"),
    case("--dispatch-us", "advise", "--dispatch-us", "fast"),
    case("--dispatch-us cannot be used with --profile", "advise", "--profile", "profile.json", "--dispatch-us", "30"),
    case("--dispatch-us 30.0 would not be used: --compute-ms 100.0 and --optimizer-ms 4.0", "advise",
         "--dispatch-us", "30", "--compute-ms", "100", "--optimizer-ms", "4"),
    case("would not be used", "advise", "--params", "1e8", "--dispatch-us", "30", "--compute-ms", "100",
         "--optimizer-ms", "4"),
    case("tiny-dispatch.toml: 'dispatch_us' must be in [0.1, 10000]", "advise", "--scenario", "tiny-dispatch.toml"),
    case("text-dispatch.toml: 'dispatch_us' must be a number", "advise", "--scenario", "text-dispatch.toml"),
    # advise: how your DDP holds gradients (a preset input; a profile measured its compute)
    case("text-bucket-view.toml: 'ddp_bucket_view' must be true or false", "advise", "--scenario",
         "text-bucket-view.toml"),
    case("--ddp-bucket-view cannot be used with --profile", "advise", "--profile", "profile.json",
         "--ddp-bucket-view"),
    case("'dispatch_us' 30.0 would not be used", "advise", "--scenario", "unused-dispatch.toml"),
    case("--dispatch-us", "plot", "speedup", "--out", "f.png", "--dispatch-us", "0"),
    case("--dispatch-us", "plot", "factors", "--out", "f.png", "--dispatch-us", "1e9"),
    case("--dispatch-us", "plot", "what-if", "--out", "f.png", "--dispatch-us", "nan"),
    case("tiny-dispatch.toml: 'dispatch_us'", "plot", "speedup", "--out", "f.png", "--scenario", "tiny-dispatch.toml"),
    case("--dispatch-us cannot be used with --profile", "plot", "variance", "--out", "f.png", "--profile",
         "profile.json", "--dispatch-us", "30"),
    case("--message-dtype", "advise", "--message-dtype", "fp8"),
    case("--compute-ms", "advise", "--profile", "profile.json", "--compute-ms", "0"),  # allowed with a profile, checked
    case("--model cannot be used with --profile", "advise", "--profile", "profile.json", "--compute-ms", "100",
         "--model", "resnet50"),
    case("--compute-ms must be in [0.001, 8.64e+07]", "advise", "--compute-ms", "1e300"),
    case("--batch-per-gpu 2048.0 and --global-batch 100.0 both set the batch: give one", "advise",
         "--batch-per-gpu", "2048", "--global-batch", "100"),
    case("--batch-per-gpu must be a finite number >= 1", "advise", "--batch-per-gpu", "0.5"),
    case("--batch-per-gpu cannot be used with --profile", "advise", "--profile", "profile.json",
         "--batch-per-gpu", "8"),
    case("both set the batch: give one", "plot", "speedup", "--gpus-range", "8:16", "--batch-per-gpu", "512",
         "--global-batch", "100", "--out", "s.png"),
    case("--step-ms must be in [0.001, 8.64e+07]", "advise", "--step-ms", "0"),
    case("--step-ms must be in [0.001, 8.64e+07]", "advise", "--step-ms", "nan"),
    case("--step-ms must be in [0.001, 8.64e+07]", "advise", "--step-ms", "1e9"),
    case("says where your --step-ms was measured: give the step too", "advise", "--step-gpus", "64"),
    case("give one", "advise", "--step-ms", "100", "--compute-ms", "50"),
    case("--gpus-per-node 4 does not divide --step-gpus 6", "advise", "--step-ms", "100", "--step-gpus", "6"),
    case("--step-gpus must be an integer >= 1", "advise", "--step-ms", "100", "--step-gpus", "0"),
    case("--step-gpus", "advise", "--step-ms", "100", "--step-gpus", "2.5"),
    case("give the step too", "advise", "--profile", "profile.json", "--step-gpus", "4"),
    case("give one", "advise", "--profile", "profile.json", "--step-ms", "100", "--compute-ms", "50"),
    case("default global batch has images", "advise", "--gpus", "4096", "--gpus-per-node", "8", "--model",
         "resnet50", "--compute-ms", "50"),  # a measured compute does not make 0.25 image per GPU right
    case("--compute-ms", "advise", "--compute-ms", "1e-300"),
    case("--optimizer-ms", "advise", "--optimizer-ms", "1e300"),
    case("--global-batch must be in (0, 1e+10]", "advise", "--global-batch", "1e300"),
    case("--global-batch", "advise", "--gpus", "100000"),  # the default 25,000 tokens: < 1 per GPU
    case("--global-batch", "advise", "--model", "resnet50", "--gpus", "2048"),
    case("--global-batch", "plot", "speedup", "--out", "f.png", "--gpus-range", "8:65536"),
    # advise: an option a profile would silently ignore
    case("--network tcp-25g would not be used", "advise", "--profile", "profile.json", "--network", "tcp-25g"),
    case("--intra pcie3 would not be used", "advise", "--profile", "profile.json", "--intra", "pcie3"),
    case("--nics-per-node cannot be used with --profile", "advise", "--profile", "profile.json", "--nics-per-node", "2"),
    case("--nccl-algo cannot be used with --profile", "advise", "--profile", "profile.json", "--nccl-algo", "ring"),
    # --calibration: `rtmodel calibrate --out`'s file in place of --profile (checked before it is read)
    case("--profile and --calibration both", "advise", "--profile", "profile.json", "--calibration", "cal.json"),
    case("not an rtmodel calibration file", "advise", "--calibration", "profile.json"),
    case("corrupt.json is not valid JSON", "advise", "--calibration", "corrupt.json"),
    case("calibration file not found", "advise", "--calibration", "nosuch.json"),
    case("--model cannot be used with --calibration", "advise", "--calibration", "cal.json", "--model", "resnet50"),
    case("--network cannot be used with --calibration", "advise", "--calibration", "cal.json", "--network", "ib-100"),
    case("not an rtmodel calibration file", "advise", "--scenario", "calibration.toml"),
    case("'calibration' is for `rtmodel advise`", "plot", "speedup", "--out", "f.png", "--scenario", "calibration.toml"),
    case("--profile and --calibration both", "plot", "crossover", "--out", "f.png", "--profile", "profile.json",
         "--calibration", "cal.json"),
    case("not an rtmodel calibration file", "plot", "variance", "--out", "f.png", "--calibration", "profile.json"),
    # profiles that hold what no cluster measures
    case("took 0 s in every iteration", "advise", "--profile", "zero-compute.json"),
    case("more than a day", "advise", "--profile", "day-long-step.json"),
    case("comes without compute.ddp_optimizer_s", "advise", "--profile", "half-ddp.json"),
    case("comes without compute.ddp_backward_s (absent or null", "advise", "--profile", "null-ddp-backward.json"),
    case("compute.ddp_backward_s is 1,435,038x compute.backward_s", "advise", "--profile", "day-long-ddp.json"),
    case("DDP's wrapper adds hook work", "calibrate", "day-long-ddp.json"),
    case("ddp_backward_s comes without compute.ddp_forward_s", "validate", "--profile", "null-ddp-forward.json",
         "--topology", "ring"),
    case("ddp_forward_s must hold one list per rank", "advise", "--profile", "short-ddp.json"),
    case("ddp_buckets_bytes[0] must be an integer in [1, 1,099,511,627,776]", "calibrate", "huge-bucket.json"),
    case("group_size must be at most 4", "advise", "--profile", "ghost-ranks.json"),
    case("nodes_spanned must be at most 2", "calibrate", "ghost-nodes.json"),
    case("the profile has 4", "advise", "--profile", "ghost-groups.json"),
    # special files: never read (they block) or renamed over (a device would be replaced)
    case("pipe.toml: is not a regular file", "advise", "--scenario", "pipe.toml"),
    case("pipe.json", "advise", "--profile", "pipe.json"),
    # advise --trace: traces the model cannot use, each named in one line
    case("no such file", "advise", "--trace", "missing.json"),
    case(".json or .json.gz", "advise", "--trace", "trace-not-json.txt"),
    case("not a regular file", "advise", "--trace", "pipe.json"),
    case("not a readable torch.profiler trace", "advise", "--trace", "trace-truncated.json.gz"),
    case("not a readable torch.profiler trace", "advise", "--trace", "corrupt.json"),
    case("CPU-only", "advise", "--trace", "trace-cpu-only.json"),
    case("no ProfilerStep", "advise", "--trace", "trace-no-steps.json"),
    case("several processes", "advise", "--trace", "trace-two-processes.json"),
    case("not linked to the steps", "advise", "--trace", "trace-unlinked.json"),
    case("no GPU preset describes", "advise", "--trace", "trace-mi300.json"),
    case("different runs", "advise", "--trace", "trace-rank0.json", "--trace", "trace-rank1-next-day.json"),
    case("are the same file", "advise", "--trace", "trace-rank0.json", "--trace", "trace-rank0.json"),
    case("both rank 0", "advise", "--trace", "trace-rank0.json", "--trace", "trace-rank0-again.json"),
    case("--gpu cannot be used with --trace", "advise", "--trace", "trace-rank0.json", "--gpu", "A100"),
    case("give one", "advise", "--trace", "trace-rank0.json", "--profile", "profile.json"),
    case("without .json", "advise", "--trace", "presets-dir"),
    case("--batch-per-gpu", "advise", "--trace", "trace-rank0.json", "--traced-batch", "64"),
    case("--traced-batch N", "advise", "--trace", "trace-rank0.json", "--batch-per-gpu", "64"),
    case("--traced-batch must be", "advise", "--trace", "trace-rank0.json", "--batch-per-gpu", "64", "--traced-batch", "0"),
    case("give one", "advise", "--trace", "trace-rank0.json", "--batch-per-gpu", "64", "--traced-batch", "32", "--compute-ms", "50"),
    # advise --nccl-tests: a file that is not an nccl-tests output, or measured no network
    case("--nccl-tests", "advise", "--nccl-tests", "missing.txt"),
    case("no nccl-tests column header", "advise", "--nccl-tests", "notes.txt"),
    case("not a regular file", "advise", "--nccl-tests", "pipe.json"),
    case("one host", "advise", "--nccl-tests", "one-host.txt"),
    case("on one host", "advise", "--profile", "profile.json", "--nccl-tests", "one-host.txt"),
    # plot crossover
    case("--gpus", "plot", "crossover", "--out", "x.png", "--gpus", "0"),
    case("--out", "plot", "crossover", "--out", "x.txt"),
    case("--nccl-tests", "plot", "crossover", "--out", "x.png", "--nccl-tests", "missing.txt"),
    case("pipe.json", "calibrate", "pipe.json"),
    # advise: what is ranked
    case("--objective must be one of iteration, accuracy", "advise", "--objective", "speed"),
    case("--objective", "advise", "--objective", ""),
    case("--objective", "advise", "--objective", "ACCURACY"),
    case("bad-objective.toml: 'objective' must be one of", "advise", "--scenario", "bad-objective.toml"),
    case("'objective' must be a string", "advise", "--scenario", "number-objective.toml"),
    # advise, plot, validate: local SGD's row and run
    case("--local-sgd-h must be an integer in [1, 10000]", "advise", "--local-sgd-h", "-1"),
    case("--local-sgd-bits must be one of 32, 16, 8, 4", "advise", "--local-sgd-bits", "7"),
    case("--local-sgd-replica must be one of node, gpu", "advise", "--local-sgd-replica", "rack"),
    case("--local-sgd-fragments 40 needs", "advise", "--local-sgd-fragments", "40"),
    case("--local-sgd-overlap 30", "advise", "--local-sgd-overlap", "30"),
    case("--local-sgd-h 0 turns local SGD off", "advise", "--local-sgd-h", "0", "--local-sgd-bits", "8"),
    case("--local-sgd-replica", "plot", "speedup", "--out", "f.png", "--local-sgd-replica", "rack"),
    case("--local-sgd-bits 8 cannot be validated", "validate", "--profile", "profile.json", "--local-sgd-h", "4",
         "--local-sgd-bits", "8"),
    case("--local-sgd-h 0 turns local SGD off", "validate", "--profile", "profile.json", "--local-sgd-h", "0",
         "--local-sgd-overlap", "1"),
    # advise: your own model in a line
    case("--params", "advise", "--params", "0", "--compute-ms", "100"),
    case("--params", "advise", "--params", "-5", "--compute-ms", "100"),
    case("--params", "advise", "--params", "nan", "--compute-ms", "100"),
    case("--params", "advise", "--params", "inf", "--compute-ms", "100"),
    case("--params", "advise", "--params", "abc", "--compute-ms", "100"),
    case("--params must be an integer in [1, 1e+11]", "advise", "--params", "1e30", "--compute-ms", "100"),
    case("--params", "advise", "--params", "2.5", "--compute-ms", "100"),
    case("--param-mb", "advise", "--param-mb", "0", "--compute-ms", "100"),
    case("--param-mb", "advise", "--param-mb", "-1", "--compute-ms", "100"),
    case("--param-mb", "advise", "--param-mb", "nan", "--compute-ms", "100"),
    case("--param-mb must be at most", "advise", "--param-mb", "1e9", "--compute-ms", "100"),
    case("both size your model", "advise", "--params", "1e8", "--param-mb", "256", "--compute-ms", "100"),
    case("--model resnet50 names a preset", "advise", "--params", "1e8", "--model", "resnet50"),
    case("--params 100000000 needs", "advise", "--params", "1e8"),
    case("--compute-ms", "advise", "--param-mb", "256"),
    case("--params cannot be used with --profile", "advise", "--profile", "profile.json", "--params", "1e8"),
    case("--bucket-cap-mb", "advise", "--params", "1e8", "--compute-ms", "100", "--bucket-cap-mb", "0.001"),
    case("zero-params.toml: 'params' must be", "advise", "--scenario", "zero-params.toml"),
    case("nan-params.toml: 'params' must be", "advise", "--scenario", "nan-params.toml"),
    case("huge-params.toml: 'params' must be", "advise", "--scenario", "huge-params.toml"),
    case("text-params.toml: 'params' must be a number", "advise", "--scenario", "text-params.toml"),
    case("bad-param-mb.toml: 'param_mb' must be", "advise", "--scenario", "bad-param-mb.toml"),
    case("'params' 100000000 and 'param_mb' 256 both", "advise", "--scenario", "both-sizes.toml"),
    case("'model' resnet50 names a preset", "advise", "--scenario", "params-and-model.toml"),
    case("'params' 100000000 needs", "advise", "--scenario", "params-alone.toml"),
    case("--params cannot be used with --profile", "advise", "--scenario", "params-profile.toml"),
    case("--params", "plot", "speedup", "--out", "f.png", "--params", "0", "--compute-ms", "100"),
    case("--compute-ms", "plot", "factors", "--out", "f.png", "--params", "1e8"),
    case("--model resnet50", "plot", "what-if", "--out", "f.png", "--param-mb", "9", "--model", "resnet50"),
    case(
        "with --profile", "plot", "variance", "--out", "f.png", "--profile", "profile.json", "--params", "1"
    ),
    # advise: a scenario file
    case("--scenario unknown-key.toml: unknown key 'gpu_count'", "advise", "--scenario", "unknown-key.toml"),
    case("--scenario wrong-type.toml: 'gpus' must be an integer", "advise", "--scenario", "wrong-type.toml"),
    case("--scenario nosuch.toml", "advise", "--scenario", "nosuch.toml"),
    case("yaml", "advise", "--format", "yaml"),
    case("--no-such-flag", "advise", "--no-such-flag"),
    case("--gpus", "advise", "--gpus", "many"),
    # advise: profiles
    case("nosuch.json", "advise", "--profile", "nosuch.json"),
    case("corrupt.json", "advise", "--profile", "corrupt.json"),
    case("--gpu", "advise", "--profile", "profile.json", "--gpu", "A100"),
    case("--mfu", "advise", "--profile", "profile.json", "--mfu", "0.4"),
    case("--global-batch", "advise", "--profile", "profile.json", "--global-batch", "256"),
    case("--compute-cv", "advise", "--profile", "profile.json", "--compute-cv", "0.1"),
    case("nosuch-dir", "advise", "--presets", "nosuch-dir"),
    case("presets-fifo/gpus.toml: is not a regular file", "advise", "--presets", "presets-fifo"),
    case("presets-dir/gpus.toml: is not a regular file", "advise", "--presets", "presets-dir"),
    case("presets-loop/gpus.toml: cannot be read", "advise", "--presets", "presets-loop"),
    case("tflops", "advise", "--presets", "presets-tiny", "--gpu", "X1"),
    case("presets-fabric/networks.toml [inter.efa-100]: fabric", "advise", "--presets", "presets-fabric"),
    case("presets-cap/networks.toml [inter.cap-100]: flow_cap_source", "advise", "--presets", "presets-cap"),
    # topologies
    case("--gpus", "topologies", "--gpus", "0"),
    case("--gpus", "topologies", "--gpus", "1000000000000"),
    case("--gpus-per-node", "topologies", "--gpus", "12", "--gpus-per-node", "5"),
    # presets
    case("--kind", "presets", "--kind", "routers"),
    case("--format", "presets", "--format", "csv"),
    case("--format json", "presets", "--json"),  # retired: one way to ask for JSON
    case("nosuch-dir", "presets", "--presets", "nosuch-dir"),
    # profile: checked before any rank starts
    case("--iterations", "profile", "--out", "p.json", "--iterations", "0"),
    case("--backend", "profile", "--out", "p.json", "--backend", "mpi"),
    case("nosuch", "profile", "--out", "p.json", "--model", "nosuch"),
    case("--precision must be one of fp32, tf32, fp16, bf16", "profile", "--out", "p.json", "--precision", "fp8"),
    case("--optimizer must be one of adam, accum-adam", "profile", "--out", "p.json", "--optimizer", "sgd"),
    case("--batch-per-rank 16 is too small for transformer-base", "profile", "--out", "p.json", "--model",
         "transformer-base", "--batch-per-rank", "16"),
    case("width_div must be a power of 2", "profile", "--out", "p.json", "--model", "gpt2-small", "--model-arg",
         "width_div=3"),
    case("'transformer-base' has no argument 'layers'", "profile", "--out", "p.json", "--model", "transformer-base",
         "--model-arg", "layers=2"),
    case("--out", "profile", "--out", "."),
    case("nosuch-dir", "profile", "--out", "nosuch-dir/p.json"),
    case("nosuch.json", "profile", "--resume", "nosuch.json"),
    case("--out", "profile"),
    case("--out pipe.json is a FIFO", "profile", "--out", "pipe.json"),
    case("--out /dev/null is a character device", "profile", "--out", "/dev/null"),
    case("--resume notes.txt: it is not valid JSON", "profile", "--resume", "notes.txt"),
    case("--resume params.json: it is not an rtmodel profile", "profile", "--resume", "params.json"),
    case("it is not an rtmodel profile", "profile", "--out", "params.json", "--resume", "params.json"),
    # calibrate
    case("nosuch.json", "calibrate", "nosuch.json"),
    case("corrupt.json", "calibrate", "corrupt.json", "--out", "params.json"),
    case("notes.txt", "calibrate", "notes.txt"),
    case("group_samples_s", "calibrate", "bad-group.json"),
    case("communication.in_flight[0].in_flight_s[0]", "calibrate", "bad-in-flight.json"),
    case("communication.in_flight[0].in_flight_s[0]", "advise", "--profile", "bad-in-flight.json"),
    case("in_flight_s has 2 repetitions, one_at_a_time_s 1", "calibrate", "uneven-in-flight.json"),
    case("two_groups_s has 2 repetitions, in_flight_s 1", "advise", "--profile", "uneven-two-groups.json"),
    case("--out profile.json is also the input PROFILE", "calibrate", "profile.json", "--out", "profile.json"),
    case("profile.json is also the input PROFILE", "calibrate", "profile.json", "--out", "./profile.json"),
    case("--out /dev/null is a character device", "calibrate", "profile.json", "--out", "/dev/null"),
    case("--out pipe.json is a FIFO", "calibrate", "profile.json", "--out", "pipe.json"),
    case("nosuch-dir", "calibrate", "profile.json", "--out", "nosuch-dir/params.json"),
    case("yaml", "calibrate", "profile.json", "--format", "yaml"),
    case("weird", "calibrate", "profile.json", "--distribution", "weird"),
    case("nosuch", "calibrate", "profile.json", "--network", "nosuch"),
    case("--gpus", "calibrate", "profile.json", "--gpus", "0"),
    # validate: every check before the job runs
    case("yaml", "validate", "--format", "yaml", "--report"),
    case("--profile", "validate"),
    case("--backend must be one of auto, gloo, nccl, got 'mpi'", "validate", "--profile", "profile.json",
         "--recommended", "--backend", "mpi"),
    case("nosuch-dir", "validate", "--profile", "profile.json", "--results", "nosuch-dir/v.jsonl"),
    case("--warmup", "validate", "--profile", "profile.json", "--warmup", "1"),
    case("nosuch", "validate", "--profile", "profile.json", "--topology", "nosuch"),
    case("--precision must be one of", "validate", "--profile", "profile.json", "--topology", "ring", "--precision",
         "half"),
    case("--optimizer must be one of", "validate", "--profile", "profile.json", "--topology", "ring", "--optimizer",
         "adamw"),
    case("nosuch.jsonl", "validate", "--report", "--results", "nosuch.jsonl"),
    case("pipe.jsonl: not a regular file", "validate", "--report", "--results", "pipe.jsonl"),
    case("--results profile.json is also the input --profile", "validate", "--profile", "profile.json",
         "--results", "profile.json"),
    case("--results /dev/null is a character device", "validate", "--profile", "profile.json", "--results",
         "/dev/null"),
    # emulate: checked before any namespace exists, and without root
    case("--nodes", "emulate", "up", "--nodes", "0"),
    case("--bandwidth-mbit", "emulate", "up", "--bandwidth-mbit", "inf"),
    case("--bandwidth-mbit", "emulate", "up", "--bandwidth-mbit", "-5"),
    case("--flow-mbit", "emulate", "up", "--flow-mbit", "0"),
    case("--timeout-s", "emulate", "run", "--timeout-s", "0", "--", "true"),
    case("--nodes", "emulate", "run", "--nodes", "0", "--", "true"),
    case("nosuch", "emulate", "nosuch"),
    # plot
    case("figure.txt", "plot", "speedup", "--out", "figure.txt"),
    case("nosuch", "plot", "speedup", "--out", "f.png", "--topologies", "nosuch"),
    case("--gpus-per-node", "plot", "speedup", "--out", "f.png", "--gpus-per-node", "0"),
    case("--gpus-range", "plot", "speedup", "--out", "f.png", "--gpus-range", "8:99999999999"),
    case("--gpus-range 8:1024", "plot", "speedup", "--out", "f.png", "--gpus", "8:1024"),
    case("nosuch-dir", "plot", "speedup", "--out", "nosuch-dir/f.png"),
    case("--gpus", "plot", "factors", "--out", "f.png", "--gpus", "abc"),
    case("--compute-ms", "plot", "speedup", "--out", "f.png", "--compute-ms", "0"),
    case("--scenario", "plot", "what-if", "--out", "f.png", "--scenario", "unknown-key.toml"),
    case("--gpus-range", "plot", "what-if", "--out", "f.png", "--gpus-range", "0:4"),
    case("--gpus-list", "plot", "what-if", "--out", "f.png", "--gpus-list", "8,0"),
    case("--straggler", "plot", "speedup", "--out", "f.png", "--gpus-range", "4:64", "--straggler", "1.3:8"),
    case("--rank-cv", "plot", "factors", "--out", "f.png", "--rank-cv", "2"),
    case("--straggler", "plot", "variance", "--out", "f.png", "--straggler", "0.5"),
    case("--straggler-max", "plot", "variance", "--out", "f.png", "--straggler-max", "0.5"),
    case("--cv-max", "plot", "variance", "--out", "f.png", "--cv-max", "nan"),
    case("--out", "plot", "variance", "--out", "."),
    case("paper.pdf", "plot", "paper", "--out", "paper.pdf"),
    case("--out pipe.png is a FIFO", "plot", "speedup", "--out", "pipe.png"),
    case("pipe.jsonl: not a regular file", "plot", "parity", "--out", "p.png", "--results", "pipe.jsonl"),
    case("nosuch.jsonl", "plot", "parity", "--out", "p.png", "--results", "nosuch.jsonl"),
    case("--brief is the table view's short form", "advise", "--brief", "--format", "csv"),
    case("cannot be used with --verbose", "advise", "--brief", "--verbose"),
    # numbers physics bounds, refused where the option is read (issue 51)
    case("--param-mb must be at most", "advise", "--param-mb", "1e308", "--compute-ms", "100"),
    case("--param-mb must be at most", "plot", "speedup", "--out", "f.png", "--param-mb", "1e308", "--compute-ms",
         "100"),
    case("--nics-per-node must be an integer in [1, 64]", "advise", "--nics-per-node", str(2**63)),
    case("--global-batch must be an integer", "advise", "--global-batch", "64.5", "--model", "resnet50"),
    case("unknown precision 'bf16'; choose one of: fp32, fp16", "advise", "--gpu", "T4", "--precision", "bf16"),
    case("unknown precision 'tf32'; choose one of: fp32, fp16", "advise", "--gpu", "T4", "--precision", "tf32"),
    # an Ethernet network's name says TCP or RoCE (issue 47): the old names point to the new ones
    case("network 'eth-25g' is now tcp-25g (TCP sockets) or roce-25g (RDMA)", "advise", "--network", "eth-25g"),
    case("network 'eth-100g' is now roce-100g (RDMA) or tcp-100g", "plot", "speedup", "--out", "f.png", "--networks",
         "eth-100g"),
    case("--local-sgd-replica", "advise", "--local-sgd-replica", ""),
    case("--timeout-s", "validate", "--profile", "profile.json", "--topology", "ring", "--timeout-s", "1e-300"),
    case("--timeout-s", "profile", "--out", "p.json", "--timeout-s", "0.5"),
    case("--bucket-cap-mb must be in (0, 1e+06), got inf", "profile", "--out", "p.json", "--bucket-cap-mb", "inf"),
    case("--iterations must be an integer from 1 to 100,000", "profile", "--out", "p.json", "--iterations",
         str(2**63 - 1)),
    case("--iterations must be an integer from 1 to 100,000", "validate", "--profile", "profile.json",
         "--topology", "ring", "--iterations", str(2**63 - 1)),
    case("--warmup must be an integer from 2 to 100,000", "validate", "--profile", "profile.json",
         "--topology", "ring", "--warmup", str(2**63 - 1)),
    case("--out newdir/ is a directory", "calibrate", "profile.json", "--out", "newdir/"),
    case("--out newdir/ is a directory", "profile", "--out", "newdir/"),
    case("--results newdir/ is a directory", "validate", "--profile", "profile.json", "--topology", "ring",
         "--results", "newdir/"),
    case("--batch-per-rank must be an integer from 1 to 1,048,576", "profile", "--out", "p.json",
         "--batch-per-rank", "999999999999"),
    # damaged documents: each one line, whichever command reads them
    case("deep.json is nested too deeply", "advise", "--profile", "deep.json"),
    case("deep.json is nested too deeply", "calibrate", "deep.json"),
    case("huge-int.json holds an integer of 5000 digits", "advise", "--profile", "huge-int.json"),
    case("huge-int.json holds an integer of 5000 digits", "validate", "--profile", "huge-int.json", "--topology",
         "ring"),
    case("lone surrogate", "advise", "--profile", "surrogate.json"),
    case("a sentence of at most 500 characters", "advise", "--profile", "long-reason.json"),
    case("holds a string of 1,000,000 characters", "validate", "--profile", "huge-string.json", "--topology",
         "ring"),
    case("workload.batch_per_rank", "calibrate", "nan-profile.json"),
    case("schema_version True", "advise", "--profile", "true-schema.json"),
    case("--scenario deep-scenario.json: nested too deeply", "advise", "--scenario", "deep-scenario.json"),
    # plot: --out never names one of the command's own inputs, whichever option brought it
    case("is also the input --results", "plot", "parity", "--out", "results.png", "--results", "results.png"),
    case("is also the input --profile", "plot", "variance", "--out", "./profile.png", "--profile", "profile.png"),
    case("is also the input --nccl-tests", "plot", "crossover", "--out", "profile.png", "--nccl-tests",
         "profile.png"),
    case("the file name is 260 bytes", "plot", "speedup", "--out", "f" * 256 + ".png"),
    case("is also the input 'nccl_tests' of --scenario nt-scenario.toml", "plot", "crossover", "--scenario",
         "nt-scenario.toml", "--out", "nt.png"),
    # issue 67: outputs checked before any work; measured inputs bounded; file text shown escaped
    case("is not a validation results file", "validate", "--profile", "profile.json", "--topology", "ring",
         "--results", "not-results.json"),
    case("--trace-out needs a directory path", "profile", "--out", "p.json", "--trace-out", ""),
    case("--trace-out profile.json is a file", "profile", "--out", "p.json", "--trace-out", "profile.json"),
    case("is beyond any machine", "advise", "--nccl-tests", "fast.txt"),
    case("unknown network 'ib\\x1b[2j'", "advise", "--network", "ib\x1b[2J"),
    # the advisor's, topologies' and the plots' named refusals (one corpus: they were a second table)
    case("does not divide", "advise", "--gpus", "64", "--gpus-per-node", "3"),
    case("choose one of: A100, A100-80GB, A40, H100, H200, T4, V100, V100-32GB", "advise", "--gpu", "V100X"),
    case("unknown network", "advise", "--network", "carrier-pigeon"),
    case("unknown model", "advise", "--model", "gpt5"),
    case("--mfu must be in", "advise", "--mfu", "2"),
    case("--compute-cv", "advise", "--compute-cv", "-1"),
    case("--global-batch", "advise", "--global-batch", "-5"),
    case("unknown topology", "advise", "--topologies", "ring,star"),
    case("profile", "advise", "--profile", "/nonexistent/profile.json"),
    case("--gpus must be at most 16777216", "advise", "--gpus", "16777217", "--global-batch", "2e7"),
    case("unknown intra-node link ''", "advise", "--intra", ""),
    case("unknown model ''", "advise", "--model", ""),
    case("unknown cluster ''", "advise", "--cluster", ""),
    case("unknown precision ''", "advise", "--precision", ""),
    case("unknown precision 'bogus'", "advise", "--precision", "bogus"),
    case("--mfu must be in [0.01, 1]", "advise", "--mfu", "inf"),
    case("--global-batch must be >= the number of GPUs (64)", "advise", "--global-batch", "10"),
    case("--global-batch", "advise", "--global-batch", "nan"),
    case("--global-batch", "advise", "--global-batch", "inf"),
    case("--compute-cv must be in [0, 1]", "advise", "--compute-cv", "inf"),
    case("--compute-cv must be in [0, 1]", "advise", "--compute-cv", "1.5"),
    case("--margin must be in [0, 1)", "advise", "--margin", "nan"),
    case("--margin", "advise", "--margin", "inf"),
    case("--bucket-cap-mb", "advise", "--bucket-cap-mb", "nan"),
    case("--bucket-cap-mb", "advise", "--bucket-cap-mb", "-1"),
    case("--gpu cannot be used with --profile", "advise", "--profile", "profile.json", "--gpu", "H100"),
    case("--mfu cannot be used with --profile", "advise", "--profile", "profile.json", "--mfu", "0.3"),
    case("--model cannot be used with --profile", "advise", "--profile", "profile.json", "--model", "transformer-base"),
    case("--global-batch cannot be used with --profile", "advise", "--profile", "profile.json", "--global-batch", "4096"),
    case("--compute-cv cannot be used with --profile", "advise", "--profile", "profile.json", "--compute-cv", "0"),
    case("--precision cannot be used with --profile", "advise", "--profile", "profile.json", "--precision", "bf16"),
    case("--bucket-cap-mb cannot be used with --profile", "advise", "--profile", "profile.json", "--bucket-mb", "10"),
    case("--cluster cannot be used with --profile", "advise", "--profile", "profile.json", "--cluster", "a100-ib100"),
    case("--gpu, --mfu cannot be used with --profile", "advise", "--profile", "profile.json", "--gpu", "A100", "--mfu", "0.4"),
    case("--gpus-per-node must be an integer >= 1", "advise", "--profile", "profile.json", "--gpus-per-node", "0"),
    case("--gpus must be at most 16777216", "advise", "--profile", "profile.json", "--gpus", "33554432"),
    case("unknown network ''", "advise", "--profile", "profile.json", "--network", ""),
    case("--gpus-per-node must be an integer >= 1", "topologies", "--gpus", "8", "--gpus-per-node", "0"),
    case("--gpus-per-node must be an integer >= 1", "plot", "speedup", "--gpus-range", "8:16", "--gpus-per-node", "0", "--out", "x.png"),
    case("--gpus-per-node must be an integer >= 1", "plot", "factors", "--gpus", "64", "--gpus-per-node", "0", "--out", "x.png"),
    case("--gpus-per-node must be an integer >= 1", "plot", "what-if", "--gpus-range", "8:16", "--gpus-per-node", "0", "--out", "x.png"),
    case("--gpus must be at most 16777216", "plot", "speedup", "--gpus", "1000000000000", "--out", "x.png"),
    case("--gpus must be at most 16777216", "plot", "factors", "--gpus", "33554432", "--out", "x.png"),
    case("unknown GPU ''", "plot", "what-if", "--gpus-range", "8:16", "--gpu", "", "--out", "x.png"),
    case("unknown network ''", "plot", "factors", "--gpus", "64", "--network", "", "--out", "x.png"),
    case("unknown model ''", "plot", "speedup", "--gpus-range", "8:16", "--models", "", "--out", "x.png"),
    case("unknown cluster ''", "plot", "factors", "--gpus", "64", "--cluster", "", "--out", "x.png"),
    case("unknown intra-node link ''", "plot", "factors", "--gpus", "64", "--intra", "", "--out", "x.png"),
    case("--global-batch must be >= the number", "plot", "factors", "--gpus", "64", "--global-batch", "10", "--out", "x.png"),
    case("--global-batch", "plot", "factors", "--gpus", "64", "--global-batch", "nan", "--out", "x.png"),
    case("--bucket-cap-mb", "plot", "factors", "--gpus", "64", "--bucket-cap-mb", "inf", "--out", "x.png"),
    case("--batch-per-gpu must be a finite", "plot", "what-if", "--gpus-range", "8:16", "--batch-per-gpu", "inf", "--out", "x.png"),
    case("--batch-per-gpu", "plot", "what-if", "--gpus-range", "8:16", "--batch-per-gpu", "nan", "--out", "x.png"),
    case("--batch-per-gpu", "plot", "speedup", "--gpus-range", "8:16", "--batch-per-gpu", "0.5", "--out", "x.png"),
]


def snapshot(folder: Path) -> dict[str, bytes | None]:
    return {
        str(p.relative_to(folder)): (p.read_bytes() if p.is_file() else p.lstat().st_mode)
        for p in sorted(folder.rglob("*"))
    }


BINARY_FIXTURES = {"trace-truncated.json.gz": truncated_real_trace()}


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    for name, text in FIXTURES.items():
        (tmp_path / name).write_text(text)
    for name, data in BINARY_FIXTURES.items():
        (tmp_path / name).write_bytes(data)
    for name in FIFOS:
        os.mkfifo(tmp_path / name)
    for folder in ("presets-fifo", "presets-dir", "presets-loop"):  # a preset file that is not a file
        (tmp_path / folder).mkdir()
    os.mkfifo(tmp_path / "presets-fifo" / "gpus.toml")
    (tmp_path / "presets-dir" / "gpus.toml").mkdir()
    (tmp_path / "presets-loop" / "gpus.toml").symlink_to("gpus.toml")
    (tmp_path / "presets-tiny").mkdir()  # a user's GPU at the flags' extremes: 1e-300 TFLOP/s
    (tmp_path / "presets-tiny" / "gpus.toml").write_text(
        '[X1]\ntflops = { fp32 = 1e-300 }\nmemory_bandwidth_GBps = 100\nmemory_GiB = 16\n'
        'default_precision = "fp32"\nmfu = { fp32 = 0.5 }\nmemory_efficiency = 0.8\ndispatch_us = 20\n'
        'source = "a typo"\n'
    )
    link = 'description = "x"\nbandwidth_Gbps = 100\nlatency_us = 10\nsource = "y"\n'
    for folder, entry in (
        ("presets-fabric", f'[inter.efa-100]\n{link}fabric = "efa"\n'),  # a fabric the margins know nothing of
        ("presets-cap", f'[inter.cap-100]\n{link}fabric = "tcp"\nflow_cap_Gbps = 10\n'),  # a cap with no source
    ):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "networks.toml").write_text(entry)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_corpus_is_large_and_covers_every_verb():
    from tests.test_commands import COMMANDS

    verbs = {c.argv[0] for c in CASES}
    assert len(CASES) >= 40
    assert verbs == {path[0] for path in COMMANDS}, verbs


@pytest.mark.parametrize("bad", CASES, ids=lambda c: c.id)
def test_bad_input_is_one_named_line_exit_2_and_changes_nothing(bad: Case, workdir: Path):
    if "badmodel-profile.json" in bad.argv and importlib.util.find_spec("torch") is None:
        pytest.skip("without torch the profile's model is never built: its activations are said unknown")
    before = snapshot(workdir)
    res = runner.invoke(app, list(bad.argv))
    assert res.exit_code == 2, (res.exit_code, res.output)
    assert "Traceback" not in res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("error: "), lines
    assert snapshot(workdir) == before, "a failed command wrote, changed or removed files"
    if "needs Holistic Trace Analysis" in lines[0] and importlib.util.find_spec("hta") is None:
        pytest.skip("the [trace] extra (holistictraceanalysis) is absent: the trace itself is not read")
    if "torch is not installed" in lines[0] and importlib.util.find_spec("torch") is None:
        pytest.skip("the [cluster] extra (torch) is absent: profile refuses before it reads its options")
    assert bad.names.lower() in lines[0].lower(), lines[0]


def test_fixtures_are_what_they_claim():
    """The corpus's profile is valid and its corrupt one is not JSON (else the cases test nothing)."""
    json.loads(FIXTURES["profile.json"])
    with pytest.raises(json.JSONDecodeError):
        json.loads(FIXTURES["corrupt.json"])


def test_without_torch_a_profiles_model_leaves_its_activations_unknown_not_a_traceback(workdir, monkeypatch):
    """advise needs no torch: the profile's model (built on FakeTensors with torch) is then not estimated,
    and the memory line says what would settle it."""
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a, **k: None if name == "torch" else real(name, *a, **k)
    )
    res = runner.invoke(app, ["advise", "--profile", "badmodel-profile.json", "--gpu-memory-gib", "40", "--format", "json"])
    assert res.exit_code == 0, res.output
    memory = json.loads(res.stdout)["memory"]
    assert "needs torch" in json.dumps(memory) and "--activation-gib" in json.dumps(memory)
