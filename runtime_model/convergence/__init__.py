"""How fast a gossip schedule averages (consensus) and what that costs in iterations: the
convergence side of a recommendation. Imports runtime_model.core and runtime_model.topology."""
