"""The `rtmodel` commands, one module per command, each with `register(app)`.

Why here, in the shell, and not beside each stage's code: a stage (profiler, calibration, validation,
emulation) is a library that knows nothing of the command line; the command that parses options,
calls the stage and prints its result is the shell's, so every arrow points down. `rtmodel_cli.app`
imports only the module of the command a command line runs (`advise` and `--help` never load torch).
"""
