"""Defaults that several stages share, each stated once with why it is what it is."""

MIB = 1024 * 1024  # bytes; every "MB" a user types for buckets is a MiB, as in torch's bucket_cap_mb

# torch.nn.parallel.DistributedDataParallel(bucket_cap_mb=25) and Decent-DP's default bucket size.
BUCKET_CAP_MIB = 25.0
# torch.distributed's _DEFAULT_FIRST_BUCKET_BYTES: DDP's first bucket (last layers) is capped at 1 MiB.
DDP_FIRST_BUCKET_MIB = 1.0
# A win smaller than this is "too close to call": the accuracy goal the emulated benchmark checks.
MARGIN = 0.05
