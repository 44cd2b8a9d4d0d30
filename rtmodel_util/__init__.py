"""Infrastructure every stage shares, written once: files (atomic writes, output-path checks, locks)
and processes (launched-rank detection, environment names, stopping a process group).

Why a package of its own: the profiler, calibration, validation and the emulator each used to carry
their own copy, with different rules. It sits just above `runtime_model` (it may use the model's
error types) and below every stage; it imports nothing else of rtmodel and never torch.
"""
