"""Gossip topologies as Decent-DP and the other libraries run them: schedules of rounds, their
builders, one object per topology (kind.py, filled in by kinds/<name>.py) and the registry that lists
them, how each library moves a message, and the symmetries that shrink them (quotient.py).
Imports only runtime_model.core."""
