"""The model's ground floor: the data types every stage shares (Scenario, Compute, Link), the
distributions of compute and their order statistics, the one error hierarchy, declared constraints and
the defaults several stages share. Imports nothing else of runtime_model."""
