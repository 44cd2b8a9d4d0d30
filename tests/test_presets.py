"""Presets are read strictly into typed dataclasses, layered from user directories, and their defaults
come from the TOML files, not from code."""

from __future__ import annotations

import tomllib
from importlib import resources

import pytest

from runtime_model.advice.advisor import advise
from runtime_model.core.defaults import MAX_GPUS
from runtime_model.core.errors import InvalidCombination, InvalidValue, UserError
from runtime_model.core.scenario import ClusterShape
from runtime_model.presets import preset_types
from runtime_model.presets import to_model as presets
from runtime_model.presets.preset_loading import PresetFileError, load_library

A100_LINES = """
[A100]
tflops = { fp32 = 19.5, tf32 = 156.0 }
memory_bandwidth_GBps = 1555
memory_GiB = 40
default_precision = "tf32"
mfu = { fp32 = 0.40, tf32 = 0.40 }
memory_efficiency = 0.9
dispatch_us = 10
source = "test"
"""
MODEL_LINES = """
[m]
description = "m"
params = 10
train_flops_per_unit = 1e9
forward_flops_per_unit = 3e8
unit = "token"
default_global_batch = 8
embedding_params = 0
compute_cv = 0
forward_ops = { amp = 10, full = 8 }
backward_ops = { amp = 20, full = 16 }
forward_bytes_per_unit = { amp = 1e6, full = 2e6 }
backward_bytes_per_unit = { amp = 2e6, full = 4e6 }
forward_fixed_bytes = { amp = 0, full = 0 }
backward_fixed_bytes = { amp = 0, full = 0 }
backward_numels = [4, 6]
optimizer = "adam"
source = "s"
counts_source = "test"
"""


def builtin_toml(name: str) -> dict:
    return tomllib.loads(resources.files("runtime_model.presets.preset_data").joinpath(name).read_text())


def write(tmp_path, name: str, text: str):
    (tmp_path / name).write_text(text)
    return tmp_path


# ----------------------------------------------------------------------------- built-ins


def test_builtins_load_into_typed_presets_with_sources():
    lib = presets.builtin_library()
    assert isinstance(lib.gpus["A100"], preset_types.GpuPreset)
    assert lib.gpus["A100"].tflops["tf32"] == 156.0 and lib.gpus["A100"].memory_bandwidth_GBps == 1555
    assert lib.inter_networks["ib-100"].bandwidth_Gbps == 100 and lib.intra_links["nvlink3"].latency_us == 4
    assert lib.models["resnet50"].params == 25_557_032 and lib.models["resnet50"].unit == "image"
    assert lib.clusters["t4-ib100"].gpus_per_node == 8
    for table in (lib.gpus, lib.inter_networks, lib.intra_links, lib.models, lib.clusters):
        for entry in table.values():
            assert entry.source.strip(), entry.name
    assert all(g.mfu_source for g in lib.gpus.values())


def test_builtin_values_are_the_toml_values():
    """No number changes on the way from the file to the dataclass."""
    lib = presets.builtin_library()
    for name, raw in builtin_toml("gpus.toml").items():
        g = lib.gpus[name]
        assert dict(g.tflops) == raw["tflops"] and g.mfu == raw["mfu"]
        assert g.memory_bandwidth_GBps == raw["memory_bandwidth_GBps"]
    for name, raw in builtin_toml("models.toml").items():
        m = lib.models[name]
        assert (m.params, m.train_flops_per_unit, m.embedding_params, m.compute_cv) == (
            raw["params"],
            raw["train_flops_per_unit"],
            raw["embedding_params"],
            raw["compute_cv"],
        )
    nets = builtin_toml("networks.toml")
    for name, raw in nets["inter"].items():
        assert (lib.inter_networks[name].bandwidth_Gbps, lib.inter_networks[name].latency_us) == (
            raw["bandwidth_Gbps"],
            raw["latency_us"],
        )


def test_defaults_come_from_the_toml_files():
    lib = presets.builtin_library()
    raw = builtin_toml("defaults.toml")
    assert (lib.defaults.gpu, lib.defaults.network, lib.defaults.intra) == (
        raw["gpu"],
        raw["network"],
        raw["intra"],
    )
    assert lib.defaults.gpus_per_node == raw["gpus_per_node"] and lib.defaults.model == raw["model"]
    gpus = builtin_toml("gpus.toml")
    assert {n: g["default_intra"] for n, g in gpus.items()} == {
        "T4": "pcie3",
        "A40": "pcie4",
        "A100": "nvlink3",
        "H100": "nvlink4",
        "H200": "nvlink4",
        "V100": "nvlink2",
        "V100-32GB": "nvlink2",
        "A100-80GB": "nvlink3",
    }
    choice = presets.resolve(presets.PresetRequest(4))
    assert (choice.gpu, choice.network, choice.intra, choice.gpus_per_node) == (
        "A100",
        "ib-100",
        "nvlink3",
        4,
    )
    assert presets.resolve(presets.PresetRequest(64, gpu="T4")).intra == "pcie3" and presets.resolve(presets.PresetRequest(64)).gpus_per_node == 4


def test_defaults_follow_a_users_defaults_file(tmp_path):
    write(tmp_path, "defaults.toml", 'gpu = "H100"\ngpus_per_node = 4\n')
    write(tmp_path, "gpus.toml", A100_LINES.replace("[A100]", "[X1]"))
    lib = load_library([tmp_path])
    choice = presets.resolve(presets.PresetRequest(16), library=lib)
    assert (choice.gpu, choice.gpus_per_node, choice.intra, choice.network) == (
        "H100",
        4,
        "nvlink4",
        "ib-100",
    )
    # a GPU that names no default_intra gets the library's default intra link
    assert presets.resolve(presets.PresetRequest(16, gpu="X1"), library=lib).intra == lib.defaults.intra == "pcie4"


# ----------------------------------------------------------------------------- strict loading


@pytest.mark.parametrize(
    "file, text, needles",
    [
        (
            "gpus.toml",
            A100_LINES.replace("tflops =", "tflop ="),
            ["gpus.toml [A100]", "unknown key 'tflop'", "expected: tflops, memory_bandwidth_GBps"],
        ),
        (
            "gpus.toml",
            A100_LINES.replace("mfu = { fp32 = 0.40, tf32 = 0.40 }\n", ""),
            ["gpus.toml [A100]", "missing key 'mfu'"],
        ),
        (
            "gpus.toml",
            A100_LINES.replace("fp32 = 0.40", "fp32 = 1.5"),
            ["gpus.toml [A100]", "mfu.fp32 must be in [0.01, 1]"],
        ),
        (
            "gpus.toml",
            A100_LINES.replace("mfu = { fp32 = 0.40, tf32 = 0.40 }", 'mfu = "high"'),
            ["gpus.toml [A100]", "mfu must be"],
        ),
        (
            "gpus.toml",
            A100_LINES.replace("mfu = { fp32 = 0.40, tf32 = 0.40 }", "mfu = { fp32 = 0.4 }"),
            ["gpus.toml [A100]", "mfu must be a table with the keys of tflops"],
        ),
        (
            "gpus.toml",
            A100_LINES.replace("fp32 = 19.5", "fp32 = -1"),
            ["gpus.toml [A100]", "tflops.fp32 must be"],
        ),
        (
            "gpus.toml",
            A100_LINES.replace('"tf32"', '"fp8"'),
            ["gpus.toml [A100]", "default_precision must be"],
        ),
        (
            "gpus.toml",
            A100_LINES.replace('source = "test"', 'source = ""'),
            ["gpus.toml [A100]", "source must be"],
        ),
        (
            "gpus.toml",
            A100_LINES + 'default_intra = "nvlink9"\n',
            ["gpus.toml [A100]", "default_intra names unknown intra-node link 'nvlink9'"],
        ),
        ("gpus.toml", "A100 = 3\n", ["gpus.toml [A100]", "must be a table"]),
        (
            "networks.toml",
            '[inter.x]\ndescription = "x"\nbandwidth_Gbps = 0\nlatency_us = 1\nsource = "s"\n',
            ["networks.toml [inter.x]", "bandwidth_Gbps must be in [0.001, 100000], got 0"],
        ),
        ("networks.toml", '[wan.x]\ndescription = "x"\n', ["networks.toml", "unknown table 'wan'"]),
        (
            "models.toml",
            MODEL_LINES.replace("params = 10\n", "params = 10.5\n"),
            ["models.toml [m]", "params must be an integer in [1, 1e+11]"],
        ),
        (
            "models.toml",
            MODEL_LINES.replace("backward_numels = [4, 6]", "backward_numels = [4, 5]"),
            ["models.toml [m]", "backward_numels must be numbers summing to params (10)"],
        ),
        (
            "models.toml",
            MODEL_LINES.replace('optimizer = "adam"', 'optimizer = "sgd9"'),
            ["models.toml [m]", "optimizer names unknown optimizer 'sgd9'"],
        ),
        (
            "models.toml",
            MODEL_LINES.replace("forward_ops = { amp = 10, full = 8 }", "forward_ops = { amp = 10 }"),
            ["models.toml [m]", "forward_ops must be a table with the keys amp and full"],
        ),
        (
            "clusters.toml",
            '[c]\ngpu = "P100"\ngpus_per_node = 8\nintra = "pcie4"\nnetwork = "ib-100"\nsource = "s"\n',
            ["clusters.toml [c]", "gpu names unknown GPU 'P100'"],
        ),
        (
            "clusters.toml",
            '[c]\ngpu = "A100"\ngpus_per_node = 0\nintra = "pcie4"\nnetwork = "ib-100"\nsource = "s"\n',
            ["clusters.toml [c]", "gpus_per_node must be an integer in [1, 1024]"],
        ),
        ("defaults.toml", 'gpu = "A100"\ncolour = "red"\n', ["defaults.toml", "unknown key 'colour'"]),
        ("defaults.toml", 'network = "carrier-pigeon"\n', ["defaults.toml", "network names unknown network"]),
        ("gpus.toml", "[A100\n", ["gpus.toml", "not valid TOML"]),
    ],
)
def test_bad_user_file_is_a_user_error_naming_file_entry_and_key(tmp_path, file, text, needles):
    write(tmp_path, file, text)
    with pytest.raises(PresetFileError) as err:
        load_library([tmp_path])
    assert isinstance(err.value, UserError)
    message = str(err.value)
    assert message.startswith(str(tmp_path / file))
    for needle in needles:
        assert needle in message, message


def test_missing_or_empty_dir_and_unknown_file_name_are_user_errors(tmp_path):
    with pytest.raises(PresetFileError, match="no such presets directory"):
        load_library([tmp_path / "nope"])
    with pytest.raises(PresetFileError, match="holds no preset files"):
        load_library([tmp_path])
    write(tmp_path, "gpu.toml", A100_LINES)
    with pytest.raises(PresetFileError, match=r"gpu\.toml: unknown preset file name"):
        load_library([tmp_path])


# ----------------------------------------------------------------------------- layering


def test_user_entry_replaces_a_builtin_whole_and_new_entries_are_added(tmp_path):
    write(tmp_path, "gpus.toml", A100_LINES.replace("= 0.40", "= 0.5"))
    write(
        tmp_path,
        "networks.toml",
        '[inter.roce-800]\ndescription = "800G"\nbandwidth_Gbps = 800\nlatency_us = 3\nsource = "mine"\n',
    )
    lib = load_library(tmp_path)
    a100 = lib.gpus["A100"]
    assert a100.mfu == {"fp32": 0.5, "tf32": 0.5} and set(a100.tflops) == {"fp32", "tf32"}  # whole entry: no fp16 from the built-in
    assert a100.default_intra is None and a100.mfu_source == ""
    assert lib.gpus["H100"] == presets.builtin_library().gpus["H100"]
    assert "roce-800" in presets.names(lib)["network"] and "ib-100" in lib.inter_networks
    assert lib.files[-2:] == (str(tmp_path / "gpus.toml"), str(tmp_path / "networks.toml"))
    assert "roce-800" not in presets.names()["network"]  # the built-in library is untouched

    choice = presets.resolve(presets.PresetRequest(16, gpu="A100", network="roce-800"), library=lib)
    assert choice.intra == "pcie4"  # the user's A100 names no default_intra
    sc = presets.scenario_from_choice(choice, lib)
    assert sc.network.inter.bandwidth_Bps == 800e9 / 8 and sc.network.inter.source == "preset roce-800"
    with pytest.raises(presets.UnknownPreset, match="precision 'fp16'"):
        presets.resolve(presets.PresetRequest(16, gpu="A100", precision="fp16"), library=lib)


def test_later_directories_win(tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir(), second.mkdir()
    write(first, "gpus.toml", A100_LINES.replace("= 0.40", "= 0.5"))
    write(second, "gpus.toml", A100_LINES.replace("= 0.40", "= 0.6"))
    assert load_library([first, second]).gpus["A100"].mfu["tf32"] == 0.6
    assert load_library([]) is presets.builtin_library()


# ----------------------------------------------------------------------------- resolve


def test_unknown_names_raise_unknown_preset_with_the_choices():
    with pytest.raises(presets.UnknownPreset) as err:
        presets.resolve(presets.PresetRequest(8, gpu="V100X"))
    assert str(err.value) == (
        "unknown GPU 'V100X'; choose one of: A100, A100-80GB, A40, H100, H200, T4, V100, V100-32GB"
    )
    assert (err.value.kind, err.value.name, err.value.input_name) == ("GPU", "V100X", "gpu")
    for kw, kind in (
        (dict(network="x"), "network"),
        (dict(intra="x"), "intra-node link"),
        (dict(model="x"), "model"),
        (dict(cluster="x"), "cluster"),
    ):
        with pytest.raises(presets.UnknownPreset, match=f"unknown {kind} 'x'"):
            presets.resolve(presets.PresetRequest(8, **kw))


@pytest.mark.parametrize(
    "kw, name",
    [
        (dict(mfu=0.0), "mfu"),
        (dict(mfu=1.01), "mfu"),
        (dict(mfu=float("nan")), "mfu"),
        (dict(compute_cv=-0.1), "compute_cv"),
        (dict(compute_cv=1.5), "compute_cv"),
        (dict(global_batch=0), "global_batch"),
        (dict(global_batch=float("inf")), "global_batch"),
        (dict(bucket_cap_mb=0), "bucket_cap_mb"),
        (dict(bucket_cap_mb=1e6), "bucket_cap_mb"),
        (dict(mfu=1e-300), "mfu"),  # physically meaningless: times hundreds of digits long
        (dict(mfu=0.0099), "mfu"),
        (dict(mfu=float("inf")), "mfu"),
        (dict(compute_cv=float("nan")), "compute_cv"),
        (dict(compute_cv=float("inf")), "compute_cv"),
        (dict(global_batch=7), "global_batch"),  # less than one unit per GPU (8 GPUs)
        (dict(global_batch=float("nan")), "global_batch"),
        (dict(bucket_cap_mb=float("inf")), "bucket_cap_mb"),
        (dict(bucket_cap_mb=float("nan")), "bucket_cap_mb"),
        (dict(bucket_cap_mb=-1), "bucket_cap_mb"),
        (dict(gpus_per_node=0), "gpus_per_node"),  # 0 is not "not given"
        (dict(gpus_per_node=-1), "gpus_per_node"),
        (dict(gpus_per_node=0, cluster="t4-ib100"), "gpus_per_node"),
    ],
)
def test_numbers_out_of_range_raise_invalid_value_named_by_model_input(kw, name):
    with pytest.raises(InvalidValue) as err:
        presets.resolve(presets.PresetRequest(8, **kw))
    assert err.value.name == name


def test_numbers_at_the_edges_are_accepted():
    c = presets.resolve(presets.PresetRequest(8, mfu=1.0, compute_cv=0.0, bucket_cap_mb=0.5, global_batch=8))
    assert (c.mfu, c.compute_cv, c.bucket_cap_mb, c.global_batch) == (1.0, 0.0, 0.5, 8.0)
    assert presets.resolve(presets.PresetRequest(8, compute_cv=1.0)).compute_cv == 1.0
    assert presets.resolve(presets.PresetRequest(8, mfu=0.01)).mfu == 0.01
    assert presets.resolve(presets.PresetRequest(MAX_GPUS, gpus_per_node=8, global_batch=MAX_GPUS)).gpus == MAX_GPUS


def test_global_batch_minimum_is_one_unit_per_gpu_and_says_so():
    with pytest.raises(InvalidValue) as err:
        presets.resolve(presets.PresetRequest(64, global_batch=10, model="resnet50"))
    assert err.value.requirement == ">= the number of GPUs (64): at least one image per GPU"
    # the model's default batch is held to it too, in a line that says to give the batch
    with pytest.raises(InvalidCombination, match="gpus 2048 is more GPUs than resnet50's default global batch"):
        presets.resolve(presets.PresetRequest(2048, model="resnet50"))
    assert presets.resolve(presets.PresetRequest(1024, model="resnet50")).global_batch == 1024  # one image per GPU: fine
    # a measured compute does not lift it for a preset model (its host work and provenance still take the
    # batch per GPU from it: 0.5 image per GPU otherwise, issue 51); a params-only model has no batch
    with pytest.raises(InvalidCombination, match="default global batch"):
        presets.resolve(presets.PresetRequest(2048, model="resnet50", compute_ms=100))
    assert presets.resolve(presets.PresetRequest(2048, model="resnet50", compute_ms=100, global_batch=4096)).gpus == 2048
    from runtime_model.presets import own_model
    lib = own_model.add_yours(presets.builtin_library(), 10**8, None, 4, compute_ms=100)
    assert presets.resolve(presets.PresetRequest(2048, model=own_model.OWN_MODEL, compute_ms=100), library=lib).gpus == 2048


@pytest.mark.parametrize("gpus", [0, -1, MAX_GPUS + 1, 2**25, 10**12, 2.5])
def test_gpu_count_outside_1_to_max_gpus_is_refused_before_any_work(gpus):
    with pytest.raises(InvalidValue) as err:
        presets.resolve(presets.PresetRequest(gpus))
    assert err.value.name == "gpus"
    with pytest.raises(InvalidValue) as err:
        ClusterShape(gpus, 1)
    assert err.value.name == "gpus"
    if isinstance(gpus, int) and gpus > MAX_GPUS:
        assert str(err.value).startswith(f"gpus must be at most {MAX_GPUS} ")


@pytest.mark.parametrize("field", ["gpu", "network", "intra", "model", "cluster", "precision"])
def test_an_empty_name_is_unknown_not_the_default(field):
    """Only None means "not given": '' is looked up like any name, and the error lists the choices."""
    with pytest.raises(presets.UnknownPreset) as err:
        presets.resolve(presets.PresetRequest(8, **{field: ""}))
    assert err.value.name == "" and "choose one of: " in str(err.value)


def test_unset_choices_still_take_the_defaults_and_a_cluster_fills_only_what_is_unset():
    c = presets.resolve(presets.PresetRequest(8))
    lib = presets.builtin_library()
    d = lib.defaults
    # no bucket cap given: None, so DDP keeps its 1 MiB first bucket (torch applies a given cap to it too)
    assert (c.gpu, c.network, c.model, c.bucket_cap_mb) == (d.gpu, d.network, d.model, None)
    assert presets.resolve(presets.PresetRequest(8, bucket_cap_mb=25.0)).bucket_cap_mb == 25.0
    c = presets.resolve(presets.PresetRequest(16, cluster="t4-ib100", gpus_per_node=4, network="tcp-25g"))
    assert (c.gpu, c.gpus_per_node, c.network) == ("T4", 4, "tcp-25g")


# ----------------------------------------------------------------------------- V100, A100 80 GB, DGX-1 (issue 26)


def test_volta_and_a100_80gb_presets_carry_their_datasheet_figures_and_sources():
    lib = presets.builtin_library()
    for name, memory in (("V100", 16), ("V100-32GB", 32)):
        g = lib.gpus[name]
        assert dict(g.tflops) == {"fp32": 15.7, "fp16": 125.0}  # Volta has no TF32 or BF16
        assert (g.memory_bandwidth_GBps, g.memory_GiB, g.default_precision) == (900, memory, "fp16")
        assert lib.default_intra(name) == "nvlink2"
    big = lib.gpus["A100-80GB"]
    assert dict(big.tflops) == dict(lib.gpus["A100"].tflops) and big.mfu == lib.gpus["A100"].mfu
    assert (big.memory_bandwidth_GBps, big.memory_GiB, lib.default_intra("A100-80GB")) == (2039, 80, "nvlink3")
    for name in ("V100", "V100-32GB", "A100-80GB"):
        g = lib.gpus[name]
        assert g.dispatch_us == lib.gpus["A100"].dispatch_us
        assert g.dispatch_source == lib.gpus["A100"].dispatch_source
        assert all(s.strip() for s in (g.source, g.mfu_source, g.memory_efficiency_source))
    link = lib.intra_links["nvlink2"]
    assert (link.bandwidth_Gbps, link.efficiency) == (1200, 0.8)  # 6 links x 25 GB/s, NCCL's 20 of 25 GB/s
    assert all(s.strip() for s in (link.source, link.latency_source, link.efficiency_source))
    dgx1 = lib.clusters["dgx1-v100"]
    assert (dgx1.gpu, dgx1.gpus_per_node, dgx1.intra, dgx1.network, dgx1.nics_per_node) == (
        "V100",
        8,
        "nvlink2",
        "ib-100",
        4,
    )
    dgx = lib.clusters["dgx-a100-80gb"]
    assert (dgx.gpu, dgx.intra, dgx.network, dgx.nics_per_node) == ("A100-80GB", "nvlink3", "ib-200", 8)
    assert dgx1.source.strip() and dgx.source.strip()


@pytest.mark.parametrize("precision", ["tf32", "bf16"])
def test_a_precision_volta_lacks_is_refused_with_the_ones_it_has(precision):
    with pytest.raises(presets.UnknownPreset) as err:
        presets.resolve(presets.PresetRequest(8, gpu="V100", precision=precision))
    assert str(err.value) == f"unknown precision '{precision}'; choose one of: fp32, fp16"


@pytest.mark.parametrize("cluster", ["dgx1-v100", "dgx-a100-80gb"])
@pytest.mark.parametrize("model", ["transformer-base", "resnet50"])
def test_the_new_clusters_give_advice(cluster, model):
    choice = presets.resolve(presets.PresetRequest(64, cluster=cluster, model=model))
    assert choice.gpus_per_node == 8 and choice.intra == presets.builtin_library().cluster(cluster).intra
    adv = advise(presets.scenario_from_choice(choice))
    assert adv.recommendation.topology
