"""sgp-exp: SGP's one-peer exponential push-sum (Assran et al., ICML 2019; facebookresearch/
stochastic_gradient_push), exchanged after the step. Its rounds are one-peer-exp's, so is its quotient.
"""

from __future__ import annotations

from runtime_model.topology.kind import TopologyInfo
from runtime_model.topology.kinds.one_peer_exp import hypercube_quotient
from runtime_model.topology.library_topologies import build_sgp_exp, sgp_applicability

TOPOLOGY = TopologyInfo(
    "sgp-exp",
    "SGP: one-peer exponential push-sum, exchange after the step (n a power of 2)",
    None,
    sgp_applicability,
    build_sgp_exp,
    reduce=hypercube_quotient,
)
