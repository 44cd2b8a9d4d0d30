"""The GPU compute model: max(host, device) per segment between host syncs, hand-computed cases and
properties (more dispatch cost or more ops never faster; host-bound at small batches, device-bound at
large ones, switching where host time = device time)."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime_model.core.scenario import Bucket
from runtime_model.prediction.gpu_compute import IterationWork, Work, ddp_compute, decent_dp_compute
from runtime_model.presets import to_model as presets

MS = 1e-3


def _work(fh=4.0, fd=2.0, bh=6.0, bd=8.0, oh=0.5, od=1.0, copies=(0.0, 0.0), mix=(0.1, 0.3), amp=True, call=None):
    """call: the per-call host part of optimizer + mixing (default all of it: every call issues all)."""
    return IterationWork(
        forward=Work(fh * MS, fd * MS),
        backward=Work(bh * MS, bd * MS),
        optimizer=Work(oh * MS, od * MS),
        ddp_copies=Work(copies[0] * MS, copies[1] * MS),
        mixing=Work(mix[0] * MS, mix[1] * MS),
        amp=amp,
        step_call_host_s=(oh + mix[0] if call is None else call) * MS,
    )


def test_ddp_one_segment_then_the_step():
    # forward+backward: host 4+6 = 10 ms, device 2+8+1 (copies) = 11 ms -> device-bound, 11 ms;
    # the forward takes its device share 2/11 of it; the step: max(0.5, 1.0) = 1 ms.
    c = ddp_compute(_work(copies=(0.0, 1.0)), 0.0, "t")
    assert c.compute_s == pytest.approx(11 * MS)
    assert c.forward_s == pytest.approx(2 * MS)
    assert c.backward_s == pytest.approx(9 * MS)
    assert c.optimizer_s == pytest.approx(1 * MS)


def test_ddp_host_bound_backward_window_is_the_hosts():
    # host 4+6 = 10 > device 1+3 = 4: 10 ms, forward = its host time 4 ms, backward 6 ms.
    c = ddp_compute(_work(fd=1.0, bd=3.0), 0.0, "t")
    assert (c.forward_s, c.backward_s) == pytest.approx((4 * MS, 6 * MS))


def test_decent_dp_one_segment_per_bucket_with_a_scaler():
    # Two equal buckets ready at 0.5 and 1.0. Per bucket: the step (optimizer + mixing) host 0.6 ms
    # (every call issues all its ops), device 1.3/2 = 0.65 ms.
    # bucket 0: forward (4, 2) + half backward (3, 4) + step (0.6, 0.65) -> host 7.6, device 6.65 -> 7.6
    # bucket 1: half backward (3, 4) + step (0.6, 0.65) -> host 3.6, device 4.65 -> 4.65
    # iteration 12.25 ms; the steps' own time max(0.6, 0.65) x 2 = 1.3 ms is optimizer_s.
    buckets = [Bucket(100, 0.5), Bucket(100, 1.0)]
    c = decent_dp_compute(_work(), buckets, 0.0, "t")
    assert c.compute_s + c.optimizer_s == pytest.approx(12.25 * MS)
    assert c.optimizer_s == pytest.approx(1.3 * MS)


def test_decent_dp_buckets_share_the_per_tensor_host_work():
    # Per call 0.2 ms of ops; the other 0.4 ms of the step's host time is per tensor, split by bytes
    # (buckets of 100 and 300 B): steps host 0.2 + 0.1 and 0.2 + 0.3, device 1.3/4 and 1.3x3/4.
    # bucket 0 (ready 0.25): forward (4, 2) + backward/4 (1.5, 2) + step (0.3, 0.325) -> 5.8 vs 4.325
    # bucket 1 (ready 1.0): backward x3/4 (4.5, 6) + step (0.5, 0.975) -> 5.0 vs 6.975
    # iteration 5.8 + 6.975 = 12.775 ms; the steps' own time 0.325 + 0.975 = 1.3 ms.
    buckets = [Bucket(100, 0.25), Bucket(300, 1.0)]
    c = decent_dp_compute(_work(call=0.2), buckets, 0.0, "t")
    assert c.compute_s + c.optimizer_s == pytest.approx(12.775 * MS)
    assert c.optimizer_s == pytest.approx(1.3 * MS)


def test_per_tensor_host_work_is_paid_once_however_many_buckets():
    # Without syncs one segment: host = 4 + 6 + calls x 0.2 + 0.4 once; 2 or 8 buckets differ by 6 calls.
    few = decent_dp_compute(_work(amp=False, bd=1.0, call=0.2), [Bucket(100, 0.5), Bucket(100, 1.0)], 0.0, "t")
    many = [Bucket(100, (i + 1) / 8) for i in range(8)]
    more = decent_dp_compute(_work(amp=False, bd=1.0, call=0.2), many, 0.0, "t")
    assert few.compute_s + few.optimizer_s == pytest.approx((10 + 2 * 0.2 + 0.4) * MS)
    assert more.compute_s + more.optimizer_s == pytest.approx((10 + 8 * 0.2 + 0.4) * MS)


def test_decent_dp_without_syncs_is_one_segment():
    # no scaler, no syncing optimizer: host 4+6+2x0.6 = 11.2, device 2+8+1.3 = 11.3 -> 11.3 ms
    buckets = [Bucket(100, 0.5), Bucket(100, 1.0)]
    c = decent_dp_compute(_work(amp=False), buckets, 0.0, "t")
    assert c.compute_s + c.optimizer_s == pytest.approx(11.3 * MS)


def test_per_bucket_syncs_never_make_an_iteration_faster():
    buckets = [Bucket(50, 0.3), Bucket(100, 0.8), Bucket(80, 1.0)]
    synced = decent_dp_compute(_work(amp=True), buckets, 0.0, "t")
    free = decent_dp_compute(_work(amp=False), buckets, 0.0, "t")
    assert synced.compute_s + synced.optimizer_s >= free.compute_s + free.optimizer_s - 1e-12


def _iteration_s(choice):
    sc = presets.scenario_from_choice(choice)
    return sc.compute.compute_s + sc.compute.optimizer_s, sc.decent_dp_compute.compute_s + sc.decent_dp_compute.optimizer_s


@settings(max_examples=25, deadline=None)
@given(
    gpu=st.sampled_from(["T4", "A100", "H100"]),
    gpus=st.sampled_from([8, 64, 512]),
    factor=st.floats(1.0, 10.0),
)
def test_more_dispatch_cost_never_predicts_faster(gpu, gpus, factor):
    lib = presets.builtin_library()
    slower_host = dataclasses.replace(lib.gpus[gpu], dispatch_us=lib.gpus[gpu].dispatch_us * factor)
    slow_lib = dataclasses.replace(lib, gpus={**lib.gpus, gpu: slower_host})
    choice = presets.resolve(presets.PresetRequest(gpus, gpu=gpu), library=lib)
    base = _iteration_s(choice)
    slow_sc = presets.scenario_from_choice(choice, slow_lib)
    slow = (
        slow_sc.compute.compute_s + slow_sc.compute.optimizer_s,
        slow_sc.decent_dp_compute.compute_s + slow_sc.decent_dp_compute.optimizer_s,
    )
    assert slow[0] >= base[0] - 1e-12 and slow[1] >= base[1] - 1e-12


@settings(max_examples=25, deadline=None)
@given(extra_ops=st.integers(0, 5000), model=st.sampled_from(["transformer-base", "resnet50", "gpt2-small"]))
def test_more_ops_never_predicts_faster(extra_ops, model):
    lib = presets.builtin_library()
    m = lib.models[model]
    more = dataclasses.replace(m, backward_ops={k: v + extra_ops for k, v in m.backward_ops.items()})
    more_lib = dataclasses.replace(lib, models={**lib.models, model: more})
    choice = presets.resolve(presets.PresetRequest(64, model=model), library=lib)
    base = _iteration_s(choice)
    sc = presets.scenario_from_choice(choice, more_lib)
    assert sc.compute.compute_s + sc.compute.optimizer_s >= base[0] - 1e-12
    assert sc.decent_dp_compute.compute_s + sc.decent_dp_compute.optimizer_s >= base[1] - 1e-12


def test_host_bound_then_device_bound_switching_where_host_equals_device():
    """Forward+backward under DDP is flat (host-bound) while the host is slower and grows with the batch
    past the point where device time reaches host time; the switch is where the two are equal."""
    lib = presets.builtin_library()
    choice = presets.resolve(presets.PresetRequest(1, gpu="A100", model="transformer-base", global_batch=100), library=lib)

    def totals(batch):
        w = presets.iteration_work(dataclasses.replace(choice, global_batch=batch), lib)
        both = w.forward + w.backward + w.ddp_copies
        return both.host_s, both.device_s

    host, at_100 = totals(100)
    _, at_200 = totals(200)
    per_unit = (at_200 - at_100) / 100
    switch = 100 + (host - at_100) / per_unit  # device time = host time here
    assert switch > 1

    def fwd_bwd_s(batch):
        return presets.scenario_from_choice(dataclasses.replace(choice, global_batch=batch), lib).compute.compute_s

    assert fwd_bwd_s(switch * 0.25) == pytest.approx(host) == pytest.approx(fwd_bwd_s(switch * 0.5))
    assert fwd_bwd_s(switch) == pytest.approx(host)
    assert fwd_bwd_s(switch * 4) > fwd_bwd_s(switch * 2) > host
