"""rtmodel profiler: measures a real cluster with torch.distributed (torch is imported only in this package).

Entry points: `profiler.launch.run_profile(ProfileOptions(out=..., ...))` (plain function); `python -m
profiler` (the local launcher's ranks; any other command line is handed to `rtmodel profile`, whose command
lives in the shell: rtmodel_cli/commands/profile.py). Modules, one job each:
  workloads (models; stable API, validation imports it), model_choice (--model checks, no torch),
  buckets (DDP / Decent-DP bucket layouts), patterns (groups and sizes, no torch), options,
  launch (local launcher / torchrun rank), rank (the sections on one rank), shape, compute, comm,
  document (schema, atomic checkpoints, resume), failures (rank failure records), envvars.
"""
