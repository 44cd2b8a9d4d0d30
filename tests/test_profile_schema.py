"""The profile's schema both ways (rtmodel_documents.profile_document): what the writers build reads back
through the reader unchanged, and a key renamed on either side fails the reader, naming the key."""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from pathlib import Path

import pytest

from calibration.profile_view import load_profile, profile_from_document
from calibration.synthetic import SyntheticTruth, synthetic_document
from rtmodel_documents.profile_checks import ProfileError
from rtmodel_documents.profile_document import (
    InFlightResult,
    ProfileDocument,
    ProfileShape,
    ProfileWorkload,
    frozen,
    new_document,
)

DATA = Path(__file__).parent / "data"
SMALL = SyntheticTruth(iterations=3, samples_per_size=3, sizes_bytes=(4096, 1 << 20))


def _as_written(doc: ProfileDocument) -> dict:
    return json.loads(json.dumps(doc.to_json(), allow_nan=False))  # what write_json_atomic puts in the file


def _everything() -> ProfileDocument:
    """A profile holding every optional field too, as the profiler writes them (pattern_entry: groups and
    each group's samples; a twin pattern; DDP's wrapped phases and Decent-DP's step)."""
    doc = synthetic_document(SMALL, backend="nccl", nccl_algo_env="Ring")
    rows = doc.compute.forward_s
    compute = replace(
        doc.compute, ddp_forward_s=rows, ddp_backward_s=rows, ddp_optimizer_s=rows, gossip_step_s=rows
    )
    first, *rest = doc.communication.patterns
    first = replace(
        first,
        groups=((0, 1), (2, 3)),
        results=tuple(replace(r, group_samples_s=(r.samples_s, r.samples_s)) for r in first.results),
    )
    twin = replace(first, pattern="node", same_as=first.pattern)
    flight = InFlightResult(
        pattern=first.pattern,
        buckets_bytes=(4096, 8192),
        one_at_a_time_s=(0.2, 0.3),
        in_flight_s=(0.1, 0.2),
        two_groups_s=(0.05, 0.1),
    )
    comm = replace(
        doc.communication,
        reps=3,
        warmup_reps=1,
        patterns=(first, *(p for p in rest if p.pattern != "node"), twin),
        in_flight=(flight,),
    )
    shape = replace(doc.shape, device_name="x86_64", unmeasured_links={"inter": "pretend nodes"})
    workload = replace(doc.workload, precision="fp16", optimizer="adam", ddp_first_bucket_mb=1.0)
    return replace(doc, shape=shape, workload=workload, compute=compute, communication=comm)


@pytest.mark.parametrize("doc", [
    synthetic_document(SMALL), synthetic_document(SMALL, backend="nccl"), _everything(),
], ids=["synthetic", "nccl-unset", "every-field"])  # fmt: skip
def test_what_the_writers_build_reads_back_unchanged(doc):
    written = _as_written(doc)
    assert written["schema"] == "rtmodel-profile/1" and "tool" not in written
    back = ProfileDocument.from_json(written, need_complete=True)
    assert back == doc and back.to_json() == written
    profile_from_document(written)  # and calibration takes it


def test_the_profilers_pattern_entry_reads_back():
    pytest.importorskip("torch")
    from profiler.comm import pattern_entry
    from rtmodel_documents.profile_patterns import patterns_for

    pattern = next(p for p in patterns_for(4, 2) if p.name == "pair-inter")
    entry = pattern_entry(pattern, [4096], [[[1.0, 4.0]], [[2.0, 2.0]], [[3.0, 1.0]], [[5.0, 1.5]]])
    doc = synthetic_document(SMALL)
    doc = replace(doc, communication=replace(doc.communication, patterns=(entry,)))
    assert ProfileDocument.from_json(_as_written(doc), need_complete=True).communication.patterns == (entry,)


def test_the_profilers_in_flight_entry_reads_back_and_calibration_reports_its_gain():
    """Per repetition the slowest rank of each timing; the gain is the ratio of the medians, reported as
    a fit with a note, and the model's parameters are those of the same profile without it."""
    pytest.importorskip("torch")
    from calibration.calibrate_profile import calibrate
    from profiler.comm import in_flight_entry
    from rtmodel_documents.profile_patterns import patterns_for

    pattern = next(p for p in patterns_for(4, 2) if p.name == "pair-inter")
    entry = in_flight_entry(
        pattern, [4096, 8192], [([0.4, 0.5], [0.2, 0.3]), None, ([0.6, 0.4], [0.1, 0.2]), None]
    )
    assert (entry.one_at_a_time_s, entry.in_flight_s) == ((0.6, 0.5), (0.2, 0.3))
    assert entry.gain == pytest.approx(0.55 / 0.25)
    doc = synthetic_document(SMALL)
    with_it = replace(doc, communication=replace(doc.communication, in_flight=(entry,)))
    assert ProfileDocument.from_json(_as_written(with_it), need_complete=True).communication.in_flight == (
        entry,
    )
    cal, plain = (calibrate(profile_from_document(_as_written(d))) for d in (with_it, doc))
    fit = cal.fit("in flight pair-inter")
    assert fit.kind == "in-flight" and fit.params["gain"][0] == pytest.approx(entry.gain)
    assert any("2.20x" in n and "charges one at a time" in n for n in cal.notes)
    assert (cal.network, cal.compute) == (plain.network, plain.compute)


def _keys(node, path=()):
    """Every (path to a dict, key) of a JSON document."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield path, key
            yield from _keys(value, (*path, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _keys(value, (*path, i))


def test_every_key_renamed_fails_the_reader_naming_it():
    written = _as_written(_everything())
    keys = list(_keys(written))
    assert len(keys) > 100
    for path, key in keys:
        doc = copy.deepcopy(written)
        parent = doc
        for step in path:
            parent = parent[step]
        parent[f"{key}_renamed"] = parent.pop(key)
        with pytest.raises(ProfileError) as err:
            ProfileDocument.from_json(doc, "p.json", need_complete=True)
        message = str(err.value)
        assert "\n" not in message and message.startswith("p.json")
        assert f"{key}_renamed" in message or key in message, (path, key, message)


def test_a_checkpoint_reads_back_and_is_not_yet_a_profile():
    doc = synthetic_document(SMALL)
    checkpoint = replace(new_document("2026-01-01T00:00:00Z"), shape=doc.shape, workload=doc.workload).done(
        "shape"
    )
    written = _as_written(checkpoint)
    assert written["complete"] is False and written["sections_done"] == ["shape"]
    assert ProfileDocument.from_json(written) == checkpoint
    with pytest.raises(
        ProfileError, match=r"incomplete profile \(sections missing: compute, communication; done: shape\)"
    ):
        ProfileDocument.from_json(written, "p.json", need_complete=True)
    later = replace(checkpoint, compute=doc.compute).done("compute")
    assert ProfileDocument.from_json(_as_written(later)).sections_done == ("shape", "compute")


def test_profiles_with_the_old_header_read_the_same():
    path = DATA / "synthetic_profile_2x2.json"
    old = json.loads(path.read_text())
    assert (old["tool"], old["schema_version"]) == ("rtmodel-profile", 1) and "schema" not in old
    typed = ProfileDocument.from_json(old, need_complete=True)
    new = typed.to_json()
    assert {k: v for k, v in new.items() if k != "schema"} == {
        k: v for k, v in old.items() if k not in ("tool", "schema_version")
    }
    assert profile_from_document(new, str(path)) == load_profile(path)


def test_resume_sections_compare_as_written():
    shape = ProfileShape(world_size=2, ranks_per_node=2, nodes=1, backend="gloo")
    assert "nccl_algo_env" not in shape.to_json() and "device_name" not in shape.to_json()
    assert shape.to_json()["nccl_version"] is None  # always written, null where unknown
    assert replace(shape, backend="nccl").to_json()["nccl_algo_env"] is None  # NCCL with NCCL_ALGO unset
    workload = ProfileWorkload(ddp_buckets_bytes=(4,), gossip_buckets_bytes=(4,))
    assert ProfileWorkload.from_json(workload.to_json(), "p") == workload
    assert frozen([[1, 2.5], [3]]) == ((1, 2.5), (3,))
