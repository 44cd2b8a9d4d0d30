"""`python -m profiler.opcount`: the counts the runtime model's host/device split rests on, checked
against hand-computed values on layers small enough to count by hand, and against themselves (width
independence, fake tensors agree with real ones)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("decent_dp")

from torch import nn  # noqa: E402

from profiler import opcount  # noqa: E402
from profiler.opcount import OpCounter, Tally, count_iteration  # noqa: E402
from rtmodel_harness import reference_models  # noqa: E402

pytestmark = pytest.mark.cluster


def _tally(fn) -> Tally:
    tally = Tally()
    with OpCounter(tally):
        fn()
    return tally


@pytest.mark.slow
@pytest.mark.parametrize("name", ["transformer-base", "gpt2-small", "resnet50"])
def test_op_counts_do_not_depend_on_width(name):
    """Ops are counted on a tiny copy; that is only sound if the count is width independent."""
    tiny = opcount.count_ops(name, amp=True, width_div=32)
    wider = opcount.count_ops(name, amp=True, width_div=16)
    for a, b in zip(tiny, wider, strict=True):
        assert (a.ops, a.views, a.syncs) == (b.ops, b.views, b.syncs)
        assert a.ops > 50


@pytest.mark.slow
def test_cuda_like_dropout_and_attention_are_one_op_each():
    """CPU's dropout is bernoulli_ + div_ + mul and its attention with dropout the unfused math path;
    CUDA runs one fused kernel for each, and so must the counts."""
    fwd, _ = opcount.count_ops("transformer-base", amp=False)
    assert "bernoulli_" not in fwd.by_op and "_safe_softmax" not in fwd.by_op
    assert fwd.by_op["native_dropout"] == 2 + 6 * 3 + 6 * 4  # embeddings, 3 per encoder, 4 per decoder layer
    assert fwd.by_op["_scaled_dot_product_flash_attention_for_cpu"] == 6 + 2 * 6


def test_linear_flops_per_row_are_hand_computed():
    """y = x W^T on a (rows, d) input: 2 d^2 FLOPs per row forward; backward computes dx and dW, 4 d^2."""
    d = 64
    layer = nn.Linear(d, d, bias=False)
    flops = {}
    for rows in (8, 16):
        x = torch.randn(rows, d, requires_grad=True)
        flops[rows] = count_iteration(layer, lambda x=x: layer(x).sum(), amp=False)
    assert (flops[16][0].flops - flops[8][0].flops) / 8 == 2 * d * d
    assert (flops[16][1].flops - flops[8][1].flops) / 8 == 4 * d * d
    assert flops[8][0].flops == 8 * 2 * d * d  # intercept 0


def test_elementwise_bytes_are_hand_computed():
    n = 1000
    x, y = torch.randn(n), torch.randn(n)
    assert _tally(lambda: torch.relu(x)).bytes == 8 * n  # read 4n, write 4n
    assert _tally(lambda: x.add_(y)).bytes == 12 * n  # read x and y, write x
    assert _tally(lambda: x.copy_(y)).bytes == 8 * n  # the destination is not read
    assert _tally(lambda: x.to(torch.bfloat16)).bytes == 6 * n  # AMP weight cast: 4n in, 2n out
    bias = torch.randn(10)
    assert _tally(lambda: torch.randn(100, 10) + bias).bytes > 0  # randn's own write counts too
    m = torch.randn(100, 10)
    assert _tally(lambda: m + bias).bytes == 4 * (1000 + 10 + 1000)  # a broadcast operand is read once
    weight, idx = torch.randn(50_000, 8), torch.tensor([1, 2, 3])
    assert _tally(lambda: nn.functional.embedding(idx, weight)).bytes == 2 * 3 * 8 * 4 + 3 * 8  # rows only


def test_views_and_allocations_launch_nothing():
    x = torch.randn(4, 6)
    tally = _tally(lambda: (x.view(6, 4), x.t(), x.transpose(0, 1), x[1:], x.unsqueeze(0), torch.empty(3)))
    assert tally.ops == 0 and tally.bytes == 0 and tally.views >= 5
    assert _tally(lambda: x.sum().item()).syncs == 1


@pytest.mark.slow
def test_fake_tensors_count_what_real_tensors_count():
    """Full width runs on FakeTensors (nothing computed); at a width both can run they agree."""
    real = opcount.full_width("transformer-base", True, width_div=32, fake=False)
    fake = opcount.full_width("transformer-base", True, width_div=32, fake=True)
    assert real == fake


@pytest.mark.slow
def test_backward_numels_sum_to_params_and_hold_the_tied_weight_once():
    r = opcount.full_width("transformer-base", True, width_div=32)
    model, _ = reference_models.build("transformer-base", 32)
    assert sum(r["backward_numels"]) == r["params"] == sum(p.numel() for p in model.parameters())
    embedding = model._token_embedding.weight.numel()
    assert r["backward_numels"].count(embedding) == 1
    assert r["backward_numels"][-1] == embedding  # input embeddings are ready last


@pytest.mark.slow
def test_transformer_base_full_width_matches_hand_count():
    """Forward FLOPs per token (one source + one target token, 32-token sentences) from the layer shapes:
    encoder 6 x 2 (4 d^2 + 2 d ffn) + attention 6 x 4 L d; decoder 6 x 2 (8 d^2 + 2 d ffn) + 2 attentions
    6 x 2 x 4 L d; output projection 2 d V."""
    d, ffn, layers, length, vocab = 512, 2048, 6, reference_models.SENTENCE_TOKENS, 37_120
    hand = (layers * 2 * (4 * d * d + 2 * d * ffn) + layers * 4 * length * d
            + layers * 2 * (8 * d * d + 2 * d * ffn) + 2 * layers * 4 * length * d + 2 * d * vocab)
    r = opcount.full_width("transformer-base", True)
    assert r["forward_flops_per_unit"] == hand
    assert r["forward_flops_fixed"] == r["backward_flops_fixed"] == 0
    assert 2 * hand <= r["backward_flops_per_unit"] <= 2.01 * hand
    assert r["params"] == 63_145_984
    assert abs(r["forward_bytes_fixed"] - 6 * r["params"]) < 0.01 * 6 * r["params"]  # AMP weight casts


def test_models_have_their_published_sizes():
    sizes = {"gpt2-small": 124_439_808, "resnet50": 25_557_032}
    for name, params in sizes.items():
        with torch.device("meta"):
            model, _ = reference_models.build(name)
        assert sum(p.numel() for p in model.parameters()) == params


def test_adam_foreach_bytes_per_param_follow_its_kernels():
    """torch.optim.Adam(foreach=True), _multi_tensor_adam without weight decay: lerp_ m (12 B),
    mul_ v (8), addcmul_ v (16), sqrt (8), div_ (8), add_ eps (8), addcdiv_ p (16) = 76 B per fp32
    parameter; the step counters add a few bytes per tensor, not per element."""
    from profiler.opcount_traffic import optimizer_rows

    rows = optimizer_rows()
    assert 75 <= rows["optimizer.adam-foreach"]["bytes_per_param"] <= 77
    assert 83 <= rows["optimizer.adamw-foreach"]["bytes_per_param"] <= 85  # + mul_ p by 1 - lr wd
    accum = rows["optimizer.accumadam"]
    assert 79 <= accum["bytes_per_param_plain_step"] <= 81  # + the accumulation add_ (12), add not lerp
    assert 127 <= accum["bytes_per_param_boundary_step"] <= 129  # + add_, mul_, addcmul_, mul_, zero_ (48)


def test_decent_dp_mixing_is_36_bytes_per_element():
    """mul_ (8) + add_ of the received buffer (12) + copy_ to the send buffer (8) + mul_ (8)."""
    from profiler.opcount_traffic import mixing_rows

    row = mixing_rows()["mixing.decent-dp"]
    assert row["bytes_per_param"] == 36 and row["ops_per_step"] == 4


BAD_ARGS = [["--model", "nope"], [], ["--model", "resnet50", "--traffic"],
            ["--model", "resnet50", "--out", "/"], ["--traffic", "--out", "/no/such/dir/x"]]


@pytest.mark.parametrize("argv", BAD_ARGS)
def test_bad_input_is_one_error_line_and_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        opcount.main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1


def test_traffic_fragment_is_toml(tmp_path):
    import tomllib

    out = tmp_path / "traffic.toml"
    assert opcount.main(["--traffic", "--out", str(out)]) == 0
    data = tomllib.loads(out.read_text())
    assert data["optimizer"]["adam-foreach"]["bytes_per_param"] == pytest.approx(76, abs=1)
    assert data["scaler"]["step"]["gpu_syncs_per_step"] == 1
