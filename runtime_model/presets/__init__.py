"""Presets: the shipped TOML data (preset_data/), read strictly into typed presets, a user's choice of
them checked, and turned into the model's data types (to_model). Imports core and prediction."""
