"""How a gossip library moves a topology's messages: what overlaps, how the message is cut, peers at once.

Why a module of its own: the same graph costs different time in different libraries, and the paper's
Figure 6 measured two of them on one cluster (Decent-DP and SGP). Each style below is read from its
library's source; the cost model (round_comm, iteration) asks the style, never the library's name.

- Decent-DP 0.2.3 (`decent_dp/ddp.py`): per 25 MB bucket, in its gradient hook: wait for last iteration's
  exchange of this bucket, mix, step, launch the next exchange. So each exchange hides behind the whole
  next forward + backward, and only the last bucket's optimizer step follows the last wait.
- SGP (Assran et al. 2019, facebookresearch/stochastic_gradient_push `gossip/distributed.py`): all
  parameters flattened into one message and pushed to one peer per iteration (directed exponential graph,
  push-sum weight 1/2), by a gossip thread. Plain SGP launches it after `optimizer.step()` and waits for it
  in the next forward pre-hook: nothing overlaps it. OSGP (`--overlap True`) collects the previous
  exchange and launches the next one in that pre-hook, so it hides behind forward + backward.
- BlueFog (Bluefog-Lib/bluefog `bluefog/torch/optimizers.py`, `_DistributedReduceOptimizer`): a forward
  hook per module launches a non-blocking `neighbor_allreduce` of its weights; `step()` waits for all of
  them, averages, then takes the local step. The exchange hides behind the same iteration's remaining
  forward + backward; the whole optimizer step follows the wait. A static graph's peers are sent to and
  received from at once (grouped ncclSend/ncclRecv): round_comm.static_graph_comm_s.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from runtime_model.core.scenario import Bucket, Scenario


@dataclass(frozen=True)
class ExchangeStyle:
    """One library's way of running a topology's exchange."""

    library: str  # what runs it, as the advise table's "runs on" column shows it
    whole_message: bool  # one message of all parameters (else Decent-DP's gradient-ready buckets)
    hidden: bool  # the exchange overlaps compute (else it runs between the step and the next forward)
    source: str


DECENT_DP = ExchangeStyle(
    "Decent-DP",
    whole_message=False,
    hidden=True,
    source="decent_dp/ddp.py (Decent-DP 0.2.3): per-bucket hooks, exchange waited one iteration later",
)
SGP = ExchangeStyle(
    "SGP",
    whole_message=True,
    hidden=False,
    source="facebookresearch/stochastic_gradient_push gossip/distributed.py: flattened parameters pushed "
    "after optimizer.step(), waited in the next forward pre-hook",
)
OSGP = ExchangeStyle(
    "SGP --overlap",
    whole_message=True,
    hidden=True,
    source="facebookresearch/stochastic_gradient_push gossip/distributed.py with --overlap True: the "
    "pre-hook collects the previous exchange and launches the next, hidden behind forward + backward",
)
BLUEFOG = ExchangeStyle(
    "BlueFog",
    whole_message=True,
    hidden=True,
    source="Bluefog-Lib/bluefog bluefog/torch/optimizers.py: forward hooks launch neighbor_allreduce, "
    "step() waits, averages and steps; a static graph's peers in one grouped ncclSend/ncclRecv",
)


def adapted_scenario(style: ExchangeStyle, scenario: Scenario) -> Scenario:
    """The scenario as this library cuts its message: one bucket of every parameter, ready at the end of
    backward, so the whole optimizer step follows the wait (iteration.last_bucket_optimizer_s)."""
    if not style.whole_message:
        return scenario
    whole = (Bucket(scenario.buckets.message_bytes, 1.0),)
    return replace(scenario, buckets=replace(scenario.buckets, gossip=whole))
