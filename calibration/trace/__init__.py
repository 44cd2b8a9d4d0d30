"""Your own DDP training's torch.profiler (Kineto) traces as the model's compute, buckets and All-Reduce.

    read_traces(paths) -> [RankTrace]            trace_scenario; TraceError (one line) on an unusable file
    scenario_from_traces(traces, gpus, gpus_per_node, network, gpu_preset) -> TracedScenario

Reading needs the [trace] extra (Holistic Trace Analysis); nothing here is imported by the model.
"""
