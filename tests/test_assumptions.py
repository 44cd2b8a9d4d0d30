"""What a preset answer assumed, said at its head (issue 50): the per-GPU batch and where it came from,
whether the step is host- or device-bound, the NICs per node, and a warning for each default a user
should replace before acting on the answer."""

import json

from typer.testing import CliRunner

from rtmodel_cli.app import app
from runtime_model.advice.assumptions import Assumptions, preset_assumptions
from runtime_model.presets import to_model as presets

runner = CliRunner()


def _assumed(**request) -> Assumptions:
    lib = presets.builtin_library()
    return preset_assumptions(presets.resolve(presets.PresetRequest(**request), library=lib), lib, request)


def test_the_default_batch_spread_thin_is_said_with_its_host_bound_step():
    a = _assumed(gpus=64)
    assert (
        a.batch_per_gpu == 25_000 / 64 and a.unit == "token" and a.global_batch_from == "the model's default"
    )
    assert a.step_bound == "host" and a.host_ms > a.device_ms
    assert a.line() == (
        "assumed: 391 tokens per GPU (the model's default 25,000 spread thin: host-bound; --global-batch N "
        "sets yours); 1 NIC per node (the default)"
    )
    assert any("--global-batch N" in w for w in a.warnings())  # in the JSON's warnings too


def test_your_own_batch_is_not_warned_about_even_when_host_bound():
    a = _assumed(gpus=64, global_batch=6400)
    assert a.global_batch_from == "yours" and a.step_bound == "host"
    assert "your global batch 6,400); host-bound step" in a.line()
    assert not any("--global-batch" in w for w in a.warnings() + [a.line()])
    big = _assumed(gpus=64, global_batch=1e6)
    assert (
        big.step_bound == "device" and big.device_ms > big.host_ms and "15,625 tokens per GPU" in big.line()
    )


def test_one_nic_by_default_on_nodes_a_datasheet_gives_eight_says_which():
    a = _assumed(gpus=64, gpu="H100", gpus_per_node=8, network="ib-400")
    assert (a.nics_per_node, a.nics_from) == (1, "the default")
    hint = a.nic_hint
    assert (
        hint is not None
        and "dgx-h100" in hint
        and "NVIDIA DGX H100 datasheet" in hint
        and "--nics-per-node" in hint
    )
    assert hint in a.warnings()
    yours = _assumed(gpus=64, gpu="H100", gpus_per_node=8, network="ib-400", nics_per_node=8)
    assert yours.nic_hint is None and yours.line().endswith("8 NICs per node")
    cluster = _assumed(gpus=64, cluster="dgx-h100")
    assert cluster.nic_hint is None and cluster.line().endswith("8 NICs per node (cluster dgx-h100)")
    one_node = _assumed(gpus=8, gpu="H100", gpus_per_node=8, network="ib-400")
    assert one_node.nic_hint is None  # no traffic leaves the node


def test_a_measured_compute_implies_no_batch_and_no_bound():
    a = _assumed(gpus=64, compute_ms=100)
    assert a.batch_per_gpu is None and a.step_bound is None
    assert "your measured compute (--compute-ms)" in a.line() and not a.warnings()


def test_the_answer_heads_with_it_in_every_view_and_the_json_carries_it():
    table = runner.invoke(app, ["advise", "--gpus", "64"], terminal_width=80)
    assert table.exit_code == 0, table.output
    lines = table.output.splitlines()
    assert lines[1].strip().startswith("assumed: 391 tokens per GPU")
    assert "spread thin: host-bound; --global-batch N sets yours)" in " ".join(table.output.split())
    h100 = runner.invoke(
        app, ["advise", "--gpus", "64", "--gpu", "H100", "--gpus-per-node", "8"], terminal_width=80
    )
    assert "note: one NIC per node is the default: dgx-h100 nodes" in " ".join(h100.output.split())
    brief = runner.invoke(app, ["advise", "--gpus", "64", "--brief"], terminal_width=80)
    assert "assumed: 391 tokens/GPU (default batch), host-bound, 1 NIC/node (the default)" in brief.output
    assert len(brief.output.splitlines()) <= 15
    doc = json.loads(runner.invoke(app, ["advise", "--gpus", "64", "--format", "json"]).stdout)
    got = doc["inputs"]["assumptions"]
    assert got["batch_per_gpu"] == 390.625 and got["step_bound"] == "host" and got["nics_per_node"] == 1
    assert Assumptions.from_dict(got) == _assumed(gpus=64) and got["warnings"]


def test_a_profile_answer_has_no_preset_assumptions():
    doc = json.loads(
        runner.invoke(
            app, ["advise", "--profile", "tests/data/synthetic_profile_2x2.json", "--format", "json"]
        ).stdout
    )
    assert "assumptions" not in doc["inputs"]


def test_batch_per_gpu_is_weak_scaling_on_advise_too():
    """--batch-per-gpu B is the global batch B x n (issue 50's weak scaling, as the plots sweep it)."""

    def doc(*argv):
        res = runner.invoke(app, ["advise", *argv, "--format", "json"])
        assert res.exit_code == 0, res.output
        return json.loads(res.stdout)

    per_gpu = doc("--gpus", "128", "--batch-per-gpu", "4096")
    same = doc("--gpus", "128", "--global-batch", str(4096 * 128))
    assert per_gpu["predictions"] == same["predictions"]
    assert per_gpu["inputs"]["preset"]["global_batch"] == 4096 * 128
    assert per_gpu["inputs"]["assumptions"]["batch_per_gpu"] == 4096


def test_resnet50_under_amp_on_multi_gpu_nodes_flags_the_published_step_rate_loss():
    """DeepLearningExamples' one-node ResNet-50 scaled 84-87 % under AMP and 97 % in TF32/FP32, where the
    model says ~97 % for both: the AMP regime is flagged with what was published, the others are not."""
    amp = _assumed(gpus=8, cluster="dgx-a100", model="resnet50", global_batch=2048, precision="fp16")
    assert amp.step_rate_loss is not None and "84-87 %" in amp.step_rate_loss
    assert amp.step_rate_loss in amp.notes() and amp.step_rate_loss in amp.warnings()
    tf32 = _assumed(gpus=8, cluster="dgx-a100", model="resnet50", global_batch=2048, precision="tf32")
    assert tf32.step_rate_loss is None
    transformer = _assumed(gpus=8, cluster="dgx-a100", global_batch=80_000, precision="fp16")
    assert transformer.step_rate_loss is None
    one_per_node = _assumed(gpus=8, gpus_per_node=1, model="resnet50", global_batch=2048, precision="fp16")
    assert one_per_node.step_rate_loss is None


def test_gpt2_from_presets_says_its_compute_is_eager():
    """torch.compile ran GPT-2 small 1.85x faster on an A100 (nanoGPT): a preset answer for it says the
    compute is eager's; your own compute, or another model, is not flagged."""
    gpt2 = _assumed(gpus=16, model="gpt2-small")
    assert (
        gpt2.eager_only is not None and "torch.compile" in gpt2.eager_only and gpt2.eager_only in gpt2.notes()
    )
    assert _assumed(gpus=16, model="gpt2-small", compute_ms=100.0).eager_only is None
    assert _assumed(gpus=16).eager_only is None
