"""Defaults that several stages share, each stated once with why it is what it is."""

MIB = 1024 * 1024  # bytes; every "MB" a user types for buckets is a MiB, as in torch's bucket_cap_mb

# torch.nn.parallel.DistributedDataParallel(bucket_cap_mb=25) and Decent-DP's default bucket size.
BUCKET_CAP_MIB = 25.0
# torch.distributed's _DEFAULT_FIRST_BUCKET_BYTES: DDP's first bucket (last layers) is capped at 1 MiB.
DDP_FIRST_BUCKET_MIB = 1.0
# A win smaller than this is "too close to call": the accuracy goal the emulated benchmark checks.
MARGIN = 0.05
# The largest n (GPUs) rtmodel answers for: 2^24 = 16,777,216. Above symmetry.FULL_MAX_N ranks the model
# no longer simulates every rank: it runs the same recurrence on a reduced system (runtime_model/topology/symmetry.py,
# reduced_system.py) and takes All-Reduce's max over n from rank classes (order_stats.py), so time and
# memory do not grow with n; what still does is O(n) vectors for static-exp's consensus FFT (~0.4 GB at
# 2^24). 2^24 is 16x above the largest data-parallel jobs reported; beyond it a typo (an extra zero) is
# refused in one line. Checked where the model takes n (scenario.ClusterShape, presets.resolve) and by
# the plots' --gpus-range and --gpus-list.
MAX_GPUS = 1 << 24
# The n every command answers for when no --gpus is given (advise, topologies, the one-n plots): 64 GPUs,
# the largest shape of the paper's Figure 6 (Wang et al., ICLR 2025: 64 x T4, presets' cluster t4-ib100).
DEFAULT_GPUS = 64
