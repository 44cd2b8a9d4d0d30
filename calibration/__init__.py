"""Calibration: fits profiler measurements into the runtime model's parameter types.

Public API (re-exported lazily so `import calibration` costs nothing until a function is used):
    load_profile(path) -> Profile                   ProfileError on an unusable file
    profile_from_document(doc, origin="profile") -> Profile   (a parsed JSON document, checked the same way)
    Profile, Measurement                            typed, frozen profile data (calibration.profile)
    calibrate(profile, fallback_network=None, distribution="empirical", origin=None,
              as_measured=False) -> Calibration
    scenario_from_profile(profile, gpus, gpus_per_node=None, fallback_network=None,
                          distribution="empirical", as_measured=False) -> ProfiledScenario
    scenario_from_calibration(calibration, gpus, gpus_per_node=None, description="") -> ProfiledScenario
    extrapolation_notes(calibration, target, message_bytes=None, far=4.0) -> list[str]
    calibration_to_json(cal) -> dict, calibration_from_json(doc) -> Calibration
    save_calibration(cal, path), load_calibration(path) -> Calibration
    synthetic_profile(truth=None, **overrides) -> dict   (known parameters + noise, for tests and demos)
    synthetic_document(truth=None, **overrides) -> ProfileDocument   (the same, typed: rtmodel_util.profile_document)
"""

from __future__ import annotations

from runtime_model.core.lazy_exports import lazy_exports

_EXPORTS, __getattr__, __all__ = lazy_exports(
    __name__,
    {
        "profile_io": ("load_profile", "validate_profile", "profile_from_document", "ProfileError", "CalibrationError"),
        "profile": ("Profile", "Workload", "ComputeProfile", "AllReduceMeasurement"),
        "measurement": ("Measurement",),
        "profiled": ("scenario_from_profile", "scenario_from_calibration", "ProfiledScenario"),
        "calibrate_profile": ("calibrate",),
        "results": ("Calibration", "FitReport"),
        "extrapolate": ("extrapolation_notes",),
        "serialize": ("calibration_to_json", "calibration_from_json", "save_calibration", "load_calibration"),
        "synthetic": ("synthetic_profile", "synthetic_document", "SyntheticTruth"),
    },
)
