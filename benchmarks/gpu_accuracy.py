"""GPU accuracy benchmark: profile -> advise -> validate on the GPUs of this machine, as a user runs it.

For each configuration (ranks on this machine, tokens per rank) it runs the shell commands a new user
runs: `rtmodel profile --model M --precision P ...`, `rtmodel advise --profile ... --format json`, and
`rtmodel validate --profile ... --recommended` plus `--topology T` for the other topologies asked for.
Every validate also runs DDP, so each configuration yields DDP's and each topology's predicted and
measured mean iteration time. Per configuration the advisor's pick is right when the fastest measured
method (DDP or a topology) is the one the advisor predicts fastest among those run.

With one GPU the ranks share it (gloo on that GPU, rtmodel_util.backend_choice), so this measures the
one-GPU user's path; with N GPUs a configuration of N ranks runs NCCL.

    python -m benchmarks.gpu_accuracy                       # the default configurations (needs a GPU)
    python -m benchmarks.gpu_accuracy --tiny --out-dir D    # seconds on a CPU: the pipeline, not the GPU

Writes gpu-accuracy.json (header: device, host CPU, versions, date; every run), gpu-accuracy.md, and runs/
(each configuration's profile and validation records): `python -m benchmarks.gpu_accuracy_rescore DIR`
re-predicts the runs from them with today's model, without a GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from rtmodel_validation.results import ValidationResult

PICK_TOLERANCE = 0.10  # a pick measured this close to the fastest method is right (noise between equals)
RESULTS_DIR = Path(__file__).resolve().parent / "results" / "gpu-accuracy"
REPO_ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Config:
    ranks: int
    batch_per_rank: int  # the model's units: tokens for the transformers
    topologies: tuple[str, ...]  # validated beside --recommended (each run also runs DDP)

    @property
    def name(self) -> str:
        return f"{self.ranks}r-{self.batch_per_rank}"


# Transformer-base with the paper's recipe (fp16 autocast + GradScaler); per-GPU batches around the
# paper's 25k-token global batch over 8..64 GPUs.
DEFAULT_CONFIGS = (Config(2, 3200, ("ring",)), Config(4, 3200, ("one-peer-exp",)), Config(2, 12800, ()))
TINY_CONFIGS = (Config(2, 64, ("ring",)),)


@dataclass(frozen=True)
class Run:
    config: str
    ranks: int
    batch_per_rank: int
    method: str  # "allreduce" or the topology
    recommended: bool
    predicted_ms: float
    measured_ms: float
    backend: str
    device: str

    @property
    def error(self) -> float:
        return (self.predicted_ms - self.measured_ms) / self.measured_ms


def _rtmodel(args: list[str], timeout_s: float) -> str:
    """One `rtmodel` command as a user types it; its stdout, or SystemExit with its last error line."""
    cmd = [sys.executable, "-m", "rtmodel_cli", *args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, cwd=REPO_ROOT)
    if done.returncode:
        tail = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise SystemExit(f"`rtmodel {' '.join(args)}` failed ({done.returncode}): {tail}")
    return done.stdout


def _runs_of(result: ValidationResult, cfg: Config) -> list[Run]:
    """DDP's and the topology's rows of one `validate --format json` result."""
    rows = []
    for method, comp in (("allreduce", result.allreduce), (result.topology, result.decentralized)):
        rows.append(
            Run(
                cfg.name,
                cfg.ranks,
                cfg.batch_per_rank,
                method,
                bool(result.recommended),
                comp.predicted_mean_s * 1e3,
                comp.measured.mean_s * 1e3,
                result.backend,
                result.device,
            )
        )
    return rows


def score_pick(runs: list[Run], pick: str) -> tuple[str, float]:
    """(the fastest measured method, how much slower the advisor's pick measured than it).

    DDP ran in every validate: its fastest run stands for it, as in benchmarks.accuracy. A pick that
    was not run counts as infinitely slow."""
    measured: dict[str, float] = {}
    for r in runs:
        measured[r.method] = min(measured.get(r.method, r.measured_ms), r.measured_ms)
    fastest = min(measured, key=measured.get)
    return fastest, (measured[pick] / measured[fastest] - 1 if pick in measured else float("inf"))


def run_config(
    cfg: Config,
    work: Path,
    model: str,
    precision: str,
    iterations: int,
    model_args: list[str],
    timeout_s: float,
) -> dict:
    """Profile, advise and validate one configuration; returns its runs and the advisor's pick."""
    profile = work / f"profile-{cfg.name}.json"
    margs = [x for a in model_args for x in ("--model-arg", a)]
    _rtmodel(
        [
            "profile",
            "--model",
            model,
            "--precision",
            precision,
            "--batch-per-rank",
            str(cfg.batch_per_rank),
            "--nproc-per-node",
            str(cfg.ranks),
            "--quick",
            "--out",
            str(profile),
            *margs,
        ],
        timeout_s,
    )
    advice = json.loads(_rtmodel(["advise", "--profile", str(profile), "--format", "json"], timeout_s))
    runs: list[Run] = []
    pick, too_close = None, False
    for extra in (["--recommended"], *(["--topology", t] for t in cfg.topologies)):
        out = _rtmodel(
            [
                "validate",
                "--profile",
                str(profile),
                *extra,
                "--iterations",
                str(iterations),
                "--format",
                "json",
                "--results",
                str(work / "runs.jsonl"),
                "--quiet",
            ],
            timeout_s,
        )
        result = ValidationResult.from_record(json.loads(out))
        if pick is None:  # the --recommended run's: this machine's advice
            pick, too_close = result.advisor.recommendation, result.advisor.too_close_to_call
        runs += _runs_of(result, cfg)
    in_flight, two_groups = in_flight_gains(json.loads(profile.read_text()))
    # `advise --profile`: links it did not measure
    return config_result(asdict(cfg), runs, pick, too_close) | {
        "advice_for_a_cluster": advice.get("recommendation"),
        "in_flight_gain": in_flight,
        "two_groups_gain": two_groups,
    }


def in_flight_gains(profile_doc: dict) -> tuple[dict[str, float], dict[str, float]]:
    """(pattern -> how many times the one-at-a-time rate the profile's buckets moved all in flight,
    pattern -> how many times that they moved over two groups, where measured)."""
    from rtmodel_documents.profile_document import ProfileCommunication

    flights = ProfileCommunication.from_json(profile_doc["communication"], "profile").in_flight or ()
    return (
        {r.pattern: r.gain for r in flights},
        {r.pattern: r.group_gain for r in flights if r.group_gain is not None},
    )


def config_result(config: dict, runs: list[Run], pick: str, too_close: bool = False) -> dict:
    """One configuration's entry in gpu-accuracy.json: its runs and how the advisor's pick scored (a
    verdict too close to call keeps All-Reduce and validates its candidate: it is scored as All-Reduce
    and counted apart)."""
    fastest, pick_slower = score_pick(runs, pick)
    return {
        "config": config,
        "runs": [asdict(r) | {"error": r.error} for r in runs],
        "pick": pick,
        "too_close_to_call": too_close,
        "measured_fastest": fastest,
        "pick_slower_than_fastest": pick_slower,
        # right when the method the advisor picked measured within 10 % of the fastest: two topologies
        # that are one schedule at this size (complete and ring on 2 ranks) differ only by noise
        "pick_right": pick_slower <= PICK_TOLERANCE,
    }


def environment() -> dict:
    """Device, host CPU and versions, as every committed GPU result carries them."""
    import torch

    from benchmarks.gpu_compute import host_cpu_model
    from rtmodel_harness.distributed import nccl_version

    cuda = torch.cuda.is_available()
    return {
        "date_utc": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "device": torch.cuda.get_device_name(0) if cuda else "cpu",
        "gpus": torch.cuda.device_count(),
        "host_cpu": host_cpu_model() or platform.processor(),
        "cpu_cores": os.cpu_count(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "nccl": nccl_version(),
        "python": platform.python_version(),
        "command": " ".join(sys.argv),
    }


def summarise(configs: list[dict]) -> dict:
    errors = [abs(r["error"]) for c in configs for r in c["runs"]]
    return {
        "runs": len(errors),
        "mean_abs_error": sum(errors) / len(errors) if errors else None,
        "max_abs_error": max(errors, default=None),
        "picks_right": sum(c["pick_right"] for c in configs),
        "too_close_to_call": sum(bool(c.get("too_close_to_call")) for c in configs),
        "configs": len(configs),
    }


def to_markdown(doc: dict) -> str:
    env, s = doc["environment"], doc["summary"]
    lines = [
        f"# GPU accuracy: {env['device']} x{env['gpus']}, {env['host_cpu']} ({env['cpu_cores']} cores)",
        "",
        f"torch {env['torch']}, CUDA {env['cuda']}, NCCL {env['nccl']}; {env['date_utc']}; "
        f"`{env['command']}`",
        "",
        "| config | method | recommended | backend | predicted ms | measured ms | error |",
        "|---|---|---|---|---|---|---|",
    ]
    for c in doc["configs"]:
        for r in c["runs"]:
            lines.append(
                f"| {r['config']} | {r['method']} | {'yes' if r['recommended'] else ''} | {r['backend']} "
                f"| {r['predicted_ms']:.1f} | {r['measured_ms']:.1f} | {r['error']:+.1%} |"
            )
    if s["runs"]:
        lines += [
            "",
            f"{s['runs']} runs: mean |error| {s['mean_abs_error']:.1%}, max {s['max_abs_error']:.1%}; "
            f"advisor's pick right in {s['picks_right']}/{s['configs']} configurations"
            + (
                f" ({s['too_close_to_call']} too close to call: All-Reduce kept)"
                if s.get("too_close_to_call")
                else ""
            ),
        ]
    for c in doc["configs"]:
        lines.append(
            f"- {c['config']['ranks']} ranks x {c['config']['batch_per_rank']}: advisor's pick "
            f"{c['pick']}{' (too close to call)' if c.get('too_close_to_call') else ''} (measured {c['pick_slower_than_fastest']:+.1%} slower than the fastest), measured fastest "
            f"{c['measured_fastest']}"
            + _in_flight_words(c.get("in_flight_gain"))
            + _two_groups_words(c.get("two_groups_gain"))
        )
    return "\n".join(lines) + "\n"


def _in_flight_words(gains: dict[str, float] | None) -> str:
    """What the profile measured of the buckets all in flight (the model charges them one at a time)."""
    if not gains:
        return ""
    from rtmodel_documents.profile_communication import in_flight_owner

    words = [f"{in_flight_owner(p)} on {p} {g:.2f}x" for p, g in gains.items()]
    return f"; buckets in flight moved {', '.join(words)} the one-at-a-time rate (the model charges 1x)"


def _two_groups_words(gains: dict[str, float] | None) -> str:
    """What the profile measured of Decent-DP's buckets over two groups (the model takes it for rounds
    on groups of their own: runtime_model/prediction/group_pipeline.py)."""
    if not gains:
        return ""
    return "; over two groups " + ", ".join(f"{g:.2f}x that on {p}" for p, g in gains.items())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.gpu_accuracy", description=__doc__.splitlines()[0]
    )
    ap.add_argument("--out-dir", type=Path, default=RESULTS_DIR)
    ap.add_argument("--model", default="transformer-base")
    ap.add_argument("--precision", default=None, help="default: fp16 (the paper's), bf16 with --tiny (CPU)")
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument(
        "--tiny", action="store_true", help="a tiny model on the CPU: checks the pipeline in seconds"
    )
    ap.add_argument("--timeout-s", type=float, default=300.0, help="per command")
    names = [c.name for c in DEFAULT_CONFIGS]
    ap.add_argument(
        "--configs", nargs="+", choices=names, help="only these (default: all; a short lease: one)"
    )
    args = ap.parse_args(argv)
    if not args.out_dir.is_dir():
        ap.error(f"--out-dir {args.out_dir} is not a directory")
    configs = TINY_CONFIGS if args.tiny else DEFAULT_CONFIGS
    if args.configs and not args.tiny:
        configs = tuple(c for c in configs if c.name in args.configs)
    model_args = ["width_div=16"] if args.tiny else []
    args.precision = args.precision or ("bf16" if args.tiny else "fp16")
    doc: dict = {
        "environment": environment(),
        "model": args.model,
        "precision": args.precision,
        "configs": [],
    }
    work = args.out_dir / "runs"  # each configuration's profile and validation records, to re-score from
    work.mkdir(exist_ok=True)
    for cfg in configs:
        start = time.monotonic()
        doc["configs"].append(
            run_config(cfg, work, args.model, args.precision, args.iterations, model_args, args.timeout_s)
        )
        doc["summary"] = summarise(doc["configs"])
        (args.out_dir / "gpu-accuracy.json").write_text(json.dumps(doc, indent=1))  # kept if a later one dies
        print(f"[gpu_accuracy] {cfg.name}: {time.monotonic() - start:.0f} s", file=sys.stderr, flush=True)
    text = to_markdown(doc)
    (args.out_dir / "gpu-accuracy.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
