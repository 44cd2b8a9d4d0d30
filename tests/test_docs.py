"""The docs (issue 28): README.md is what a newcomer reads, docs/ the reference, built as a site.

- the site builds with `mkdocs build --strict` (nav lists every page; links and anchors inside docs/);
- every relative link in README.md and docs/*.md reaches a file and, where it names one, a heading
  (valid both as GitHub and as mkdocs spell anchors, so it works on either);
- every `rtmodel` command shown in a ```bash block runs: the offline ones here, in a scratch directory,
  through typer's CliRunner; the rest are listed in SKIPPED with the reason. A command that fails is a
  docs bug (or a code bug) to fix, not a test to loosen.
"""

import os
import re
import shlex
import shutil
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest
import typer.main
from typer.testing import CliRunner

from rtmodel_cli.app import app
from tests.nccl_tests_text import nccl_tests_output

ROOT = Path(__file__).parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
runner = CliRunner()

# What the scratch directory holds before a documented command runs there: the files that earlier
# steps of the docs would have made (a profile is measured by `rtmodel profile`, which is not run here).
PROFILE = ROOT / "tests" / "data" / "synthetic_profile_2x2.json"  # stands in for profile.json
VALIDATIONS = ROOT / "notebooks" / "data" / "example_validations.jsonl"  # for `validate --report`
TRACE = ROOT / "tests" / "data" / "traces" / "hta-a100x2-rank0.json.gz"  # a real trace, for `--trace traces`
# an all_reduce_perf output across 2 nodes x 8 (written in nccl-tests' layout: tests/nccl_tests_text.py)
NCCL_TESTS_RUN = nccl_tests_output({(1 << 20) << i: 60.0 + ((1 << 20) << i) / 45e3 for i in range(13)})

TORCH_RANKS = "launches torch ranks (the profiler and validation tests run these)"
ROOT_NETNS = "needs root and network namespaces (tests/test_emulation.py, marked emulated)"
CLUSTER = "needs several nodes under torchrun or SLURM"
SKIPPED = {
    "rtmodel profile --out profile.json --quick": TORCH_RANKS,
    "rtmodel profile --out profile.json --model transformer-tiny --batch-per-rank 16": TORCH_RANKS,
    "rtmodel profile --out profile.json --model mypkg.models:build --model-arg width=1024": TORCH_RANKS
    + "; mypkg is the reader's own package",
    "rtmodel profile --out profile.json --nproc-per-node 4 --ranks-per-node 2": TORCH_RANKS,
    "rtmodel profile --out profile.json --model transformer-base --precision fp16": TORCH_RANKS + "; fp16 needs a GPU",
    "rtmodel profile --out profile.json --model transformer-base --precision bf16 --optimizer accum-adam": TORCH_RANKS,
    "rtmodel profile --out profile.json --model resnet50 --batch-per-rank 64 --model-arg width_div=4": TORCH_RANKS,
    "rtmodel profile --out prof.json --nproc-per-node 4 --ranks-per-node 2 --quick": TORCH_RANKS,
    "rtmodel validate --profile profile.json --recommended": TORCH_RANKS,
    "rtmodel validate --profile prof.json --topology alternating-exp-ring": TORCH_RANKS,
    "rtmodel validate --profile prof.json --recommended --format json": TORCH_RANKS,
    "torchrun --nnodes M --node-rank i --nproc-per-node 8 --master-addr node0.example --master-port 29500 "
    "--no-python rtmodel profile --out profile.json": CLUSTER,
    "torchrun --nnodes 2 --nproc-per-node 8 ... $(which rtmodel) validate --profile prof.json --recommended": CLUSTER
    + " (and `...` stands for the rendezvous options)",
    "sudo rtmodel emulate measure": ROOT_NETNS,
    "sudo rtmodel emulate up --nodes 2 --bandwidth-mbit 1000 --flow-mbit 300": ROOT_NETNS,
    "sudo rtmodel emulate up --nodes 2 --ranks-per-node 2 --bandwidth-mbit 100 --delay-ms 1": ROOT_NETNS
    + "; runs until Ctrl-C",
    "sudo rtmodel emulate run --nodes 2 --ranks-per-node 2 --bandwidth-mbit 1000 -- -m rtmodel_cli profile --out p.json": ROOT_NETNS,
}
SLOW = ("rtmodel plot",)  # drawing a sweep takes seconds


def without_code(text: str) -> str:
    """The text outside fenced blocks and inline code spans (links inside code are not links)."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
    return re.sub(r"`[^`\n]*`", "", text)


def bash_blocks(text: str) -> list[str]:
    return re.findall(r"^```bash\n(.*?)^```", text, flags=re.M | re.S)


def mentions_rtmodel(tokens: list[str]) -> bool:
    return any(t.strip("()").rsplit("/", 1)[-1] == "rtmodel" for t in tokens)


def documented_commands() -> dict[str, tuple[list[str], str]]:
    """Every shell command in a ```bash block that runs `rtmodel`, keyed by its words joined by one space,
    with its words and the page it is shown on (first page that shows it)."""
    found = {}
    for page in PAGES:
        for block in bash_blocks(page.read_text()):
            for line in block.replace("\\\n", " ").splitlines():
                words = shlex.split(line, comments=True)
                command: list[str] = []
                for word in [*words, "&&"]:
                    if word not in ("&&", "||", ";", "|"):
                        command.append(word)
                        continue
                    if mentions_rtmodel(command):
                        found.setdefault(" ".join(command), (command, page.name))
                    command = []
    return found


COMMANDS = documented_commands()


def test_commands_are_found_and_every_skip_is_still_shown():
    assert "rtmodel advise --gpus 64" in COMMANDS
    stale = set(SKIPPED) - set(COMMANDS)
    assert not stale, f"SKIPPED lists commands the docs no longer show: {stale}"


def command_params():
    for key, (words, page) in COMMANDS.items():
        marks = [pytest.mark.slow] if key.startswith(SLOW) else []
        yield pytest.param(key, words, id=f"{page}: {key}", marks=marks)


@pytest.mark.parametrize(("key", "words"), list(command_params()))
def test_every_documented_command_runs(key, words, tmp_path, monkeypatch):
    if key in SKIPPED:
        pytest.skip(SKIPPED[key])
    if "--trace" in words:  # reading a trace needs the [trace] extra, as tests/test_trace.py does
        pytest.importorskip("hta", reason="the [trace] extra (holistictraceanalysis)")
    assert words[0] == "rtmodel", f"{key!r}: not an `rtmodel` command; run it here or list it in SKIPPED"
    shutil.copy(PROFILE, tmp_path / "profile.json")
    (tmp_path / "all_reduce.txt").write_text(NCCL_TESTS_RUN)  # what `--nccl-tests all_reduce.txt` reads
    shutil.copy(VALIDATIONS, tmp_path / "rtmodel-validations.jsonl")  # validate's default, in the project
    (tmp_path / "traces").mkdir()  # what torch.profiler's tensorboard_trace_handler wrote (docs/trace.md)
    shutil.copy(TRACE, tmp_path / "traces" / "rank0.json.gz")
    monkeypatch.chdir(tmp_path)
    if "--calibration" in words:  # the file `rtmodel calibrate profile.json --out FILE`, shown before it, wrote
        made = runner.invoke(app, ["calibrate", "profile.json", "--out", words[words.index("--calibration") + 1]])
        assert made.exit_code == 0, made.output
    env = {"COLUMNS": "120"}
    result = runner.invoke(app, words[1:], env=env)
    assert result.exit_code == 0, f"{key}\n{result.output}\n{result.exception!r}"
    out = next((words[i + 1] for i, w in enumerate(words[:-1]) if w == "--out"), None)
    if out:
        assert (tmp_path / out).stat().st_size > 0


def every_command(group=None, prefix=()):
    group = group or typer.main.get_command(app)
    yield prefix
    for name, sub in group.commands.items():
        if hasattr(sub, "commands"):
            yield from every_command(sub, prefix + (name,))
        else:
            yield prefix + (name,)


@pytest.mark.parametrize("path", list(every_command()), ids=lambda p: " ".join(("rtmodel", *p)))
def test_help_of_every_command(path):
    result = runner.invoke(app, [*path, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage" in result.output


def github_slug(heading: str) -> str:
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def mkdocs_slug(heading: str) -> str:
    """As Python-Markdown's toc extension spells it (what mkdocs links to)."""
    text = unicodedata.normalize("NFKD", heading).encode("ascii", "ignore").decode("ascii")
    return re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", text).strip().lower())


def anchors(page: Path) -> tuple[set[str], set[str]]:
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.M | re.S)
    headings = [re.sub(r"[`*]", "", h) for h in re.findall(r"^#{1,6} +(.+?) *#*$", text, flags=re.M)]
    return {github_slug(h) for h in headings}, {mkdocs_slug(h) for h in headings}


def relative_links(page: Path):
    for target in re.findall(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)", without_code(page.read_text())):
        if not re.match(r"[a-z]+:", target):
            yield target


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_reach_a_file_and_heading(page):
    links = list(relative_links(page))
    assert page.name != "README.md" or any(link.startswith("docs/") for link in links)
    for link in links:
        path, _, anchor = link.partition("#")
        target = (page.parent / path).resolve() if path else page
        assert target.is_file(), f"{page.name}: {link} -> no file {target}"
        if anchor:
            github, mkdocs = anchors(target)
            assert anchor in github and anchor in mkdocs, f"{page.name}: {link} -> no heading #{anchor}"


def test_site_builds_strict(tmp_path):
    """mkdocs --strict fails on a broken link or anchor and on a page left out of the nav (mkdocs.yml).
    The test extras install mkdocs (CI has it); a GPU host's own Python may not."""
    pytest.importorskip("mkdocs")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    cmd = [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml")]
    done = subprocess.run([*cmd, "-d", str(tmp_path / "site")], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "WARNING" not in done.stderr, done.stderr
    assert (tmp_path / "site" / "index.html").is_file()


def test_readme_is_for_a_newcomer():
    """The reference lives in docs/; README keeps set-up, the pipeline, examples and where to read more."""
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 150
    for heading in ("## Set up", "## Pipeline", "## Read more"):
        assert heading in readme
    shown = {
        key.split()[1] for key in COMMANDS if key.startswith("rtmodel ") and "README.md" in COMMANDS[key][1]
    }
    assert {"advise", "topologies", "profile", "calibrate", "validate", "plot"} <= shown
    assert "sudo rtmodel emulate" in readme


def test_the_site_sets_up_with_the_readmes_commands():
    """docs/index.md (the site's front page) and README.md give the same two set-up commands and the
    same pipeline: written twice, they drifted (`pip install .` in one, a virtual environment in the
    other; `calibrate --out` in one only)."""

    def setup_commands(page: Path) -> list[str]:
        setup = page.read_text().split("## Set up", 1)[1].split("\n## ", 1)[0]
        return re.findall(r"```bash\n(.*?)\n```", setup, flags=re.S)

    assert setup_commands(ROOT / "docs" / "index.md") == setup_commands(ROOT / "README.md")

    def pipeline(page: Path) -> list[list[str]]:  # the table's rows, but index's "read" column
        table = page.read_text().split("## Pipeline", 1)[1].split("\n## ", 1)[0]
        rows = [row.strip().strip("|").split("|") for row in table.splitlines() if row.startswith("| ")]
        return [[cell.strip() for cell in row[:3]] for row in rows]

    assert pipeline(ROOT / "docs" / "index.md") == pipeline(ROOT / "README.md")


def test_the_readme_sets_up_in_two_commands():
    """A newcomer copies one line to get an answer, another to run the tests (CI runs exactly that one:
    tests/test_structure.py)."""
    readme = (ROOT / "README.md").read_text()
    setup = readme.split("## Set up", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```bash\n(.*?)\n```", setup, flags=re.S)
    assert len(blocks) == 2 and all("\n" not in b for b in blocks), blocks
    assert blocks[0].startswith("python3 -m venv .venv") and blocks[0].endswith("rtmodel advise --gpus 64")
    assert blocks[1].startswith("python3 -m venv .venv") and blocks[1].endswith("python -m pytest -q")
