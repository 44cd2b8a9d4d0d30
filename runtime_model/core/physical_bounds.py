"""What no measurement can hold, stated once for every reader of measured files (nccl-tests logs,
traces, profiles, preset files): a value beyond one of these is an overflowed print or a damaged file,
refused in one line naming the file, the field and the bound, never priced.

Why one module: the same physical limit (no GPU holds a 1 TiB buffer) was written out beside each
reader, and a bound that one reader loosened would no longer be the bound the others state.
"""

# No accelerator holds a 1 TiB buffer (the largest hold 288 GB): a message, bucket or tensor over it
# is an overflowed count.
MAX_BUFFER_BYTES = 1 << 40
# No collective moves its bytes faster than 10 TB/s (bytes / time, algbw or busbw): NVLink 5 carries
# 1.8 TB/s per GPU (both directions together) and the fastest NIC 100 GB/s.
MAX_ALGBW_Bps = 10e12
# No profiled step, collective or kernel lasts a day.
MAX_STEP_S = 86_400.0
# A float64 holds every integer up to 2^53: a count, timestamp (in us) or step number beyond it is no
# run's (today's epoch is about 1.7e15 us).
MAX_EXACT_COUNT = 1 << 53
# GPUs in one node or host: 8 in a DGX, 72 in an NVL72 rack's NVLink domain; 1,024 leaves room for the next.
MAX_GPUS_PER_NODE = 1024
