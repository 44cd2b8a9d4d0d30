"""The topologies, one module each: every module fills one kind.TopologyInfo named TOPOLOGY (its builder,
where it applies, its symmetry quotient, its closed-form consensus), and registry.py lists them."""
