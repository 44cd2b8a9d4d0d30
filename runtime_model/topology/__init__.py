"""Gossip topologies as Decent-DP and the other libraries run them: schedules of rounds, their
builders, the registry by name, how each library moves a message, and the symmetries that shrink them.
Imports only runtime_model.core."""
