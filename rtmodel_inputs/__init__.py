"""What the advisor and the plots predict from: every source a user brings (presets, `--presets` files,
`--scenario`, a profile or its calibration, an nccl-tests log, traces, a measured step, their own numbers),
resolved once into one typed set of inputs, below the shell.

Why a package of its own: `rtmodel advise`, every `rtmodel plot`, validate's prediction and notebooks
must draw the same answer from the same measurements; the shell only parses options and renders.
"""
