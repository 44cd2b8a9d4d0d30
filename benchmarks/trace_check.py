"""The model rebuilt from real torch.profiler traces against the iterations they measured (issue 49).

    python -m benchmarks.trace_check TRACE_OR_DIR [TRACE_OR_DIR ...] [--out FILE.json]

Each argument is one run: a trace file, or a directory of its ranks' traces. For each run: the GPU and
world, the measured iteration (the slowest traced rank's mean), the rebuilt DDP step at the trace's own
shape and its error, the all-reduce exposed past backward (measured, predicted), and the buckets'
all-reduce per iteration as traced against the links the model assumes for other n (presets). A run the
reader refuses is listed with its one-line reason. Nothing here is fitted to the traces' iterations.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from calibration.trace.gpu_names import gpu_preset_of
from calibration.trace.trace_errors import TraceError
from calibration.trace.trace_scenario import read_traces, scenario_from_traces
from runtime_model.presets import to_model as presets


def check_run(path: Path, library) -> dict:
    """One run's row: what the trace measured and what the rebuilt model gives at its shape."""
    try:
        traces = read_traces([path])
        first = traces[0]
        gpu = gpu_preset_of(first.gpu_name, first.gpu_memory_bytes, library.gpus)
        network, intra = presets.link_names(None, None, gpu, library)
        net = presets.network_preset(network, intra, library)
        traced = scenario_from_traces(traces, max(1, first.world_size), None, net, gpu)
    except TraceError as exc:
        return {"run": str(path), "refused": str(exc)}
    c = traced.check
    return {
        "run": str(path),
        "gpu": first.gpu_name,
        "preset": gpu,
        "world_size": first.world_size,
        "ranks_traced": len(traces),
        "steps": sum(len(t.steps) for t in traces),
        "measured_ms": c.measured_s * 1e3,
        "predicted_ms": c.predicted_s * 1e3,
        "error": c.error,
        "tail_measured_ms": c.tail_measured_s * 1e3,
        "tail_predicted_ms": c.tail_predicted_s * 1e3,
        "allreduce_traced_ms": c.allreduce_measured_s * 1e3,
        "allreduce_links_ms": c.allreduce_links_s * 1e3,
        "links": net.name,
        "rank_compute_spread": traced.spread.compute_spread,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    library = presets.load_library(())
    rows = [check_run(p, library) for p in args.runs]
    for r in rows:
        if "refused" in r:
            print(f"{r['run']}: refused: {r['refused']}")
            continue
        print(
            f"{Path(r['run']).name}: {r['gpu']} ({r['preset']}), {r['ranks_traced']}/{r['world_size']} ranks, "
            f"{r['steps']} steps: measured {r['measured_ms']:.1f} ms, rebuilt {r['predicted_ms']:.1f} ms "
            f"({r['error']:+.1%}); exposed {r['tail_measured_ms']:.2f} vs {r['tail_predicted_ms']:.2f} ms; "
            f"all-reduce traced {r['allreduce_traced_ms']:.2f} ms, {r['links']} alone {r['allreduce_links_ms']:.2f} ms"
        )
    checked = [r for r in rows if "error" in r]
    if checked:
        errors = [abs(r["error"]) for r in checked]
        print(f"{len(checked)} runs: mean |error| {sum(errors) / len(errors):.2%}, max {max(errors):.2%}")
    if args.out:
        args.out.write_text(json.dumps({"runs": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
