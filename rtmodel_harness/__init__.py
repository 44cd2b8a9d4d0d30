"""The torch side shared by the profiler and validation: what is trained (workloads, the reference
models, the user's factory, gradient bucket layouts) and where (device and backend choice, joining the
process group, barriers and timing that wait for the GPU).

Why one package: the profiler measures a model and validation trains the same model to check the
prediction; when each had its own notion of "the workload" or "the device", the two drifted. Both now
import this. It sits above the model and the utilities and below the stages (docs/development.md).
"""
