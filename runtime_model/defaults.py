"""Defaults that several stages share, each stated once with why it is what it is."""

MIB = 1024 * 1024  # bytes; every "MB" a user types for buckets is a MiB, as in torch's bucket_cap_mb

# torch.nn.parallel.DistributedDataParallel(bucket_cap_mb=25) and Decent-DP's default bucket size.
BUCKET_CAP_MIB = 25.0
# torch.distributed's _DEFAULT_FIRST_BUCKET_BYTES: DDP's first bucket (last layers) is capped at 1 MiB.
DDP_FIRST_BUCKET_MIB = 1.0
# A win smaller than this is "too close to call": the accuracy goal the emulated benchmark checks.
MARGIN = 0.05
# The largest n (GPUs) rtmodel answers for. The model simulates every rank (per-rank schedules, NIC loads
# and compute samples), so cost grows with n: `advise --gpus 1048576` takes ~27 s and ~2.7 GB. 2^20 is
# above any real data-parallel job and still answers in under a minute; beyond it a typo (an extra zero)
# would run out of memory instead of saying so. Checked where the model takes n (scenario.ClusterShape,
# presets.resolve) and by `plot --gpus`.
MAX_GPUS = 1 << 20
