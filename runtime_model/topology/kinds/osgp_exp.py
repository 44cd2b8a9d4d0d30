"""osgp-exp: SGP with --overlap (OSGP, Assran et al., ICML 2019): sgp-exp's rounds, the exchange hidden
behind forward + backward (exchange.OSGP). Its rounds are one-peer-exp's, so is its quotient.
"""

from __future__ import annotations

from runtime_model.topology.kind import TopologyInfo
from runtime_model.topology.kinds.one_peer_exp import hypercube_quotient
from runtime_model.topology.library_topologies import build_osgp_exp, sgp_applicability

TOPOLOGY = TopologyInfo(
    "osgp-exp",
    "SGP --overlap: one-peer exponential push-sum hidden behind compute (n a power of 2)",
    None,
    sgp_applicability,
    build_osgp_exp,
    reduce=hypercube_quotient,
)
