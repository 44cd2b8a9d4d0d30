"""Your own DDP training's torch.profiler (Kineto) traces as the model's compute, buckets and All-Reduce.

    read_traces(paths) -> [RankTrace]            trace_scenario; TraceError (one line) on an unusable file
    scenario_from_traces(traces, gpus, gpus_per_node, network, gpu_preset) -> TracedScenario

A run of CPU ranks (gloo, no GPU) is read with the host's ops as its device (host_events); buckets whose
sizes the trace does not record take the user's --params/--model (bucket_bytes); step_stats reports the
all-reduce's spread over steps and the device's idle share.

Reading needs the [trace] extra (Holistic Trace Analysis); nothing here is imported by the model.
"""
