"""A validation's result, the JSONL file that accumulates them, and the readers of that file.

Why an append-only JSONL file: every validation on every cluster adds one line (timestamp, shape,
topology, predicted and measured numbers), so the model's accuracy claim is backed by an
ever-growing record that `rtmodel validate --report` summarises. Per-iteration times stay in the
returned result (and `--format json`), not in the file, so records stay small at large n.

A record starts with the header every rtmodel document has, `{"schema": "rtmodel-validation/1"}`
(files written before it say `{"kind": "rtmodel-validation", "version": 1}`; both read);
`ValidationResult.from_record` reads one back typed (its parts: rtmodel_validation.record_parts), and
every reader of what a record says goes through it. The readers share one line parser: `read_results`
(typed records; `summarise_results`, the accuracy summary, reads them; lines that are not validation
records are skipped and counted, since the file may be shared), `read_parity_points` (predicted vs
measured pairs for plots, from records and from the flat form of `FlatParityLine`; refuses a broken line
by number, since a plot silently missing points misleads) and `read_records` (the record lines as
parsed, for code that checks the file itself). The file as an output (what its lines may be, checked
before a run; each record appended whole, under its lock) is rtmodel_validation.results_file's.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rtmodel_validation.errors import ValidationError
from rtmodel_validation.record_parts import (
    ComputeDrift,
    ConsensusDistance,
    LocalSgdRun,
    RankPlace,
    RecordWorkload,
    typed_fields,
)
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
    workload: RecordWorkload
    iterations: int
    warmup: int
    allreduce: Comparison  # PyTorch DDP
    decentralized: Comparison  # Decent-DP on `topology`
    verdict: Verdict
    distance_to_consensus: ConsensusDistance  # ||x_i - mean x|| after the Decent-DP run
    ranks: list[RankPlace]  # where each rank ran, in rank order
    device: str
    backend: str
    advisor: AdvisorSummary | None = None
    notes: list[str] = field(default_factory=list)
    times_s: dict[str, list[list[float]]] = field(default_factory=dict)  # run -> per rank -> per iteration
    local_sgd: Comparison | None = None  # local SGD (validate --local-sgd-h), per inner step; None: not run
    local_sgd_run: LocalSgdRun | None = None  # its options, counts, prediction parts
    drift: ComputeDrift | None = None  # the bare step now against the profile's (drift.py); None: not timed
    fsdp: Comparison | None = None  # FSDP2, ZeRO-3 (validate --baseline fsdp); None: not run

    def to_record(self) -> dict:
        """The JSONL line: everything but the per-iteration times."""
        d = asdict(self)
        d.pop("times_s")
        d.pop("shape")
        d["workload"] = self.workload.to_record()
        d["distance_to_consensus"] = self.distance_to_consensus.to_record()
        d["ranks"] = [r.to_record() for r in self.ranks]
        for key in ("local_sgd_run", "drift"):
            part = getattr(self, key)
            d[key] = None if part is None else part.to_record()
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

    def runs(self) -> list[tuple[str, Comparison]]:
        """(run name, comparison) of each timed run: DDP ("allreduce"), Decent-DP (the topology), local
        SGD (its configuration's name) and FSDP ("fsdp") when they ran."""
        out = [("allreduce", self.allreduce), (self.topology, self.decentralized)]
        if self.local_sgd is not None:
            out.append((self.local_sgd.name or "local-sgd", self.local_sgd))
        if self.fsdp is not None:
            out.append((FSDP_KEY, self.fsdp))
        return out

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
        values = typed_fields(cls, rec, "the validation record", skip=("shape",))
        shape = typed_fields(_RecordShape, rec.get("shape"), "the record's shape")

        def comparison(doc: Any, what: str) -> Comparison:
            d = typed_fields(Comparison, doc, what)
            return Comparison(
                **{**d, "measured": Measured(**typed_fields(Measured, d["measured"], f"{what}'s measured"))}
            )

        for key in ("allreduce", "decentralized", "local_sgd", FSDP_KEY):
            if values.get(key) is not None:
                values[key] = comparison(values[key], f"the record's {key}")
        values["verdict"] = Verdict(**typed_fields(Verdict, values["verdict"], "the record's verdict"))
        values["workload"] = RecordWorkload.from_record(values["workload"])
        values["distance_to_consensus"] = ConsensusDistance.from_record(values["distance_to_consensus"])
        if not isinstance(values["ranks"], list):
            raise ValidationError("the record's ranks must be a JSON array")
        values["ranks"] = [RankPlace.from_record(r) for r in values["ranks"]]
        for key, part in (("local_sgd_run", LocalSgdRun), ("drift", ComputeDrift)):
            if values.get(key) is not None:
                values[key] = part.from_record(values[key])
        if values.get("advisor") is not None:
            values["advisor"] = AdvisorSummary.from_json(values["advisor"])
        return cls(shape=ClusterShape(shape["world_size"], shape["ranks_per_node"]), **values)


@dataclass(frozen=True)
class _RecordShape:
    world_size: int
    ranks_per_node: int
    nodes: int


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
    """(validation records as parsed, number of lines that were not validation records): the lines
    themselves, for code that checks the file; what they say is read typed (read_results). A record is
    a line whose header says so, in either form (a hand-written one may leave the version out);
    ValidationError naming the line for a record newer than this rtmodel reads."""
    lines = _parsed_lines(Path(path))
    records = [doc for lineno, doc in lines if _is_record(doc, path, lineno)]
    return records, len(lines) - len(records)


def read_results(path: str | Path) -> tuple[list[ValidationResult], int]:
    """(every validation record of the file, typed by ValidationResult.from_record; number of lines that
    were not validation records, since the file may be shared). ValidationError naming the line for a
    record that does not read (a field missing, a newer version)."""
    path = Path(path)
    results, skipped = [], 0
    for lineno, doc in _parsed_lines(path):
        if _is_record(doc, path, lineno):
            results.append(_typed_record(doc, path, lineno))
        else:
            skipped += 1
    return results, skipped


def _typed_record(doc: dict, path: Path, lineno: int) -> ValidationResult:
    try:
        return ValidationResult.from_record(doc)
    except ValidationError as exc:
        raise ValidationError(f"{path}:{lineno}: {exc}") from None


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

    label: str  # the flat line's "label", a record's shape ("4 ranks / 2 node(s)"), else ""
    method: str  # "allreduce" or the topology
    predicted_ms: float
    measured_ms: float
    source: str = "measured"  # a flat line's "source": says when points were not measured


@dataclass(frozen=True)
class FlatParityLine:
    """The flat form of a result from elsewhere, one JSON object per line (notebooks/data/README.md):
        {"method": "one-peer-exp", "predicted_mean_s": 0.051, "measured_mean_s": 0.049,
         "label": "16 GPUs", "source": "measured"}
    (or a comparison's spelling, "measured": {"mean_s": ...}; "topology" for "method")."""

    method: str
    predicted_ms: float
    measured_ms: float
    label: str = ""
    source: str = "measured"

    @classmethod
    def from_record(cls, doc: dict) -> FlatParityLine | None:
        """The line, or None when it holds no finite predicted and measured mean (not the flat form)."""
        pair = pair_ms(doc)
        if pair is None:
            return None
        method = str(doc.get("method") or doc.get("topology") or "run")
        return cls(method, *pair, str(doc.get("label") or ""), str(doc.get("source", "measured")))

    def point(self) -> ParityPoint:
        return ParityPoint(self.label, self.method, self.predicted_ms, self.measured_ms, self.source)


def read_parity_points(path: str | Path) -> list[ParityPoint]:
    """Every predicted/measured pair of a results file, for parity plots.

    Reads the records `rtmodel validate` appends, typed (two points each: "allreduce" and the topology;
    more for local SGD and FSDP when they ran), and the flat form of FlatParityLine for results from
    elsewhere. Blank and # lines are skipped. ValidationError (one line) for an unreadable file, a line
    that is not a JSON object ("PATH:LINE: not JSON (...)"), a record that does not read, or a file
    with no pair at all.
    """
    path = Path(path)
    points: list[ParityPoint] = []
    for lineno, doc in _parsed_lines(path):
        if isinstance(doc, str):
            raise ValidationError(f"{path}:{lineno}: {doc}")
        flat = FlatParityLine.from_record(doc)
        if flat is not None:
            points.append(flat.point())
        elif _is_record(doc, path, lineno):
            points.extend(_points_of(_typed_record(doc, path, lineno)))
    if not points:
        raise ValidationError(
            f"{path}: no records with predicted and measured mean times "
            "(rtmodel validate records, or lines with predicted_mean_s and measured_mean_s)"
        )
    return points


def _points_of(res: ValidationResult) -> list[ParityPoint]:
    s = res.shape
    label = f"{s.gpus} ranks / {s.nodes} node(s)"
    out = []
    for name, run in res.runs():
        predicted_ms, measured_ms = run.predicted_mean_s * 1e3, run.measured.mean_s * 1e3
        if math.isfinite(predicted_ms) and math.isfinite(measured_ms):
            out.append(ParityPoint(label, run.name or name, predicted_ms, measured_ms))
    return out


def summarise_results(path: str | Path | None = None) -> ResultsSummary:
    """Mean / max |error| over all records of `path` (default: default_results_path()), overall and per
    run (allreduce, each topology, each local-SGD configuration, FSDP)."""
    path = default_results_path() if path is None else path
    results, skipped = read_results(path)
    if not results:
        raise ValidationError(f"{path} holds no validation records")
    errors: list[float] = []
    by_run: dict[str, list[float]] = {}
    for res in results:
        for name, run in res.runs():
            if math.isfinite(run.error):
                errors.append(float(run.error))
                by_run.setdefault(name, []).append(float(run.error))
    return ResultsSummary(
        path=str(path),
        records=len(results),
        skipped_lines=skipped,
        overall=ErrorStats.of(errors),
        by_run={k: ErrorStats.of(v) for k, v in sorted(by_run.items())},
        verdicts_held=sum(bool(res.verdict.held) for res in results),
        shapes=sorted({f"{res.shape.gpus} ranks on {res.shape.nodes} node(s)" for res in results}),
    )
