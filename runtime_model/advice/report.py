"""Render an Advice as JSON (schema `rtmodel-advice/1`) or CSV; the terminal table is rtmodel_cli/tables.py.

JSON schema `rtmodel-advice/1` (stable; fields are only ever added):
  schema: "rtmodel-advice/1"
  inputs: {gpus, gpus_per_node, nodes, network, compute: {forward_s, backward_s, optimizer_s, distribution},
           message_bytes, ...preset choices}
  provenance: {parameter: where it came from}
  predictions[]: {topology, applicable, reason, iteration_s: {mean, p50, p99}, speedup_vs_allreduce,
                  factors: {overlap_s, links_s, variance_s, uneven_s, total_s} | null,
                  consensus: {...} | null, convergence: {kind, transient_ratio, term_factor, about,
                  time_to_loss_vs_allreduce, time_to_loss_vs_allreduce_at_least} | null,
                  comm_s, exposed_comm_s, compute_wait_s, optimizer_s, uncertainty_s, decent_dp_builtin,
                  runs_on_decent_dp, vs_best}
                 (the first entry is "allreduce", the DDP baseline)
                 consensus: {exact_rounds, rho, rho_per_round, spectral_gap, transient_proxy, method,
                             worst_round_contraction, tau_over_p} (runtime_model.convergence.consensus)
                 runs_on_decent_dp: Schedule.decent_dp_runnable (reason: the note why not)
                 convergence: what the consensus costs in iterations (runtime_model.convergence.consensus_cost), and
                              time_to_loss_vs_allreduce (null where not known) / _at_least
                 vs_best: "best" (the option the verdict names: the pick, or a too-close verdict's
                          candidate; the fastest where that is not within `margin` of it: vs_best()),
                          "equivalent" (mean within `margin` of the fastest runnable mean, All-Reduce
                          included) or null
  recommendation: {topology, speedup_vs_allreduce, too_close_to_call, verdict, code, torchrun, equivalent,
                   candidate, objective}
                  equivalent: the options whose vs_best is "equivalent"; candidate: with too_close_to_call,
                  the decentralized option to validate; objective: "iteration" or "accuracy"
  margin: relative margin on speedups used for "equivalent" (the same as margins.equivalence)
  margins: {equivalence, interval (the verdict's held-out speedup error), interval_evidence (class, checks,
           sources, held_out_coverage, ...; null where --margin gave it)}
  crossover[] (advise's answer, not a sweep's): {quantity, topology, unit, current, crossover, wins,
              searched}: where `topology` (the option the verdict names, or the best gossip option when
              All-Reduce is kept outright: crossover.crossover_topology)
              ties All-Reduce as inter_bandwidth_gbit_s, compute_ms or compute_cv moves alone; crossover
              null where it wins (or loses) over the whole `searched` range; that topology's prediction
              entry repeats the three as `crossover: {quantity: value}` (the CSV's crossover_* columns)
  memory (where memory was asked): {device, capacity_bytes, activation_bytes, activation_source, recipe,
          gossip_optimizer}; every entry then has memory: {bytes, parts, capacity_bytes, fits,
          activations_known} (runtime_model.advice.memory_report), the All-Reduce family's sharded rows
          (fsdp, zero2, zero1, hsdp) are entries of family "all-reduce", and baseline names the entry every
          speedup is against: "allreduce" (DDP), or the fastest sharded row that fits where DDP does not
          (then the first entry is that row)
  settle (with crossover[]): the one measurement that would settle the verdict, never one given (the
          validation run then), or null (crossover.settle_line)
"""

from __future__ import annotations

import io
from dataclasses import asdict

from runtime_model.advice.advisor import Advice, TopologyRow
from runtime_model.advice.columns import CSV_COLUMNS
from runtime_model.advice.crossover import crossover_dict, settle_line
from runtime_model.advice.family_report import allreduce_shared, families_dict, gossip_shared, local_sgd_entry
from runtime_model.advice.memory_report import add_memory
from runtime_model.convergence.consensus_cost import EXACT, EXACT_COST, MEASURED, ConsensusCost
from runtime_model.core.document_header import document_header, schema_tag
from runtime_model.core.jsonsafe import json_safe
from runtime_model.core.scenario import ClusterShape, Scenario
from runtime_model.prediction.iteration import IterationPrediction

KIND, VERSION = "advice", 1
# "rtmodel-advice/1": every rtmodel document's header has this form (core.document_header)
SCHEMA = schema_tag(KIND, VERSION)


def _pred_dict(p: IterationPrediction) -> dict:
    return {
        "iteration_s": {"mean": p.mean_s, "p50": p.p50_s, "p99": p.p99_s},
        "comm_s": p.comm_s,
        "exposed_comm_s": p.exposed_comm_s,
        "compute_wait_s": p.compute_wait_s,
        "optimizer_s": p.optimizer_s,
    }


def _convergence_dict(cost: ConsensusCost, time_vs_allreduce: float) -> dict:
    """The consensus cost and the time to All-Reduce's loss relative to All-Reduce's own: known where the
    iterations are All-Reduce's (exact, measured), else only its lower bound, the per-iteration ratio."""
    known = cost.kind in (EXACT, MEASURED)
    return {
        **asdict(cost),
        "about": cost.describe(),
        "time_to_loss_vs_allreduce": time_vs_allreduce if known else None,
        "time_to_loss_vs_allreduce_at_least": time_vs_allreduce,
    }


def advice_to_dict(advice: Advice, inputs: dict | None = None) -> dict:
    """The JSON document of schema `rtmodel-advice/1` (module doc); `inputs` are added to its inputs."""
    marks = vs_best(advice)
    preds = [_allreduce_entry(advice, marks)]
    preds += [_topology_entry(r, marks) for r in advice.rows]
    for entry, row in zip(preds[1:], advice.rows, strict=True):
        entry.update(gossip_shared(advice.scenario, row))
    preds[0].update(allreduce_shared(advice.scenario, advice.allreduce.mean_s))
    preds += [local_sgd_entry(r) for r in advice.local_sgd]
    doc = {
        **document_header(KIND, VERSION),
        "inputs": _inputs_dict(advice.scenario, inputs),
        "provenance": advice.provenance,
        "notes": advice.notes,
        "predictions": preds,
        "recommendation": _recommendation_dict(advice, marks),
        "margin": advice.margin,
        "margins": margins_dict(advice),
    }
    add_memory(advice, preds, doc)
    if advice.local_sgd:
        doc["families"] = families_dict(advice.families, advice.family_verdict, advice.objective)
    if advice.tuned_ddp is not None:
        doc["tuned_ddp"] = advice.tuned_ddp.to_dict()
    if advice.crossovers:
        doc["crossover"] = [crossover_dict(c) for c in advice.crossovers]
        doc["settle"] = settle_line(advice) or None
        entry = next(e for e in preds if e["topology"] == advice.crossovers[0].topology)
        entry["crossover"] = {c.quantity: c.at for c in advice.crossovers}
    return json_safe(doc)


def margins_dict(advice: Advice) -> dict:
    """The two margins, each named for what it is: `equivalence` (the typical speedup error: options this
    close are equivalent; the same figure as the top-level `margin`) and `interval` (the held-out speedup
    error the verdict states: published speedups lie in s / (1 + interval) .. s / (1 - interval)), with the
    evidence behind the interval (None where it was given, not measured)."""
    return {
        "equivalence": advice.margin,
        "interval": advice.verdict_margin,
        "interval_evidence": advice.interval_evidence,
    }


def _allreduce_entry(advice: Advice, standing: dict) -> dict:
    """The first prediction entry: DDP's All-Reduce, the baseline every speedup is relative to."""
    return {
        "topology": "allreduce",
        "applicable": True,
        "reason": None,
        **_pred_dict(advice.allreduce),
        "speedup_vs_allreduce": 1.0,
        "factors": None,
        "consensus": {
            "exact_rounds": 1,
            "rho": 0.0,
            "method": "global average every iteration",
            "worst_round_contraction": 0.0,
            "tau_over_p": 1.0,
        },
        "convergence": _convergence_dict(EXACT_COST, 1.0),
        "uncertainty_s": advice.allreduce_uncertainty_s,
        "decent_dp_builtin": False,
        "vs_best": standing.get("allreduce"),
    }


def _topology_entry(r: TopologyRow, standing: dict) -> dict:
    """The prediction entry of one gossip topology (its prediction fields null where it does not apply)."""
    entry = {"topology": r.topology, "applicable": r.applicable, "reason": r.reason}
    if r.prediction is not None:
        f = r.prediction.factors
        entry.update(_pred_dict(r.prediction))
        entry.update(
            speedup_vs_allreduce=r.speedup,
            factors={
                "overlap_s": f.overlap_s,
                "links_s": f.links_s,
                "variance_s": f.variance_s,
                "uneven_s": f.uneven_s,
                "total_s": f.total_s,
            },
            consensus=asdict(r.consensus),
            convergence=_convergence_dict(r.convergence, 1.0 / r.speedup),
            per_round_comm_s=list(r.prediction.per_round_comm_s),
            uncertainty_s=r.uncertainty_s,
        )
    else:
        entry.update(
            iteration_s=None, speedup_vs_allreduce=None, factors=None, consensus=None, convergence=None
        )
    entry["decent_dp_builtin"] = r.decent_dp_builtin
    entry["runs_on_decent_dp"] = r.runnable and r.applicable
    entry["library"] = r.library
    entry["vs_best"] = standing.get(r.topology)
    return entry


def _inputs_dict(sc: Scenario, inputs: dict | None) -> dict:
    """The scenario the predictions are for (cluster, network, compute, buckets), then `inputs`."""
    comp = sc.compute
    return {
        "gpus": sc.shape.gpus,
        "gpus_per_node": sc.shape.gpus_per_node,
        "nodes": sc.shape.nodes,
        "network": {
            "name": sc.network.name,
            "intra": {
                "latency_s": sc.network.intra.latency_s,
                "bandwidth_Bps": sc.network.intra.bandwidth_Bps,
            },
            "inter": {
                "latency_s": sc.network.inter.latency_s,
                "bandwidth_Bps": sc.network.inter.bandwidth_Bps,
            },
            "measured_group_costs": sorted(sc.network.group_costs),
        },
        "compute": {
            "forward_s": comp.forward_s,
            "backward_s": comp.backward_s,
            "optimizer_s": comp.optimizer_s,
            "distribution": comp.distribution.describe(),
            "step_spread": None if comp.step_spread is None else comp.step_spread.describe(),
            "source": comp.source,
        },
        "message_bytes": sc.buckets.message_bytes,
        "ddp_buckets": len(sc.buckets.ddp),
        "gossip_buckets": len(sc.buckets.gossip),
        **(inputs or {}),
    }


def vs_best(advice: Advice) -> dict[str, str]:
    """The "vs best" marks (advisor.marks): 'best' on the option the verdict names, where it is within the
    margin of the fastest ranked option, else on the fastest."""
    return advice.standing()


def _recommendation_dict(advice: Advice, marks: dict[str, str]) -> dict:
    """The recommendation; `equivalent` the options `marks` (vs_best) calls equivalent, as documented."""
    rec = advice.recommendation
    return {
        "topology": rec.topology,
        "speedup_vs_allreduce": rec.speedup,
        "too_close_to_call": rec.too_close_to_call,
        "verdict": rec.verdict,
        "code": rec.code_line,
        "torchrun": rec.torchrun_line,
        "equivalent": [name for name, mark in marks.items() if mark == "equivalent"],
        "candidate": rec.candidate,
        "objective": advice.objective,
    }


def to_json(advice: Advice, inputs: dict | None = None) -> str:
    import json  # here: a table answer never needs it

    return json.dumps(advice_to_dict(advice, inputs), indent=2)


def to_csv(advice: Advice, inputs: dict | None = None) -> str:
    """One row per prediction entry of the JSON, columns from `columns.CSV_COLUMNS`."""
    import csv

    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow([c.name for c in CSV_COLUMNS])
    for entry in advice_to_dict(advice, inputs)["predictions"]:
        w.writerow([c.csv_text(entry) for c in CSV_COLUMNS])
    return buf.getvalue()


TOPOLOGY_CSV_FIELDS = (
    "topology",
    "applicable",
    "period",
    "group_sizes",
    "exact_rounds",
    "rho",
    "decent_dp_name",
    "description",
    "reason",
    "runs_on_decent_dp",
    "worst_round_contraction",
    "tau_over_p",
)


def topology_rows(shape: ClusterShape, with_rounds: bool = False) -> list[dict]:
    """`rtmodel topologies` data: every schedule for `shape`, or why it does not fit.

    Whether Decent-DP runs it is `Schedule.decent_dp_runnable` and `reason` its note, exactly as in
    the advice's prediction entries (same keys: runs_on_decent_dp, decent_dp_builtin, reason). Above
    symmetry.FULL_MAX_N ranks the rounds, sizes and consensus come from the reduced system (as advise's do),
    so n = 2^24 costs what n = 4,096 does."""
    from runtime_model.prediction.reduced_system import topology_model
    from runtime_model.topology.registry import TOPOLOGIES, TopologyNotApplicable, topology_names

    rows = []
    for name in topology_names():
        info = TOPOLOGIES[name]
        try:
            model = topology_model(name, shape)
        except TopologyNotApplicable as exc:
            rows.append(
                {"topology": name, "description": info.description, "applicable": False, "reason": str(exc)}
            )
            continue
        rounds = None
        if with_rounds and model.schedule is not None:
            rounds = [r.groups() for r in model.schedule.rounds]
        rows.append(
            {
                "topology": name,
                "description": info.description,
                "applicable": True,
                "period": model.period,
                "group_sizes": model.group_sizes(),
                "decent_dp_name": info.decent_dp_name,
                "consensus": asdict(model.consensus()),
                "rounds": rounds,
                "reason": model.decent_dp_note,
                "runs_on_decent_dp": model.decent_dp_runnable,
                "library": model.exchange.library,
                "decent_dp_builtin": info.decent_dp_name is not None,
            }
        )
    return rows


def topology_rows_json(rows: list[dict], shape: ClusterShape) -> str:
    """`rtmodel topologies --format json`: headed like every rtmodel document, the shape, then the rows."""
    import json

    doc = {**document_header("topologies", 1), "gpus": shape.gpus, "gpus_per_node": shape.gpus_per_node}
    return json.dumps(json_safe({**doc, "topologies": rows}), indent=2, default=str)


def topology_rows_csv(rows: list[dict]) -> str:
    import csv

    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(TOPOLOGY_CSV_FIELDS)
    for r in rows:
        c = r.get("consensus") or {}

        def num(key: str, c=c) -> str:
            return "" if c.get(key) is None else f"{c[key]:.6g}"

        w.writerow(
            [
                r["topology"],
                r["applicable"],
                r.get("period", ""),
                " ".join(map(str, r.get("group_sizes", []))),
                "" if c.get("exact_rounds") is None else c["exact_rounds"],
                num("rho"),
                r.get("decent_dp_name") or "",
                r["description"],
                r.get("reason") or "",
                r.get("runs_on_decent_dp", ""),
                num("worst_round_contraction"),
                num("tau_over_p"),
            ]
        )
    return buf.getvalue()
