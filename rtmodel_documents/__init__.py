"""The documents rtmodel writes and reads, each as typed classes both ways (from_json / to_json), with
one-line errors naming the field: the profile (profile_document, its communication section, the checks
of its fields and across them, the file reader) and the calibration (calibration_document, the PARAMS
file `rtmodel calibrate --out` writes).

Why one package: a document is read by more stages than wrote it (the profiler writes the profile,
calibration, validation and the advisor read it); its schema belongs to none of them. It sits just above
the model (runtime_model's types: ClusterShape, Network, Compute) and the utilities (atomic writes,
JSON parsing), below every stage. Every header is runtime_model.core.document_header's, which stays in
the model: the advisor's report (runtime_model.advice.report) writes one too.
"""
