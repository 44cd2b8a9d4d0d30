"""A validation's result, the JSONL file that accumulates them, and the readers of that file.

Why an append-only JSONL file: every validation on every cluster adds one line (timestamp, shape,
topology, predicted and measured numbers), so the model's accuracy claim is backed by an
ever-growing record that `rtmodel validate --report` summarises. Per-iteration times stay in the
returned result (and `--format json`), not in the file, so records stay small at large n.

A record starts with the header every rtmodel document has, `{"schema": "rtmodel-validation/1"}`
(files written before it say `{"kind": "rtmodel-validation", "version": 1}`; both read);
`ValidationResult.from_record` reads one back typed. Two readers share one line parser: `read_records` (the accuracy summary; skips and counts lines that
are not validation records, since the file may be shared) and `read_parity_points` (predicted vs
measured pairs for plots; refuses a broken line by number, since a plot silently missing points
misleads). The file as an output (what its lines may be, checked before a run; each record appended
whole, under its lock) is rtmodel_validation.results_file's.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rtmodel_validation.errors import ValidationError
from rtmodel_validation.results_file import (
    RECORD_KIND,
    RECORD_VERSION,
    append_line,
    check_results_file,
    pair_ms,
    probe_lock,
)
from runtime_model.core.document_header import HeaderError, check_header, document_header, header_of
from runtime_model.core.jsonsafe import json_safe

if TYPE_CHECKING:  # annotations only: importing this module (validate's --help) stays numpy-free
    from rtmodel_validation.analysis import Comparison, Verdict
    from rtmodel_validation.plan import AdvisorSummary
    from runtime_model.core.scenario import ClusterShape

# Where validations are recorded unless --results says otherwise: the working directory, one file per
# project (a file per user in its data directory mixed unrelated projects' runs in one --report).
DEFAULT_RESULTS_NAME = "rtmodel-validations.jsonl"
DEFAULT_RESULTS_DOC = f"./{DEFAULT_RESULTS_NAME}, in the directory validate runs in (one file per project)"
LOCAL_SGD_KEYS = ("local_sgd", "local_sgd_run")  # in a record only when the validation ran local SGD
FSDP_KEY = "fsdp"  # in a record only when the validation ran the sharded baseline (--baseline fsdp)
# a run's memory (rtmodel_validation.analysis.Comparison), in its record when anything of it is known
PEAK_MEMORY_KEYS = (
    "peak_memory_bytes",
    "peak_memory_source",
    "predicted_peak_memory_bytes",
    "predicted_peak_memory_source",
)


@dataclass
class ValidationResult:
    """Both runs of one validation next to the model's predictions for that exact shape."""

    timestamp_utc: str
    profile: str
    shape: ClusterShape  # the run's ranks (gpus) and ranks per (possibly pretend) node
    topology: str  # rtmodel's name of the topology Decent-DP ran
    decent_dp_topology: str
    recommended: bool
    workload: dict
    iterations: int
    warmup: int
    allreduce: Comparison  # PyTorch DDP
    decentralized: Comparison  # Decent-DP on `topology`
    verdict: Verdict
    # max, mean, per_rank: ||x_i - mean x|| after the run (global_avg(return_d2c))
    distance_to_consensus: dict
    ranks: list[dict]  # rank, host, local_rank per rank
    device: str
    backend: str
    advisor: AdvisorSummary | None = None
    notes: list[str] = field(default_factory=list)
    times_s: dict[str, list[list[float]]] = field(default_factory=dict)  # run -> per rank -> per iteration
    local_sgd: Comparison | None = None  # local SGD (validate --local-sgd-h), per inner step; None: not run
    local_sgd_run: dict | None = None  # its options, warm-up and timed inner steps, the prediction's parts
    # the bare step now against the profile's, errors with today's compute (drift.py)
    drift: dict | None = None
    fsdp: Comparison | None = None  # FSDP2, ZeRO-3 (validate --baseline fsdp); None: not run

    def to_record(self) -> dict:
        """The JSONL line: everything but the per-iteration times."""
        d = asdict(self)
        d.pop("times_s")
        d.pop("shape")
        # without local SGD or a drift check: the record it always wrote
        for key in (*LOCAL_SGD_KEYS, "drift", FSDP_KEY):
            if d[key] is None:
                d.pop(key)
        for key in ("allreduce", "decentralized", "local_sgd", FSDP_KEY):
            run = d.get(key)
            if run is not None and all(run[k] is None for k in PEAK_MEMORY_KEYS):
                for k in PEAK_MEMORY_KEYS:  # a run with no memory measured or predicted: the record it was
                    run.pop(k)
        s = self.shape  # the file's own names (record version 1), which existing files use
        shape = {"world_size": s.gpus, "ranks_per_node": s.gpus_per_node, "nodes": s.nodes}
        return {**document_header(RECORD_KIND, RECORD_VERSION), "shape": shape, **d}

    def to_dict(self) -> dict:
        """`--format json`: the record plus per-iteration times of every rank."""
        return {**self.to_record(), "times_s": self.times_s}

    @classmethod
    def from_record(cls, rec: Any) -> ValidationResult:
        """The inverse of to_record (and of to_dict, with its times): a record as written, parsed from
        the file or not, in either header. Numbers the file holds as null (JSON has no inf or NaN) read
        back as NaN. ValidationError (one line) for another document, a newer record or a missing field."""
        from rtmodel_validation.analysis import Comparison, Measured, Verdict
        from rtmodel_validation.plan import AdvisorSummary
        from runtime_model.core.scenario import ClusterShape

        try:
            check_header(rec, RECORD_KIND, RECORD_VERSION, "rtmodel validation record")
        except HeaderError as exc:
            raise ValidationError(f"the record {exc}") from None
        values = _typed(cls, rec, "the validation record", skip=("shape",))
        shape = _typed(_RecordShape, rec["shape"], "the record's shape")

        def comparison(doc: Any, what: str) -> Comparison:
            d = _typed(Comparison, doc, what)
            return Comparison(
                **{**d, "measured": Measured(**_typed(Measured, d["measured"], f"{what}'s measured"))}
            )

        for key in ("allreduce", "decentralized", "local_sgd", FSDP_KEY):
            if values.get(key) is not None:
                values[key] = comparison(values[key], f"the record's {key}")
        values["verdict"] = Verdict(**_typed(Verdict, values["verdict"], "the record's verdict"))
        if values.get("advisor") is not None:
            values["advisor"] = AdvisorSummary.from_json(values["advisor"])
        return cls(shape=ClusterShape(shape["world_size"], shape["ranks_per_node"]), **values)


@dataclass(frozen=True)
class _RecordShape:
    world_size: int
    ranks_per_node: int
    nodes: int


def _typed(cls, doc: Any, what: str, skip: tuple[str, ...] = ()) -> dict:
    """`doc`'s values for the fields of `cls` (those with a default may be absent), floats and tuples as
    the dataclass holds them (null -> NaN); ValidationError naming the first field missing."""
    if not isinstance(doc, dict):
        raise ValidationError(f"{what} must be a JSON object, got {type(doc).__name__}")
    out = {}
    for f in fields(cls):
        if f.name in skip:
            continue
        if f.name not in doc:
            if f.default is MISSING and f.default_factory is MISSING:
                raise ValidationError(f"{what} lacks {f.name}")
            continue
        value = doc[f.name]
        if f.type == "float":
            value = float("nan") if value is None else float(value)
        elif f.type.startswith("tuple[float") and value is not None:
            value = tuple(float("nan") if v is None else float(v) for v in value)
        elif f.type.startswith("tuple[int") and value is not None:
            value = tuple(None if v is None else int(v) for v in value)
        out[f.name] = value
    return out


def dumps(doc: dict, indent: int | None = None) -> str:
    return json.dumps(json_safe(doc), indent=indent)


def default_results_path() -> Path:
    """./rtmodel-validations.jsonl: in the directory validate runs in, one file per project (issue 50: a
    file per user mixed the validations of unrelated projects in one --report). Read when called, so
    the working directory counts."""
    return Path.cwd() / DEFAULT_RESULTS_NAME


DEFAULT_LABEL = "the default results file"


def check_default_results_path(path: Path) -> Path:
    """The default results file can be written once a run is done: not a directory, and its directory
    exists or can be created (its nearest existing ancestor is a writable directory); a results file
    (rtmodel_validation.results_file) whose lock can be taken when it exists. Creates nothing to keep."""
    if path.is_dir():
        raise ValidationError(f"the default results file {path} is a directory; pass --results PATH")
    ancestor = path.parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir() or not os.access(ancestor, os.W_OK | os.X_OK):
        raise ValidationError(
            f"cannot write the default results file {path}: {ancestor} is not a writable directory "
            "(pass --results PATH, or run validate in your project's directory)"
        )
    if path.exists() and not os.access(path, os.W_OK):
        raise ValidationError(f"cannot write the default results file {path} (pass --results PATH)")
    check_results_file(path, f"{DEFAULT_LABEL} {path}")
    if path.parent.is_dir():
        probe_lock(path, DEFAULT_LABEL)
    return path


def append_record(
    path: str | Path, result: ValidationResult, create_dir: bool = False, flag: str = "--results"
) -> Path:
    """Append the result's record as one line, whole or not at all, under the file's lock
    (rtmodel_validation.results_file.append_line: a file that is not a results file is refused, a last line
    without its newline is ended first, a failed write leaves the file as it was).

    create_dir: make the file's directory first (only for rtmodel's own default file; a user's --results
    directory must exist, rtmodel_util.files)."""
    path = Path(path)
    if create_dir:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ValidationError(
                f"cannot create the results directory {path.parent}: {exc.strerror or exc}"
            ) from None
    elif not path.parent.is_dir():
        raise ValidationError(f"cannot write results to {path}: directory {path.parent} does not exist")
    return append_line(path, dumps(result.to_record()), DEFAULT_LABEL if create_dir else flag)


@dataclass(frozen=True)
class ErrorStats:
    n: int
    mean_abs_error: float
    max_abs_error: float
    mean_signed_error: float

    @staticmethod
    def of(errors: list[float]) -> ErrorStats:
        if not errors:
            return ErrorStats(0, float("nan"), float("nan"), float("nan"))
        absolute = [abs(e) for e in errors]
        return ErrorStats(len(errors), sum(absolute) / len(errors), max(absolute), sum(errors) / len(errors))


@dataclass(frozen=True)
class ResultsSummary:
    """Accuracy over every record of a results file: all errors, and per run kind (allreduce, each topology)."""

    path: str
    records: int
    skipped_lines: int
    overall: ErrorStats
    by_run: dict[str, ErrorStats]
    verdicts_held: int
    shapes: list[str]

    def to_dict(self) -> dict:
        """`validate --report --format json`: headed like every rtmodel document (core.document_header)."""
        from runtime_model.core.document_header import document_header

        return {**document_header(REPORT_KIND, REPORT_VERSION), **asdict(self)}


REPORT_KIND, REPORT_VERSION = "validation-report", 1


def _parsed_lines(path: Path) -> list[tuple[int, dict | str]]:
    """(line number, JSON object or why the line is not one) per line; blank and # lines are left out."""
    if path.exists() and not path.is_file():  # a FIFO or device: reading it would block or never end
        raise ValidationError(f"cannot read validation results {path}: not a regular file")
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ValidationError(
            f"cannot read validation results: no results file at {path} (run `rtmodel validate` first, "
            "or pass --results PATH)"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        why = getattr(exc, "strerror", None) or exc
        raise ValidationError(f"cannot read validation results {path}: {why}") from None
    from rtmodel_util.json_document import DocumentError, parse_document

    out: list[tuple[int, dict | str]] = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            doc = parse_document(line)
        except DocumentError as exc:
            out.append((lineno, str(exc).removeprefix("is ").replace("valid JSON", "JSON")))
            continue
        out.append((lineno, doc if isinstance(doc, dict) else "expected a JSON object per line"))
    return out


def read_records(path: str | Path) -> tuple[list[dict], int]:
    """(validation records, number of lines that were not validation records). A record is a line whose
    header says so, in either form (a hand-written one may leave the version out); ValidationError
    naming the line for a record newer than this rtmodel reads."""
    lines = _parsed_lines(Path(path))
    records = [doc for lineno, doc in lines if _is_record(doc, path, lineno)]
    return records, len(lines) - len(records)


def _is_record(doc: dict | str, path, lineno: int) -> bool:
    header = header_of(doc)
    if header.kind != RECORD_KIND:
        return False
    if header.version is not None:
        try:
            check_header(doc, RECORD_KIND, RECORD_VERSION, "rtmodel validation record")
        except HeaderError as exc:
            raise ValidationError(f"{path}:{lineno}: the line {exc}") from None
    return True


@dataclass(frozen=True)
class ParityPoint:
    """One predicted-vs-measured pair: the mean per-iteration time (throughput) of one run, in ms."""

    label: str  # the record's "label", else its shape ("4 ranks / 2 node(s)"), else ""
    method: str  # "allreduce" or the topology
    predicted_ms: float
    measured_ms: float
    source: str = "measured"  # a record's "source": says when points were not measured


def read_parity_points(path: str | Path) -> list[ParityPoint]:
    """Every predicted/measured pair of a results file, for parity plots.

    Reads the records `rtmodel validate` appends (two points each: "allreduce" and "decentralized"; a
    third, local SGD, when it ran)
    and a flat form for results from elsewhere, one object per line:
        {"method": "one-peer-exp", "predicted_mean_s": 0.051, "measured_mean_s": 0.049,
         "label": "16 GPUs", "source": "measured"}
    Blank and # lines are skipped. ValidationError (one line) for an unreadable file, a line that is
    not a JSON object ("PATH:LINE: not JSON (...)"), or a file with no pair at all.
    """
    path = Path(path)
    points: list[ParityPoint] = []
    for lineno, doc in _parsed_lines(path):
        if isinstance(doc, str):
            raise ValidationError(f"{path}:{lineno}: {doc}")
        points.extend(_points_from_record(doc))
    if not points:
        raise ValidationError(
            f"{path}: no records with predicted and measured mean times "
            "(rtmodel validate records, or lines with predicted_mean_s and measured_mean_s)"
        )
    return points


def _points_from_record(rec: dict) -> list[ParityPoint]:
    label, source = _record_label(rec), str(rec.get("source", "measured"))
    pair = pair_ms(rec)
    if pair is not None:  # the flat form
        return [ParityPoint(label, str(rec.get("method") or rec.get("topology") or "run"), *pair, source)]
    out = []
    for key, name in _runs(rec):
        run = rec.get(key)
        if isinstance(run, dict) and (pair := pair_ms(run)) is not None:
            out.append(ParityPoint(label, str(run.get("name") or name or key), *pair, source))
    return out


def _runs(rec: dict, unnamed: str | None = None) -> list[tuple[str, str | None]]:
    """(record key, run name) of each timed run a record holds: DDP, Decent-DP; local SGD, FSDP if they ran."""
    runs = [("allreduce", "allreduce"), ("decentralized", rec.get("topology", unnamed))]
    local = rec.get("local_sgd")
    if isinstance(local, dict):
        runs.append(("local_sgd", str(local.get("name") or "local-sgd")))
    if isinstance(rec.get(FSDP_KEY), dict):
        runs.append((FSDP_KEY, FSDP_KEY))
    return runs


def _record_label(rec: dict) -> str:
    if rec.get("label"):
        return str(rec["label"])
    shape = rec.get("shape")
    if isinstance(shape, dict) and "world_size" in shape:
        return f"{shape['world_size']} ranks / {shape.get('nodes', '?')} node(s)"
    return ""


def summarise_results(path: str | Path | None = None) -> ResultsSummary:
    """Mean / max |error| over all records of `path` (default: default_results_path()), overall and per
    run (allreduce, each topology, each local-SGD configuration)."""
    path = default_results_path() if path is None else path
    records, skipped = read_records(path)
    if not records:
        raise ValidationError(f"{path} holds no validation records")
    errors: list[float] = []
    by_run: dict[str, list[float]] = {}
    held = 0
    shapes = set()
    for rec in records:
        for key, name in _runs(rec, "?"):
            err = (rec.get(key) or {}).get("error")
            if isinstance(err, int | float) and math.isfinite(err):
                errors.append(float(err))
                by_run.setdefault(name, []).append(float(err))
        held += bool((rec.get("verdict") or {}).get("held"))
        s = rec.get("shape") or {}
        shapes.add(f"{s.get('world_size')} ranks on {s.get('nodes')} node(s)")
    return ResultsSummary(
        path=str(path),
        records=len(records),
        skipped_lines=skipped,
        overall=ErrorStats.of(errors),
        by_run={k: ErrorStats.of(v) for k, v in sorted(by_run.items())},
        verdicts_held=held,
        shapes=sorted(shapes),
    )
