"""Time per iteration: collective costs, DDP and Decent-DP buckets, the gossip recurrence and its
reduced system, local SGD, compute on a GPU, bytes on the NICs and the factors that explain a speedup.
Imports the floors below it (core, topology, convergence), never presets or advice."""
