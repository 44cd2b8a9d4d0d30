"""Every command line rtmodel prints runs as printed (issue 64): a line the user pastes and is refused is
a broken promise, and no other test reads the prose the lines sit in.

The lines are collected from the recorded advise baselines (tests/data/advise_baseline/) and from fresh
outputs (advise's table, --brief, --verbose, JSON and CSV over several clusters, a profile, local SGD;
topologies; every command's --help): each `rtmodel ...`, `python -m ...` or `torchrun ...` in backticks,
or bare in a sentence (ended where click's own options say the command ends). Placeholders (PROFILE,
FILE, DIR, N, NAME, ...) get a real profile, a temporary path or a value of the option's type. Then:
- rtmodel: click parses it (command names, option names, values, choices: not with --help, which would skip
  them); a validate line with options runs up to its plan (every check before a rank starts);
- python -m: the module exists and its argparse takes the flags; torchrun: torchrun's parser takes them.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import json
import re
import shlex
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from rtmodel_cli.app import app
from runtime_model.advice.run_lines import PROFILE, validate_line

ROOT = Path(__file__).resolve().parent.parent
BASELINE = ROOT / "tests" / "data" / "advise_baseline"
PROFILE_2X2 = ROOT / "tests" / "data" / "synthetic_profile_2x2.json"
WIDE = {"terminal_width": 10_000, "max_content_width": 10_000}  # help on one line per option
ADVISE_RUNS = [
    "--gpus 16",
    "--gpus 64",
    "--gpus 1024",
    "--gpus 64 --brief",
    "--gpus 64 --verbose",
    "--gpus 64 --format json",
    "--gpus 64 --format csv",
    "--gpus 1024 --format json",
    f"--profile {PROFILE_2X2} --gpus 16 --gpus-per-node 4",
    f"--profile {PROFILE_2X2} --gpus 16 --gpus-per-node 4 --format json",
    "--cluster dgx-h100",
    "--cluster dgx-h100 --format json",
    "--cluster t4-ib100 --gpus 64 --verbose",
    "--gpus 64 --local-sgd-h 30",
    "--gpus 64 --local-sgd-h 30 --format json",
]
OTHER_RUNS = ["topologies --gpus 64", "presets"]
# where messages no run above reaches (errors, notes, resume hints) are written: their literal strings
PRINTING_PACKAGES = ("rtmodel_cli", "rtmodel_inputs", "runtime_model", "rtmodel_validation", "calibration", "profiler",
                     "rtmodel_util", "rtmodel_plots", "rtmodel_harness", "rtmodel_decentdp", "rtmodel_emulation")  # fmt: skip
STARTS = ("rtmodel", "python -m", "torchrun")
BARE = re.compile(r"(?<![\w./`'-])(?:rtmodel|python -m|torchrun) ")
ENDING = ".,;:)\"'"  # closes the sentence a bare line sits in
PLACEHOLDER = re.compile(r"[A-Z][A-Z_]*")
# NAME as a user fills it, for the options whose names a parse already checks (presets, topologies)
EXAMPLE_NAMES = {"--topology": "ring", "--network": "ib-100", "--intra": "nvlink3", "--gpu": "A100",
                 "--cluster": "dgx-h100", "--model": "transformer-base"}  # fmt: skip
HAS_TORCH = importlib.util.find_spec("torch") is not None  # without it only the modules' presence is checked


# typer vendors click (typer._click): its classes are read by what they have, its errors by typer's alias
def is_group(cmd) -> bool:
    return hasattr(cmd, "commands")


def params_of(cmd, kind: str) -> list:
    """The command's options or arguments (click's param_type_name: 'option' | 'argument')."""
    return [p for p in cmd.params if p.param_type_name == kind]


class Planned(Exception):  # not an error: the line got as far as its plan (or its parser)
    """Raised in place of launching ranks (or measuring): the line passed every check a run makes first."""


# ----------------------------------------------------------------------------- what the tool prints


def outputs() -> dict[str, str]:
    """Where -> text, for every output the lines are collected from."""
    runner, texts = CliRunner(), {}
    for args in [*(f"advise {a}" for a in ADVISE_RUNS), *OTHER_RUNS]:
        res = runner.invoke(app, shlex.split(args), env={"COLUMNS": "10000"})
        assert res.exit_code == 0, (args, res.output)
        texts[f"rtmodel {args}"] = res.stdout
    for path in command_paths(typer.main.get_command(app)):
        res = runner.invoke(app, [*path, "--help"], **WIDE)
        assert res.exit_code == 0, (path, res.output)
        texts[f"rtmodel {' '.join(path)} --help"] = res.stdout
    for p in sorted(BASELINE.iterdir()):  # last: a line is reported where a run prints it now
        if p.suffix != ".txt":
            texts[str(p.relative_to(ROOT))] = p.read_text()
    return texts


def literal_lines() -> dict[str, str]:
    """Backticked command lines in the packages' string literals (docstrings aside: only a command's is
    printed, as its --help above) -> file:line; the lines only an error or a note prints."""
    found = {}
    for package in PRINTING_PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text())
            docs = {id(n.body[0].value) for n in ast.walk(tree) if has_docstring(n)}
            for node in ast.walk(tree):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
                    for line in re.findall(r"`((?:rtmodel|python -m|torchrun) [^`{}]*)`", node.value):
                        found.setdefault(line.strip(), f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def has_docstring(node: ast.AST) -> bool:
    """Whether `node` opens with a docstring (a comment to the reader, printed only as a command's help)."""
    return (
        isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and bool(node.body)
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    )


def command_paths(group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command and group under `group` (and the root), as the words that name it."""
    paths = [prefix]
    for name, cmd in group.commands.items():
        paths += command_paths(cmd, (*prefix, name)) if is_group(cmd) else [(*prefix, name)]
    return paths


def strings_of(text: str) -> list[str]:
    """A JSON document's strings (each a sentence of its own), else the text's lines."""
    try:
        doc = json.loads(text)
    except ValueError:
        return text.splitlines()
    found, todo = [], [doc]
    while todo:
        item = todo.pop()
        if isinstance(item, dict):
            todo += item.values()
        elif isinstance(item, list):
            todo += item
        elif isinstance(item, str):
            found += item.splitlines()
    return found


def printed_lines(text: str) -> set[str]:
    """The command lines in `text`: whole inside backticks, else up to where the command ends."""
    lines = set()
    for line in strings_of(text):
        quoted = [q.strip() for q in re.findall(r"`([^`]*)`", line)]
        lines |= {q for q in quoted if q.startswith(STARTS)}
        rest = re.sub(r"`[^`]*`", " ", line)
        for m in BARE.finditer(rest):
            words = rest[m.start() :].split()
            if words[0] == "rtmodel":
                lines.add(" ".join(command_words(words)))
            elif not rest[: m.start()].strip():  # a line of its own (in prose: a flag's name)
                lines.add(" ".join(sentence_words(words)))
    lines.discard("")
    return lines


def unpunctuated(word: str) -> tuple[str, bool]:
    """(the word without the sentence's closing punctuation, whether it had some)."""
    bare = word.rstrip(ENDING)
    return bare, bare != word


def sentence_words(words: list[str]) -> list[str]:
    """A bare `python -m` / torchrun line: up to the word that ends the sentence."""
    taken = []
    for word in words:
        bare, ends = unpunctuated(word)
        taken.append(bare)
        if ends:
            break
    return taken


def command_words(words: list[str]) -> list[str]:
    """A bare `rtmodel ...` in a sentence, as far as its command takes the words (its subcommands,
    options with their values, arguments); [] when the word after rtmodel names no command (prose)."""
    cmd, taken, i = typer.main.get_command(app), ["rtmodel"], 1
    while is_group(cmd):
        name, ends = unpunctuated(words[i]) if i < len(words) else ("", True)
        if name not in cmd.commands:
            return taken if len(taken) > 1 else []
        cmd, i = cmd.commands[name], i + 1
        taken.append(name)
        if ends:
            return taken
    takes_value = {o for p in params_of(cmd, "option") if not p.is_flag for o in p.opts}
    arguments = len(params_of(cmd, "argument"))
    while i < len(words):
        word, ends = unpunctuated(words[i])
        if word.startswith("-"):
            taken.append(word)
            if word in takes_value and not ends and i + 1 < len(words):
                i += 1
                word, ends = unpunctuated(words[i])
                taken.append(word)
        elif arguments:
            taken.append(word)
            arguments -= 1
        else:
            break
        i += 1
        if ends:
            break
    return taken


# ----------------------------------------------------------------------------- running them as printed


def filled(argv: list[str], tmp_path: Path) -> list[str]:
    """`argv` (after `rtmodel`) with each placeholder replaced by what the option it fills takes."""
    cmd, i = typer.main.get_command(app), 0
    while is_group(cmd) and i < len(argv) and argv[i] in cmd.commands:
        cmd, i = cmd.commands[argv[i]], i + 1
    options = {o: p for p in params_of(cmd, "option") for o in p.opts}
    arguments = params_of(cmd, "argument")
    out, pending = argv[:i], None
    for word in argv[i:]:
        if word.startswith("-"):
            option = options.get(word)
            pending = option if option is not None and not option.is_flag else None
            out.append(word)
            continue
        param = pending or (arguments.pop(0) if arguments else None)
        pending = None
        out.append(placeholder_value(word, param, tmp_path) if PLACEHOLDER.fullmatch(word) else word)
    return out


def placeholder_value(word: str, param, tmp_path: Path) -> str:
    """A real value for a placeholder: a profile, a directory, a number, a choice, else a new file."""
    if word == PROFILE:
        return str(PROFILE_2X2)
    if word == "DIR":
        return str(tmp_path)
    example = EXAMPLE_NAMES.keys() & set(getattr(param, "opts", ()))
    if example:
        return EXAMPLE_NAMES[example.pop()]
    kind = getattr(param, "type", None)
    if getattr(kind, "name", "").startswith(("integer", "float")):  # click's INT, FLOAT and their ranges
        return "30"
    if hasattr(kind, "choices"):
        return str(kind.choices[0])
    return str(tmp_path / f"{word.lower()}.json")


def parse(argv: list[str]):
    """Click's parse of `rtmodel argv`, as a real run parses it (values converted, choices and option
    callbacks checked), stopping before the command's body; the command reached. Raises click's
    UsageError where the line would be refused. A command named alone (`rtmodel calibrate`, `rtmodel
    plot crossover`) is a mention in a sentence: only its name is checked."""
    cmd = typer.main.get_command(app)
    ctx = typer.Context(cmd, info_name="rtmodel")
    for i in range(len(argv)):
        name, cmd, _ = cmd.resolve_command(ctx, argv[i:])
        if not is_group(cmd):
            if argv[i + 1 :]:
                cmd.make_context(name, argv[i + 1 :], parent=ctx)
            return cmd
        ctx = typer.Context(cmd, info_name=name, parent=ctx)
    return cmd


def validate_planned(argv: list[str], monkeypatch) -> str:
    """Run a validate line up to its plan (the ranks never start); '' when it got there, else why not."""
    import rtmodel_validation.validate

    real = rtmodel_validation.validate.make_plan

    def plan_only(*args, **kwargs):
        raise Planned(real(*args, **kwargs))

    with monkeypatch.context() as patched:
        patched.setattr(rtmodel_validation.validate, "make_plan", plan_only)
        res = CliRunner().invoke(app, argv)
    return "" if isinstance(res.exception, Planned) else f"exit {res.exit_code}: {res.output.strip()}"


def rtmodel_problem(line: str, tmp_path: Path, monkeypatch) -> str:
    """Why `line` would be refused ('' if it runs as printed)."""
    argv = filled(shlex.split(line)[1:], tmp_path)
    try:
        cmd = parse(argv)
    except typer.TyperException as exc:  # click's errors as typer vendors them
        return exc.format_message()
    if cmd.name == "validate" and len(argv) > 1:
        return validate_planned(argv, monkeypatch)
    return ""


def python_m_problem(line: str, monkeypatch) -> str:
    """Why `python -m MODULE ARGS` would be refused: no such module, or its parser refuses ARGS."""
    words = shlex.split(line)
    module = words[2]
    if importlib.util.find_spec(module) is None:
        return f"no module {module}"
    if not HAS_TORCH:  # the tool's python -m modules measure with torch: their parsers need it imported
        return ""
    main = getattr(importlib.import_module(module), "main", None)
    if main is None or len(words) == 3:
        return ""
    return argparse_problem(lambda: main(words[3:]), monkeypatch)


def torchrun_problem(line: str, monkeypatch) -> str:
    """Why torchrun would refuse the line's options (its own parser; the script is the user's)."""
    if not HAS_TORCH:
        return ""
    from torch.distributed.run import get_args_parser

    return argparse_problem(lambda: get_args_parser().parse_args(shlex.split(line)[1:]), monkeypatch)


def argparse_problem(call, monkeypatch) -> str:
    """Run `call` up to its argparse parse (then stop: no measuring); '' when the arguments parsed."""
    real = argparse.ArgumentParser.parse_args

    def parse_only(self, *args, **kwargs):
        raise Planned(real(self, *args, **kwargs))

    with monkeypatch.context() as patched:
        patched.setattr(argparse.ArgumentParser, "parse_args", parse_only)
        try:
            call()
        except Planned:
            return ""
        except SystemExit as exc:
            return f"argparse refused it (exit {exc.code})"
    return "it ran past its parser"


# ----------------------------------------------------------------------------- the tests


@pytest.fixture(scope="module")
def printed() -> dict[str, str]:
    """Every distinct printed line -> one output it was printed in (else the literal that prints it)."""
    found = {}
    for where, text in outputs().items():
        for line in sorted(printed_lines(text)):
            found.setdefault(line, where)
    return {**literal_lines(), **found}


def test_every_printed_command_line_runs_as_printed(printed, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # validate checks its default results file in the working directory
    broken = []
    for line, where in sorted(printed.items()):
        if line.startswith("rtmodel"):
            problem = rtmodel_problem(line, tmp_path, monkeypatch)
        elif line.startswith("python -m"):
            problem = python_m_problem(line, monkeypatch)
        else:
            problem = torchrun_problem(line, monkeypatch)
        if problem:
            broken.append(f"{line!r} (printed by {where}): {problem}")
    assert not broken, "printed command lines that do not run as printed:\n" + "\n".join(broken)


def test_the_collection_finds_the_lines_advice_prints(printed):
    """Guards the guard: an extractor that found nothing would pass everything."""
    lines = set(printed)
    assert any(line.startswith("rtmodel validate --") for line in lines), sorted(lines)
    assert any(line.startswith("rtmodel validate") and "--local-sgd-h" in line for line in lines)
    assert any(line.startswith("torchrun --nnodes") for line in lines)
    assert any(line.startswith("python -m profiler.opcount --model") for line in lines)
    assert any(line.startswith("rtmodel calibrate") for line in lines)  # from a --help


@pytest.mark.parametrize(
    "text, expected",
    [
        ("settle: a short real run of both: rtmodel validate --recommended.", {"rtmodel validate --recommended"}),
        ("unless a run says otherwise (rtmodel validate --topology ring). Next", {"rtmodel validate --topology ring"}),
        ("not known (rtmodel validate --local-sgd-h 30 measures it).", {"rtmodel validate --local-sgd-h 30"}),
        ("from `python -m profiler.opcount --model x --dispatch` on yours", {"python -m profiler.opcount --model x --dispatch"}),
        ("rtmodel predicts it; rtmodel's model; Decent-DP + rtmodel │", set()),
        ("processes per node (torchrun --nproc-per-node)", set()),  # names torchrun's flag
        ("a file from `rtmodel calibrate PROFILE --out FILE`, then", {"rtmodel calibrate PROFILE --out FILE"}),
        ('{"torchrun": "torchrun --nnodes 2 train.py"}', {"torchrun --nnodes 2 train.py"}),
    ],
)  # fmt: skip
def test_lines_are_cut_where_the_command_ends(text, expected):
    assert printed_lines(text) == expected


@pytest.mark.parametrize(
    "line",
    ["rtmodel validate --local-sgd-h 30", "rtmodel validate --topology ring", "rtmodel advise --gpus many",
     "rtmodel validate --profile PROFILE --topology nosuch", "rtmodel advise --no-such-flag"],
)  # fmt: skip
def test_a_line_that_would_be_refused_is_caught(line, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert rtmodel_problem(line, tmp_path, monkeypatch)


def test_python_m_and_torchrun_lines_are_checked_by_their_parsers(monkeypatch):
    pytest.importorskip("torch")
    assert python_m_problem("python -m profiler.nosuch --x", monkeypatch) == "no module profiler.nosuch"
    assert python_m_problem("python -m profiler.opcount --model no-such-model", monkeypatch)
    assert not python_m_problem("python -m profiler.opcount --model transformer-base --dispatch", monkeypatch)
    assert torchrun_problem("torchrun --no-such-flag 3 train.py", monkeypatch)


@pytest.mark.parametrize(
    "kwargs, expected",
    [
        ({}, "rtmodel validate --profile PROFILE --recommended"),
        ({"topology": "ring"}, "rtmodel validate --profile PROFILE --topology ring"),
        ({"local_sgd_h": 30}, "rtmodel validate --profile PROFILE --local-sgd-h 30"),
        ({"profile": "my runs/p.json"}, "rtmodel validate --profile 'my runs/p.json' --recommended"),
    ],
)
def test_validate_lines_name_the_profile_and_what_to_run(kwargs, expected, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    line = validate_line(**kwargs)
    assert line == expected
    if "profile" not in kwargs:
        assert rtmodel_problem(line, tmp_path, monkeypatch) == "", line
