"""runtime_model.memory: the invariants between methods, the published ZeRO figure, a hand-computed FSDP2
timeline, `fits`, and one-line refusals of bad inputs."""

from __future__ import annotations

import pytest

from runtime_model.core.errors import UserError
from runtime_model.memory.accounting import METHODS, MemoryUse, TrainingRecipe, method_memory

N = 1_000_000_000  # a 1e9-parameter model
GIB = 2**30
LAYERS = (N * 0.9 / 24,) * 24  # 24 equal blocks wrapped by fully_shard, the root holds the rest
SHAPE = {"unit_params": LAYERS, "largest_tensor_params": 50e6, "bucket_params": (N / 40,) * 40}
FP32 = TrainingRecipe()
MIXED = TrainingRecipe(param_bytes=2, grad_bytes=2, state_bytes=4, master_copy=True)  # ZeRO's recipe


def use(method, recipe=FP32, world=8, **kw) -> MemoryUse:
    kw.setdefault("gpus_per_node", 8)
    return method_memory(method, N, recipe, world=world, **{**SHAPE, **kw})


def held(u: MemoryUse) -> float:
    return u.part("parameters") + u.part("gradients") + u.part("optimizer states")


@pytest.mark.parametrize("acts", [None, 0.0, 4 * GIB, 40 * GIB])
@pytest.mark.parametrize("recipe", [TrainingRecipe(), MIXED, TrainingRecipe(foreach_step=False)])
def test_more_sharding_needs_less_memory_per_rank(acts, recipe):
    peaks = [
        use(m, recipe, world=16, activation_bytes=acts).peak_bytes for m in ("fsdp", "zero2", "zero1", "ddp")
    ]
    assert peaks == sorted(peaks) and len(set(peaks)) == 4, peaks


def test_hsdp_on_one_node_is_fsdp():
    assert use("hsdp", world=8, gpus_per_node=8, activation_bytes=GIB) == use(
        "fsdp", world=8, activation_bytes=GIB
    )


def test_hsdp_shards_only_within_a_node():
    # 8 nodes of 8: states over 8, not 64
    assert use("hsdp", world=64).part("optimizer states") == use("fsdp", world=8).part("optimizer states")


@pytest.mark.parametrize("method", ["fsdp", "zero2", "zero1", "hsdp"])
def test_one_rank_shards_nothing_of_the_states(method):
    one = use(method, world=1, gpus_per_node=1)
    assert (
        one.part("optimizer states") == use("ddp", world=1).part("optimizer states") == N * 8
    )  # Adam: 2 x fp32


def test_zero_papers_16_bytes_per_parameter_for_mixed_precision_adam():
    """ZeRO (arXiv 1910.02054, sections 3.1 and 5): fp16 parameters and gradients (2 + 2 bytes) and K = 12
    bytes of fp32 master, momentum and variance: 16 per parameter on every rank of DDP; ZeRO-1 divides the
    12 by Nd; full sharding divides all 16."""
    nd = 64
    assert held(use("ddp", MIXED)) == 16 * N
    assert held(use("zero1", MIXED, world=nd)) == pytest.approx((2 + 2 + 12 / nd) * N)
    assert held(use("fsdp", MIXED, world=nd)) == pytest.approx(16 * N / nd)


def test_decent_dp_with_accum_adam_holds_its_comm_blocks_and_one_more_state_than_ddp():
    """Beside the parameters, DDP with Adam keeps its buckets (the gradients' size) and 2 states; Decent-DP
    with AccumAdam keeps a communication block (the parameters' size) and 3 states (accum_grad)."""
    ddp = use("ddp", activation_bytes=GIB)
    decent = use("decent-dp", TrainingRecipe(optimizer="accum-adam"), activation_bytes=GIB)
    comm = decent.part("Decent-DP communication blocks")
    assert comm == N * 4
    assert decent.part("optimizer states") - ddp.part("optimizer states") == N * 4  # one fp32 state
    persistent = lambda u, extra: u.part("parameters") + u.part("optimizer states") + u.part(extra)  # noqa: E731
    assert persistent(decent, "Decent-DP communication blocks") - persistent(ddp, "DDP buckets") == N * 4
    forward = lambda u: dict(u.phases)["forward/backward"]  # noqa: E731
    assert forward(decent) - forward(ddp) == comm + N * 4 - ddp.part("DDP buckets")


def test_decent_dp_steps_one_bucket_at_a_time():
    # 40 buckets of 25e6: AccumAdam's 2 temporaries and the gradients of one bucket, never the model's
    u = use("decent-dp", TrainingRecipe(optimizer="accum-adam"), activation_bytes=0.0)
    assert u.part("gradients") == 25e6 * 4 and u.part("step temporaries") == 2 * 25e6 * 4


def test_fsdp2_timeline_by_hand():
    """Two units of 100 fp32 parameters, no root parameters, shard 2, Adam, no activations.
    Persistent: sharded parameters 200 x 4 / 2 = 400, Adam states 200 x 8 / 2 = 800 -> 1200.
    Backward of unit 1 (the last in backward): its copy-out (flat 400 + unsharded 400) while unit 2's
    reduce-scatter input (400) is held and unit 2's sharded gradient (100 x 4 / 2 = 200) exists -> 1400.
    Forward of unit 2: unit 1's flat all-gather output is still held (400) + unit 2's flat and unsharded
    (800) -> 1200. The step: 1200 + sharded gradients 400 + foreach temporaries 100 x 4 = 2000.
    Peak: 1200 + 1400 = 2600."""
    u = method_memory("fsdp", 200, TrainingRecipe(), world=2, unit_params=(100, 100), activation_bytes=0.0)
    phases = dict(u.phases)
    assert phases["forward unit 2"] == 2400
    assert phases["unshard unit 1"] == 2600 and u.peak_bytes == 2600
    assert phases["optimizer step"] == 2000


def test_fsdp_without_units_all_gathers_the_whole_model_as_its_root():
    whole = method_memory("fsdp", N, TrainingRecipe(), world=8)
    assert whole.part("all-gathered units") == 2 * N * 4  # the flat all-gather output and the unsharded copy
    assert whole.peak_bytes > use("fsdp").peak_bytes


def test_zero2_keeps_every_unit_unsharded_into_backward():
    assert use("zero2", activation_bytes=0.0).part("all-gathered units") >= N * 4


def test_gloo_copies_the_reduce_scatter_input():
    """ProcessGroupGloo's reduce-scatter all-reduces a clone of its input: once the unsharded gradients
    (100 x 4) are copied in and freed, the clone (400) and the output (100 x 4 / 2) are alive beside it."""
    two = {"unit_params": (100, 100), "activation_bytes": 0.0}
    nccl = dict(method_memory("fsdp", 200, TrainingRecipe(), world=2, **two).phases)
    gloo = dict(method_memory("fsdp", 200, TrainingRecipe(), world=2, backend="gloo", **two).phases)
    assert gloo["gloo reduce-scatter unit 2"] - nccl["reduce-scatter unit 2"] == 200
    assert not any(name.startswith("gloo") for name in nccl)


def test_the_cpu_step_holds_two_of_the_largest_tensor_the_cuda_step_one_of_the_model():
    cpu = use("ddp", TrainingRecipe(foreach_step=False), activation_bytes=0.0)
    cuda = use("ddp", TrainingRecipe(foreach_step=True), activation_bytes=0.0)
    assert cpu.part("step temporaries") == 2 * 50e6 * 4
    assert cuda.part("step temporaries") == N * 4


def test_ddp_bucket_view_keeps_the_gradients_in_the_buckets():
    plain = use("ddp", activation_bytes=GIB)
    view = use("ddp", TrainingRecipe(ddp_bucket_view=True), activation_bytes=GIB)
    assert view.part("DDP buckets") == 0.0
    assert dict(view.phases)["forward/backward"] == dict(plain.phases)["forward/backward"]
    assert view.peak_bytes == plain.peak_bytes - N * 4


def test_the_peak_is_the_largest_phase_never_the_sum_of_parts():
    for method in METHODS:
        u = use(method, activation_bytes=4 * GIB)
        assert u.peak_bytes == max(b for _, b in u.phases)
        assert u.peak_bytes < sum(b for _, b in u.parts)


def test_parts_come_in_a_fixed_order():
    for method in METHODS:
        names = [name for name, _ in use(method).parts]
        assert names[:4] == ["parameters", "gradients", "optimizer states", "model buffers"]
        assert names[-2:] == ["activations", "step temporaries"]


def test_activations_and_gradients_measured_together_set_ddps_backward():
    """A CNN makes its large gradients first while its early activations are saved: the joint peak."""
    alone = use("ddp", activation_bytes=GIB)
    joint = use("ddp", activation_bytes=GIB, activation_grad_bytes=3 * GIB)
    assert dict(joint.phases)["forward/backward"] - dict(alone.phases)["forward/backward"] == 2 * GIB


def test_local_sgd_keeps_the_outer_parameters_and_momentum_on_the_gpu():
    u = use("local-sgd", activation_bytes=0.0)
    assert u.part("outer parameters") == u.part("outer momentum") == N * 4
    alone = use("local-sgd", activation_bytes=0.0, replica="gpu")
    assert "DDP buckets" not in dict(alone.parts)
    assert u.peak_bytes - alone.peak_bytes == N * 4  # the node's DDP buckets


def test_fits_says_none_true_or_false():
    base = use("ddp")
    known = base.peak_bytes
    assert use("ddp").fits is None  # no capacity
    assert use("ddp", capacity_bytes=known * 2).fits is None  # activations unknown, the rest fits
    assert use("ddp", capacity_bytes=known / 2).fits is False  # the known part alone does not fit
    assert use("ddp", capacity_bytes=known * 2, activation_bytes=GIB).fits is True
    assert use("ddp", capacity_bytes=known + 1, activation_bytes=100 * GIB).fits is False


@pytest.mark.parametrize(
    ("call", "words"),
    [
        (lambda: method_memory("ddp", -1, TrainingRecipe(), world=8), "params must be"),
        (lambda: method_memory("pipeline", N, TrainingRecipe(), world=8), "method must be one of"),
        (lambda: TrainingRecipe(optimizer="lion"), "optimizer must be one of"),
        (lambda: TrainingRecipe(param_bytes=3), "param_bytes must be one of"),
        (lambda: method_memory("ddp", N, TrainingRecipe(), world=0), "world must be"),
        (lambda: method_memory("ddp", N, TrainingRecipe(), world=8, activation_bytes=-1), "activation_bytes"),
        (lambda: method_memory("ddp", N, TrainingRecipe(), world=8, capacity_bytes=0), "capacity_bytes"),
        (lambda: method_memory("hsdp", N, TrainingRecipe(), world=12, gpus_per_node=8), "not a multiple"),
        (lambda: method_memory("fsdp", 10, TrainingRecipe(), world=8, unit_params=(6, 6)), "add up to more"),
        (lambda: method_memory("fsdp", N, TrainingRecipe(), world=8, backend="mpi"), "backend must be"),
    ],
)
def test_bad_inputs_are_refused_in_one_line(call, words):
    with pytest.raises(UserError) as err:
        call()
    assert words in str(err.value) and "\n" not in str(err.value)


def test_an_unknown_keyword_is_a_programming_error():
    with pytest.raises(TypeError, match="unit_param"):
        method_memory("fsdp", N, TrainingRecipe(), world=8, unit_param=(1,))
