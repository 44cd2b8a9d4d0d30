"""The one way from a profile to a Scenario: load, calibrate, place on the target cluster, explain.

Why one function: `rtmodel advise --profile` and `rtmodel validate` both turn a profile into the
scenario they predict; done twice, the two drifted (defaults for the target's GPUs per node, which
notes are attached). Both now call scenario_from_profile and get the same scenario, provenance and notes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from calibration.calibrate_profile import calibrate
from calibration.extrapolate import extrapolation_notes
from calibration.profile_view import Profile, load_profile
from rtmodel_documents.calibration_document import Calibration
from runtime_model.core.scenario import ClusterShape, Network, Scenario


@dataclass(frozen=True)
class ProfiledScenario:
    """A calibrated scenario for a target cluster and how its parameters were obtained.

    provenance: parameter -> where it came from ("measured (...)", "preset tcp-25g");
    notes: how the fit extrapolates to the target shape, then the calibration's own notes.
    """

    scenario: Scenario
    provenance: dict[str, str]
    notes: tuple[str, ...]
    measured_shape: ClusterShape
    # link classes the profile marks as no real link, kept as measured for a run on the profiled machine
    kept_as_measured: tuple[str, ...] = ()

    def links_used(self) -> dict[str, tuple[bool, float]]:
        """For each link class the target shape uses: (measured on this cluster?, the fit's relative
        1-sigma on bandwidth), what `confidence.profile_margin` composes the margin from."""
        shape, net = self.scenario.shape, self.scenario.network
        used = {"intra": shape.gpus_per_node > 1, "inter": shape.nodes > 1}
        return {
            cls: (
                self.provenance.get(f"{cls}.bandwidth_Bps", "").startswith("measured"),
                getattr(net, cls).bandwidth_rel_sd,
            )
            for cls, on in used.items()
            if on
        }

    def margin(self):
        """The confidence.Margin: the calibrated profiles' measured error, widened by each link not
        measured or fitted loosely and by extrapolation beyond the measured shape (confidence.py); the
        mean errors for equivalence, the worst ones for the verdict's interval."""
        from runtime_model.advice.confidence import (
            PROFILE,
            SHARED_GPU_PROFILE,
            Margin,
            describe_parts,
            measured_errors,
            profile_margin,
        )

        shape = (self.scenario.shape.gpus, self.measured_shape.gpus, self.links_used())
        shared_gpu = "intra" in self.kept_as_measured  # the ranks shared a GPU (profiler/shape.py)
        typical, _ = profile_margin(*shape, shared_gpu=shared_gpu)
        worst, parts = profile_margin(*shape, worst=True, shared_gpu=shared_gpu)
        why = f"±{worst:.1%} on the speedup (mean errors: ±{typical:.1%}): {describe_parts(parts)}"
        kind = SHARED_GPU_PROFILE if shared_gpu else PROFILE
        evidence = measured_errors()[kind].evidence(f"calibrated {kind}", worst)
        evidence["parts"] = {p.what: p.error for p in parts}
        return Margin(typical, worst, why, evidence)


def scenario_from_profile(
    profile: str | Path | Profile,
    gpus: int,
    gpus_per_node: int | None = None,
    fallback_network: Network | None = None,
    distribution: str = "empirical",
    as_measured: bool = False,
) -> ProfiledScenario:
    """Calibrate `profile` (a file or a loaded Profile) and place it on `gpus` GPUs.

    gpus_per_node defaults to the profile's ranks per node; fallback_network supplies a link class
    the profile cannot measure (CalibrationError without it); distribution is the compute
    distribution ("empirical" or "normal"); as_measured keeps links the profile marks unmeasured (for a
    run on the profiled machine itself, see calibrate). Raises ProfileError / CalibrationError / ScenarioError,
    all UserErrors with one-line messages.
    """
    loaded = profile if isinstance(profile, Profile) else load_profile(profile)
    cal = calibrate(
        loaded, fallback_network=fallback_network, distribution=distribution, as_measured=as_measured
    )
    name = profile if not isinstance(profile, Profile) else profile.origin
    profiled = scenario_from_calibration(cal, gpus, gpus_per_node, f"profile {name}")
    kept = tuple(sorted(loaded.unmeasured_links)) if as_measured else ()
    return replace(profiled, kept_as_measured=kept)


def scenario_from_calibration(
    cal: Calibration, gpus: int, gpus_per_node: int | None = None, description: str = ""
) -> ProfiledScenario:
    """Place a calibration (fitted now, or read from `rtmodel calibrate --out`) on `gpus` GPUs: the
    same scenario, provenance and notes whichever way the calibration came."""
    # 0 is refused, not 'not given'
    k = cal.measured_shape.gpus_per_node if gpus_per_node is None else gpus_per_node
    shape = ClusterShape(gpus, k)
    return ProfiledScenario(
        scenario=cal.scenario(shape, description),
        provenance=dict(cal.provenance),
        notes=tuple(extrapolation_notes(cal, shape)) + tuple(cal.notes),
        measured_shape=cal.measured_shape,
    )
