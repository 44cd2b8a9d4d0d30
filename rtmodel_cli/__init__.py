"""The `rtmodel` application shell: the typer app, every command (rtmodel_cli/commands, one module
each), option definitions, the one error path and the terminal rendering. The stages (profiler,
calibration, runtime_model, validation, emulation) know nothing of it; it sits on top and imports them."""
