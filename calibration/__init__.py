"""Calibration: fits profiler measurements into the runtime model's parameter types.

Public API (re-exported lazily so `import calibration` costs nothing until a function is used):
    load_profile(path) -> Profile                   ProfileError on an unusable file
    profile_from_document(doc, origin="profile") -> Profile   (a parsed JSON document, checked the same way)
    Profile                                         a checked profile document viewed for fitting (calibration.profile_view)
    Measurement                                     one timed quantity's samples and statistics
    calibrate(profile, fallback_network=None, distribution="empirical", origin=None,
              as_measured=False) -> Calibration   (rtmodel_documents.calibration_document: the PARAMS file's type)
    scenario_from_profile(profile, gpus, gpus_per_node=None, fallback_network=None,
                          distribution="empirical", as_measured=False) -> ProfiledScenario
    scenario_from_calibration(calibration, gpus, gpus_per_node=None, description="") -> ProfiledScenario
    extrapolation_notes(calibration, target, message_bytes=None, far=4.0) -> list[str]
    synthetic_profile(truth=None, **overrides) -> dict   (known parameters + noise, for tests and demos)
    synthetic_document(truth=None, **overrides) -> ProfileDocument   (the same, typed: rtmodel_documents.profile_document)
The documents themselves (the profile, the calibration: Calibration.from_json / to_json, load_calibration,
save_calibration) and their errors (ProfileError, CalibrationError) are rtmodel_documents'.
"""

from __future__ import annotations

from runtime_model.core.lazy_exports import lazy_exports

_EXPORTS, __getattr__, __all__ = lazy_exports(
    __name__,
    {
        "profile_view": ("load_profile", "profile_from_document", "Profile"),
        "measurement": ("Measurement",),
        "profiled": ("scenario_from_profile", "scenario_from_calibration", "ProfiledScenario"),
        "calibrate_profile": ("calibrate",),
        "extrapolate": ("extrapolation_notes",),
        "synthetic": ("synthetic_profile", "synthetic_document", "SyntheticTruth"),
    },
)
