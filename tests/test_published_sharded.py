"""The sharded model next to published FSDP throughputs (rtmodel_literature/published_sharded.py): the data
file's rows load and are priced, each series is one setting, and docs/sharded.md states what the code
computes (its table and its summary), whatever those numbers are."""

import re
from pathlib import Path

import pytest

from rtmodel_literature import published_sharded as ps

DOC = Path(__file__).parent.parent / "docs" / "sharded.md"
SETTING = (
    "source",
    "gpu",
    "network",
    "intra",
    "model",
    "params",
    "seq_len",
    "micro_batch",
    "method",
)


def test_every_row_loads_and_every_check_row_is_priced():
    table = ps.rows()
    checks = ps.all_checks()
    assert len(checks) == sum(r.role == "check" for r in table) >= 6
    assert len({c.row.source for c in checks}) >= 2
    assert {c.row.set for c in checks} == {ps.DEV, ps.HELD_BACK}
    for c in checks:
        assert c.predicted_step_s > 0 and abs(c.error) < 1  # finite, and a throughput, not a unit slip


def test_each_series_is_one_setting_scaled_from_its_smallest_count():
    table = ps.rows()
    for series in {r.series for r in table}:
        members = [r for r in table if r.series == series]
        bases = [r for r in members if r.role == "base"]
        assert len(bases) == 1 and bases[0].gpus == min(r.gpus for r in members), series
        for field in SETTING:
            assert len({getattr(r, field) for r in members}) == 1, (series, field)


def test_the_base_row_is_reproduced_by_its_compute():
    """The inversion: at the base row's count the model's step is the published one."""
    for c in ps.all_checks():
        assert ps.predicted_step_s(c.base, c.compute_s) == pytest.approx(c.base.step_s, rel=1e-9)
        assert 0 < c.compute_s < c.base.step_s


def doc_numbers(pattern: str) -> list[tuple[str, ...]]:
    return re.findall(pattern, DOC.read_text())


def test_docs_summary_is_what_the_code_computes():
    stated = doc_numbers(
        r"Over the (\d+) priced rows: \|error\| mean ([\d.]+) %, max ([\d.]+) % "
        r"\(flat: mean ([\d.]+) %, max ([\d.]+) %\)"
    )
    s = ps.summary()
    assert stated == [
        (
            str(s.rows),
            *(f"{v:.1f}" for v in (s.mean_abs_pct, s.max_abs_pct, s.flat_mean_abs_pct, s.flat_max_abs_pct)),
        )
    ]
    for label, subset in (("Dev", ps.DEV), ("Held-back", ps.HELD_BACK)):
        part = ps.summary(subset=subset)
        found = doc_numbers(rf"{label} \((\d+) rows\): mean ([\d.]+) %, max ([\d.]+) %")
        assert found == [(str(part.rows), f"{part.mean_abs_pct:.1f}", f"{part.max_abs_pct:.1f}")], label


def test_docs_table_is_what_the_code_computes():
    lines = [
        ln for ln in DOC.read_text().splitlines() if re.match(r"\| [a-z0-9-]+ \| (dev|held-back) \|", ln)
    ]
    computed = [
        f"| {c.row.series} | {c.row.set} | {c.row.method} | {c.base.gpus} | {c.row.gpus} | "
        f"{c.row.tokens_per_s_per_gpu:,.0f} | {c.predicted_tokens_per_s:,.0f} | {100 * c.error:+.1f} | "
        f"{100 * c.flat_error:+.1f} |"
        for c in ps.all_checks()
    ]
    assert lines == computed
