"""The `rtmodel` application shell: the typer app, its commands' registration, option definitions,
the one error path and the terminal rendering. The stages (profiler, calibration, runtime_model,
validation, emulation) know nothing of it; it sits on top and imports them."""
