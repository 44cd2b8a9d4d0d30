"""A plotted sweep passes through advise's answer at the same point (issue 64): the speedup sweeps draw
every topology at n with the same inputs advise resolves at n, so each point equals advise's row within
0.5 %. The sweeps draw speedups over DDP as it runs today; where DDP's bucket view changes the verdict,
advise's rows are judged against the tuned DDP, and its answer keeps today's All-Reduce (tuned_ddp.today_s)."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rtmodel_inputs import advise
from rtmodel_plots.sweeps import sweep

WHERE = [
    {"network": "ib-100"},
    {"network": "tcp-25g"},
    {"cluster": "dgx-h100"},
    {"gpu": "T4", "gpus_per_node": 1, "network": "ib-100"},
]


@settings(max_examples=8, deadline=None)
@given(where=st.sampled_from(WHERE), gpus=st.sampled_from([8, 16, 32, 64, 128]))
def test_a_sweep_point_is_advises_answer(where, gpus):
    answer = advise(gpus=gpus, local_sgd_h=0, **where)
    k = where.get("gpus_per_node")
    kw = {k_: v for k_, v in where.items() if k_ not in ("network", "gpus_per_node")}
    drawn = sweep([gpus], network=where.get("network"), gpus_per_node=k, factors=False, **kw)
    led = answer.tuned_ddp is not None and answer.tuned_ddp.changes_verdict
    today_s = answer.tuned_ddp.today_s if led else answer.allreduce.mean_s
    assert drawn["allreduce_ms"].iloc[0] == pytest.approx(today_s * 1e3, rel=0.005)
    by_topology = drawn.set_index("topology")["speedup"]
    for row in answer.rows:
        if row.prediction is not None and row.applicable:
            assert by_topology[row.topology] == pytest.approx(today_s / row.prediction.mean_s, rel=0.005)
