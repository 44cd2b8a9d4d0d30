"""Calibration: fits profiler measurements into the runtime model's parameter types.

Public API (re-exported lazily so `import calibration` costs nothing until a function is used):
    load_profile(path) -> Profile                   ProfileError on an unusable file
    profile_from_document(doc, origin="profile") -> Profile   (a parsed JSON document, checked the same way)
    Profile, Measurement                            typed, frozen profile data (calibration.profile)
    calibrate(profile, fallback_network=None, distribution="empirical", origin=None) -> Calibration
    scenario_from_profile(profile, gpus, gpus_per_node=None, fallback_network=None,
                          distribution="empirical") -> ProfiledScenario
    extrapolation_notes(calibration, target, message_bytes=None, far=4.0) -> list[str]
    calibration_to_json(cal) -> dict, calibration_from_json(doc) -> Calibration
    save_calibration(cal, path), load_calibration(path) -> Calibration
    synthetic_profile(truth=None, **overrides) -> dict   (known parameters + noise, for tests and demos)
"""

from __future__ import annotations

from runtime_model.lazy_exports import lazy_getattr

_EXPORTS = {
    "load_profile": "calibration.profile_io",
    "validate_profile": "calibration.profile_io",
    "profile_from_document": "calibration.profile_io",
    "Profile": "calibration.profile",
    "Workload": "calibration.profile",
    "ComputeProfile": "calibration.profile",
    "AllReduceMeasurement": "calibration.profile",
    "Measurement": "calibration.measurement",
    "scenario_from_profile": "calibration.profiled",
    "ProfiledScenario": "calibration.profiled",
    "ProfileError": "calibration.profile_io",
    "CalibrationError": "calibration.profile_io",
    "calibrate": "calibration.calibrate_profile",
    "Calibration": "calibration.results",
    "FitReport": "calibration.results",
    "extrapolation_notes": "calibration.extrapolate",
    "calibration_to_json": "calibration.serialize",
    "calibration_from_json": "calibration.serialize",
    "save_calibration": "calibration.serialize",
    "load_calibration": "calibration.serialize",
    "synthetic_profile": "calibration.synthetic",
    "SyntheticTruth": "calibration.synthetic",
}

__all__ = sorted(_EXPORTS)


__getattr__ = lazy_getattr(__name__, _EXPORTS)
