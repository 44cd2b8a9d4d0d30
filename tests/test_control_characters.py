"""Escape sequences in the documents rtmodel reads never reach the terminal raw (issue 67).

Traces, profiles, calibrations, scenario files, results files, nccl-tests logs and preset files are
written by others; their strings (a GPU name, a file name, a network's, a reason) are shown through
`rtmodel_util.shown` (docs/development.md "Showing strings from files"). Each case below writes one
document with a hostile string, runs the command that shows it, and checks: the exit code, no raw control
character (newline and tab aside) on stdout or stderr, and, where the string is shown, its escaped form
(`\\x1b]0;...`). Add a document or a command as one more `Case`.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from rtmodel_util.shown import shown, shown_output
from tests.cli_helpers import run
from tests.nccl_tests_text import model_times, nccl_tests_output, small_network
from tests.trace_fixtures import ddp_trace

ROOT = Path(__file__).parent.parent
PROFILE = ROOT / "tests" / "data" / "synthetic_profile_2x2.json"
# One payload of each kind: an OSC that sets the window title, a CSI that clears the screen, the one-byte
# C1 CSI, a bell, a right-to-left override, a NUL.
PAYLOADS = {
    "osc-title": "\x1b]0;pwned\x07",
    "clear-screen": "\x1b[2J",
    "c1-csi": "\x9b2J",
    "bell": "\x07",
    "rtl-override": "\u202e",
    "nul": "\x00",
}
HOSTILE = "".join(PAYLOADS.values())
IN_FILE_NAME = HOSTILE.replace("\x00", "")  # a file name holds anything but NUL and '/'
WIDE = {"COLUMNS": "400"}  # no table cell wraps inside the escaped string


@pytest.fixture(autouse=True)
def no_forced_colours(monkeypatch):
    """rich colours no pipe here (its FORCE_COLOR would put SGR sequences in every captured output)."""
    for name in ("FORCE_COLOR", "TTY_COMPATIBLE"):
        monkeypatch.delenv(name, raising=False)


def raw_controls(text: str) -> list[str]:
    """The characters a terminal would act on (shown's set), newline and tab aside."""
    return sorted({c for c in text if c not in "\n\t" and shown(c) != c})


def escaped_forms(text: str) -> tuple[str, str]:
    """How a shown string may read: as repr writes it, or as JSON (a scenario file's value is quoted so)."""
    return shown(text), json.dumps(text)[1:-1]


def toml_string(text: str) -> str:
    """`text` as a TOML basic string (JSON's escapes are TOML's)."""
    return json.dumps(text)


def hostile_trace(gpu: str = "NVIDIA A100-SXM4-80GB") -> str:
    doc = json.loads(ddp_trace([(1000.0, 800.0)] * 4))
    doc["deviceProperties"][0]["name"] = gpu
    return json.dumps(doc)


def hostile_profile(**changes) -> str:
    """The synthetic profile with `changes` (section__key=value) made."""
    doc = json.loads(PROFILE.read_text())
    for where, value in changes.items():
        section, key = where.split("__")
        doc[section][key] = value
    return json.dumps(doc)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


# ----------------------------------------------------------------------------- the documents, one each


def trace_gpu_name(tmp: Path, p: str) -> list:
    return [
        "advise",
        "--trace",
        write(tmp / "rank0.json", hostile_trace(f"NVIDIA A100-SXM4-80GB{p}")),
        "--gpus",
        16,
    ]


def trace_unknown_gpu(tmp: Path, p: str) -> list:
    return ["advise", "--trace", write(tmp / "rank0.json", hostile_trace(f"Mystery{p}")), "--gpus", 16]


def trace_file_name_in_directory(tmp: Path, p: str) -> list:
    write(tmp / "traces" / f"rank{p}0.json", hostile_trace())
    return ["advise", "--trace", tmp / "traces", "--gpus", 16]


def bad_trace_file_name_in_directory(tmp: Path, p: str) -> list:
    write(tmp / "traces" / f"rank{p}0.json", "{not json")
    return ["advise", "--trace", tmp / "traces", "--gpus", 16]


def scenario(key: str, value: Callable[[str], object]) -> Callable[[Path, str], list]:
    """A scenario file whose `key` holds `value(payload)`."""

    def argv(tmp: Path, p: str) -> list:
        return ["advise", "--scenario", write(tmp / "team.toml", f"{key} = {json.dumps(value(p))}\n")]

    return argv


def scenario_key(tmp: Path, p: str) -> list:
    return ["advise", "--scenario", write(tmp / "team.toml", f"{toml_string('gpus' + p)} = 8\n")]


def profile_model_and_reason(tmp: Path, p: str) -> list:
    """A profile whose model and unmeasured inter-node link's reason carry the payload."""
    doc = hostile_profile(
        workload__model=f"resnet{p}", shape__unmeasured_links={"inter": f"pretend nodes{p}"}
    )
    return ["advise", "--profile", write(tmp / "profile.json", doc), "--gpus", 16, "--verbose"]


def profile_model_as_json(tmp: Path, p: str) -> list:
    return [*profile_model_and_reason(tmp, p)[:-1], "--format", "json"]


def profile_bad_value(tmp: Path, p: str) -> list:
    path = write(tmp / "profile.json", hostile_profile(shape__world_size=f"4{p}"))
    return ["advise", "--profile", path, "--gpus", 16]


def calibrate_profile(tmp: Path, p: str) -> list:
    return ["calibrate", profile_model_and_reason(tmp, p)[2]]


def calibration_file(tmp: Path, p: str) -> list:
    out = tmp / "calibration.json"
    made = run("calibrate", profile_model_and_reason(tmp, p)[2], "--out", out, "--format", "json")
    assert made.exit_code == 0, made.output
    return ["advise", "--calibration", out, "--gpus", 16, "--verbose"]


def nccl_tests_log(tmp: Path, p: str) -> list:
    """A log whose file name, GPU, host and NCCL INFO lines carry the payload; the run's 8 GPUs per node
    are not the question's 4, so its note names the file."""
    text = nccl_tests_output(model_times(small_network()), info=(f"NCCL_ALGO set by environment to Ring{p}",))
    text = text.replace("NVIDIA H100 80GB HBM3", f"NVIDIA H100 80GB HBM3{p}").replace(
        " node00", f" node00{p}"
    )
    path = write(tmp / f"all_reduce{p}.log", text)
    return ["advise", "--nccl-tests", path, "--gpus", 64, "--gpus-per-node", 4]


def results_file(tmp: Path, p: str) -> list:
    """A whole validation record (the notebook's first example, which the typed reader accepts) whose
    topology and model name carry the payload."""
    example = ROOT / "notebooks" / "data" / "example_validations.jsonl"
    record = json.loads(next(line for line in example.read_text().splitlines() if "rtmodel-validation" in line))
    record["topology"] = f"ring{p}"
    record["workload"]["model"] = f"mlp{p}"
    return ["validate", "--report", "--results", write(tmp / "results.jsonl", json.dumps(record) + "\n")]


def results_file_as_json(tmp: Path, p: str) -> list:
    return [*results_file(tmp, p), "--format", "json"]


def cluster_preset(tmp: Path, p: str, gpu: str = "V100-32GB") -> Path:
    """A presets directory with one cluster whose name and source carry the payload (and `gpu`)."""
    text = (
        f"[{toml_string('ours' + p)}]\ngpu = {toml_string(gpu)}\ngpus_per_node = 4\n"
        f'intra = "nvlink2"\nnetwork = "roce-100g"\nsource = {toml_string("ours" + p)}\n'
    )
    write(tmp / "presets" / "clusters.toml", text)
    return tmp / "presets"


def presets_listed(tmp: Path, p: str) -> list:
    return ["presets", "--presets", cluster_preset(tmp, p)]


def presets_unknown_gpu(tmp: Path, p: str) -> list:
    return ["presets", "--presets", cluster_preset(tmp, p, gpu=f"A100-ish{p}")]


def presets_unknown_table(tmp: Path, p: str) -> list:
    write(tmp / "presets" / "networks.toml", f'[{toml_string("net" + p)}]\ndescription = "x"\n')
    return ["presets", "--presets", tmp / "presets"]


def advise_on_a_preset_cluster(tmp: Path, p: str) -> list:
    return ["advise", "--presets", cluster_preset(tmp, p, gpu=f"A100-ish{p}"), "--gpus", 16]


def plot_with_scenario(kind: str) -> Callable[[Path, str], list]:
    def argv(tmp: Path, p: str) -> list:
        scenario_path = write(tmp / "team.toml", f"network = {toml_string('tcp' + p)}\n")
        return ["plot", kind, "--scenario", scenario_path, "--gpus", "16", "--out", tmp / "figure.png"]

    return argv


@dataclass(frozen=True)
class Case:
    name: str
    argv: Callable[[Path, str], list]  # writes the document(s) into the directory, returns the command line
    code: int  # 0 shown in the answer, 2 shown in the error line
    shows: bool = True  # the string is shown (its escaped form must appear), not only kept off the terminal
    file_name: bool = False  # the payload goes into a file name (no NUL there)


CASES = (
    Case("trace GPU name", trace_gpu_name, 0),
    Case("trace unknown GPU", trace_unknown_gpu, 2),
    Case("trace directory file name", trace_file_name_in_directory, 0, file_name=True),
    Case("trace directory bad file name", bad_trace_file_name_in_directory, 2, file_name=True),
    Case("scenario network", scenario("network", lambda p: f"tcp{p}"), 2),
    Case("scenario topologies", scenario("topologies", lambda p: [f"ring{p}"]), 2),
    Case("scenario cluster", scenario("cluster", lambda p: f"dgx{p}"), 2),
    Case("scenario model", scenario("model", lambda p: f"gpt{p}"), 2),
    Case("scenario wrong type", scenario("gpus", lambda p: f"64{p}"), 2),
    Case("scenario unknown key", scenario_key, 2),
    Case("scenario profile path", scenario("profile", lambda p: f"profile{p}.json"), 2),
    Case("profile model and unmeasured reason", profile_model_and_reason, 0),
    Case("profile as json", profile_model_as_json, 0, shows=False),
    Case("profile bad value", profile_bad_value, 2),
    Case("calibrate a profile", calibrate_profile, 0),
    Case("calibration file", calibration_file, 0),
    Case("nccl-tests log", nccl_tests_log, 0, file_name=True),
    Case("results file report", results_file, 0),
    Case("results file report as json", results_file_as_json, 0, shows=False),
    Case("presets listed", presets_listed, 0),
    Case("presets unknown GPU", presets_unknown_gpu, 2),
    Case("presets unknown table", presets_unknown_table, 2),
    Case("advise on a preset cluster", advise_on_a_preset_cluster, 2),
    Case("plot speedup scenario", plot_with_scenario("speedup"), 2),
    Case("plot factors scenario", plot_with_scenario("factors"), 2),
)


def check_shown(res, code: int, payload: str | None, traceback: bool = False) -> None:
    """Exit `code`, no raw control character on either stream, and `payload` (when given) escaped."""
    assert res.exit_code == code, res.output
    assert ("Traceback" in res.output) == traceback, res.output
    for stream in (res.stdout, res.stderr):
        assert not raw_controls(stream), (raw_controls(stream), stream[-2000:])
    if payload is not None:
        both = res.stdout + res.stderr
        assert any(form in both for form in escaped_forms(payload)), (escaped_forms(payload), both[-3000:])


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_a_hostile_string_in_a_document_is_shown_escaped(case, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    payload = IN_FILE_NAME if case.file_name else HOSTILE
    res = run(*case.argv(tmp_path, payload), env=WIDE)
    check_shown(res, case.code, payload if case.shows else None)


@pytest.mark.parametrize("payload", PAYLOADS.values(), ids=PAYLOADS.keys())
def test_each_kind_of_payload_is_escaped_in_the_error_line(payload, tmp_path):
    argv = scenario("network", lambda p: f"tcp{p}")(tmp_path, payload)
    res = run(*argv)
    check_shown(res, 2, payload)
    assert res.stderr.startswith("error: unknown network 'tcp" + shown(payload))


def test_the_debug_traceback_is_shown_escaped(tmp_path):
    res = run(*bad_trace_file_name_in_directory(tmp_path, IN_FILE_NAME), env={"RTMODEL_DEBUG": "1"})
    check_shown(res, 2, IN_FILE_NAME, traceback=True)


def test_the_net_catches_a_line_printed_where_no_one_escaped_it(monkeypatch):
    """A string printed raw by code that forgot `shown` (here: a stand-in for the JSON view) still reaches
    stdout escaped: prepare_terminal wraps stdout and stderr (rtmodel_cli.terminal.ShownStream)."""
    from runtime_model.advice import report

    monkeypatch.setattr(report, "to_json", lambda *a, **k: f'{{"gpu": "A100{HOSTILE}"}}')
    res = run("advise", "--gpus", 8, "--format", "json")
    check_shown(res, 0, HOSTILE)


@pytest.mark.parametrize("argv", [calibrate_profile, results_file], ids=["calibrate", "validate --report"])
def test_a_files_string_is_never_read_as_rich_markup(argv, tmp_path):
    """A closing tag in a reason or a shape once ended calibrate in rich's MarkupError traceback."""
    res = run(*argv(tmp_path, "[/x][link=https://example.com]"), env=WIDE)
    assert res.exit_code == 0, res.output
    assert "[/x][link=https://example.com]" in res.stdout


# ----------------------------------------------------------------------------- a real process, a terminal


def rtmodel(*args, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "400"}
    return subprocess.run(
        [sys.executable, "-m", "rtmodel_cli", *map(str, args)],
        cwd=cwd,
        env=env,
        capture_output=True,
        timeout=120,
    )


def test_a_real_process_writes_no_raw_control_byte(tmp_path):
    """Outside typer's CliRunner: the bytes on the process's own stdout and stderr."""
    answer = rtmodel(*trace_gpu_name(tmp_path, HOSTILE), cwd=ROOT)
    error = rtmodel(*scenario("network", lambda p: f"tcp{p}")(tmp_path, HOSTILE), cwd=ROOT)
    assert (answer.returncode, error.returncode) == (0, 2), (answer.stderr, error.stderr)
    for out in (answer.stdout, answer.stderr, error.stdout, error.stderr):
        assert not raw_controls(out.decode()), out[-2000:]
    assert shown(HOSTILE).encode() in answer.stdout and shown(HOSTILE).encode() in error.stderr


@pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs a pseudo-terminal")
def test_on_a_terminal_the_colours_stay_and_the_payload_is_escaped(tmp_path):
    """On a TTY rich colours its output (SGR sequences, which the net lets through); the file's string
    is still escaped, and nothing else a terminal acts on is written."""
    import re

    argv = trace_gpu_name(tmp_path, HOSTILE)
    primary, secondary = os.openpty()
    env = {**os.environ, "COLUMNS": "400", "TERM": "xterm-256color"}
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "rtmodel_cli", *map(str, argv)],
        cwd=ROOT,
        env=env,
        stdout=secondary,
        stderr=secondary,
    )
    os.close(secondary)
    chunks = []
    while True:
        try:
            chunk = os.read(primary, 65536)
        except OSError:  # the process closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(primary)
    assert proc.wait(timeout=120) == 0
    out = b"".join(chunks).decode()
    colours = re.compile(r"\x1b\[[0-9;]*m")
    assert colours.search(out), "rich coloured nothing on a terminal"
    assert not raw_controls(colours.sub("", out).replace("\r\n", "\n")), out[-2000:]
    assert shown(HOSTILE) in out


# ----------------------------------------------------------------------------- the sanitizer itself


@pytest.mark.parametrize(
    "raw, seen",
    [
        ("\x1b]0;t\x07", "\\x1b]0;t\\x07"),
        ("\x1b[2J", "\\x1b[2J"),
        ("\x9b", "\\x9b"),
        ("\x85", "\\x85"),
        ("\x7f", "\\x7f"),
        ("\x00", "\\x00"),
        ("\r", "\\r"),
        ("\x0b\x0c", "\\x0b\\x0c"),
        ("\u202e", "\\u202e"),
        ("\u2066\u2069", "\\u2066\\u2069"),
        ("\u200b\u200e\u200f", "\\u200b\\u200e\\u200f"),
        ("\u2028", "\\u2028"),
        ("\ufeff", "\\ufeff"),
        ("\ud800", "\\ud800"),
        ("\U000e0041", "\\U000e0041"),
    ],
)
def test_each_control_class_is_escaped_as_repr_writes_it(raw, seen):
    assert shown(f"a{raw}b") == f"a{seen}b"
    assert shown(raw) == repr(raw)[1:-1]


def test_printable_text_newlines_and_tabs_are_kept():
    text = "NVIDIA A100-SXM4-80GB é µs ≈ ± Ω 中文 עברית 👍 zero\u200dwidth joiner\tand\nlines \\x1b"
    assert shown(text) == text
    assert shown(text) is text  # nothing to escape: the same string


def test_showing_twice_changes_nothing_more():
    once = shown(HOSTILE + "\u202d\x1b[31mred")
    assert shown(once) == once
    assert not raw_controls(once)


def test_a_non_string_is_shown_as_its_str():
    assert shown(Path("a\x1bb")) == "a\\x1bb"


def test_the_output_net_keeps_line_ends_and_colours_only_where_asked():
    text = "\x1b[1;31mred\x1b[0m\r\nnext\rover\x1b]0;t\x07\x1b[2J"
    assert shown_output(text, colours=True) == "\x1b[1;31mred\x1b[0m\r\nnext\\rover\\x1b]0;t\\x07\\x1b[2J"
    assert shown_output(text, colours=False) == "\\x1b[1;31mred\\x1b[0m\r\nnext\\rover\\x1b]0;t\\x07\\x1b[2J"
    assert shown_output("plain é\n") == "plain é\n"


# ----------------------------------------------------------------------------- where the shell renders


def test_the_shells_console_escapes_strings_cells_and_built_text():
    from rich.table import Table
    from rich.text import Text

    from rtmodel_cli.shown_console import terminal_console

    console = terminal_console(file=io.StringIO(), width=200, color_system=None)
    table = Table(title=f"title{HOSTILE}")
    table.add_column(f"head{HOSTILE}")
    table.add_row(f"cell{HOSTILE}")
    console.print(f"[bold]line[/] {HOSTILE}")
    console.print(table)
    console.print(Text(f"built{HOSTILE.replace(chr(7), '')}"))
    out = console.file.getvalue()
    assert not raw_controls(out), out
    for where in ("line ", "title", "head", "cell"):
        assert f"{where}{shown(HOSTILE)}" in out, (where, out)
    assert "built\\x1b]0;pwned\\x1b[2J" in out


def test_a_fitted_table_measures_the_escaped_cell():
    """The escaped string is what is measured, so the table's borders line up."""
    from rtmodel_cli.fitted_tables import fitted_table
    from rtmodel_cli.shown_console import terminal_console

    console = terminal_console(file=io.StringIO(), width=200, color_system=None)
    table, dropped = fitted_table(
        console, f"[/]{HOSTILE}", ["a", "b"], [[f"x{HOSTILE}", "1"]], [0, 0], [True, False], [False, True]
    )
    console.print(table)
    lines = [line for line in console.file.getvalue().splitlines() if line.strip()]
    assert not dropped and f"[/]{shown(HOSTILE)}" in lines[0]  # a title is never markup either
    assert len({len(line) for line in lines[1:]}) == 1, lines


def test_the_stream_net_is_the_stream_for_everything_else():
    from rtmodel_cli.terminal import ShownStream

    class Tty(io.StringIO):
        encoding = "utf-8"

        def isatty(self):
            return True

    plain, tty = io.StringIO(), Tty()
    net, on_tty = ShownStream(plain), ShownStream(tty)
    assert net.write(f"a{HOSTILE}\x1b[1mb\n") == len(f"a{HOSTILE}\x1b[1mb\n")
    on_tty.writelines([f"a{HOSTILE}", "\x1b[1mb\x1b[0m\n"])
    assert plain.getvalue() == f"a{shown(HOSTILE)}\\x1b[1mb\n"
    assert tty.getvalue() == f"a{shown(HOSTILE)}\x1b[1mb\x1b[0m\n"
    assert not net.isatty() and on_tty.isatty() and net.getvalue() == plain.getvalue()
    with pytest.raises(TypeError):
        net.write(b"")  # click probes a stream with b"": a text stream must refuse it as before


def test_prepare_terminal_wraps_once(monkeypatch):
    from rtmodel_cli.terminal import ShownStream, prepare_terminal

    monkeypatch.setattr(sys, "stdout", io.StringIO())
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    prepare_terminal()
    first = sys.stdout
    prepare_terminal()
    assert isinstance(first, ShownStream) and sys.stdout is first and isinstance(sys.stderr, ShownStream)
    print(f"x{HOSTILE}")
    assert first.getvalue() == f"x{shown(HOSTILE)}\n"
