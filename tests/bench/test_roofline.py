"""``autoglm bench roofline``: parameter counts from checkpoint headers, the bounds derived from
measured limits, their JSON round trip, and a quick run of the command."""
from __future__ import annotations

import json
import math

import pytest
import torch
from safetensors import safe_open
from transformers import AutoModelForCausalLM

from autoglm.bench.cli import main
from autoglm.bench.results.roofline import (
    LinearPathRate,
    LinearPaths,
    MatmulRate,
    MatrixSizes,
    ModelWeights,
    Roofline,
    WeightFormat,
    count_weights,
    load_roofline,
)
from autoglm.bench.roofline.measure import QUICK_SIZES
from autoglm.kernels.linear_kernels import CPU_LINEAR_KERNELS, kernel_named
from autoglm.platforms import cpu_has_native_matmul, cpu_model
from tests.tiny_models import make_tiny_checkpoint

# 20 rows x 32 columns of projections, a 10 x 32 LM head, and 40 parameters of norms and biases
WEIGHTS = ModelWeights(total_params=1_500, embedding_params=500, per_token_params=1_000,
                       projections=MatrixSizes(640, 20), lm_head=MatrixSizes(320, 10))
ROOFLINE = Roofline(
    device="cpu",
    num_threads=4,
    engine_dtype="float32",
    read_bytes_per_s=8e9,
    copy_bytes_per_s=1e10,
    matmuls=[
        MatmulRate("float32", 1, 8, 8, 1e9),
        MatmulRate("float32", 64, 8, 8, 4e11),
        MatmulRate("bfloat16", 64, 8, 8, 8e11),
    ],
    model="some/model",
    weights=WEIGHTS,
)


@pytest.fixture(scope="module")
def untied_model(tmp_path_factory):
    return make_tiny_checkpoint("qwen2", tmp_path_factory.mktemp("untied"))


# ---- parameter counts ----------------------------------------------------------------
def parameter_counts(folder) -> tuple[int, int, MatrixSizes, MatrixSizes]:
    """Total and embedding parameters as transformers counts them (a tied lm_head once), and the
    sizes of the decoder's linear layers and of the LM head."""
    model = AutoModelForCausalLM.from_pretrained(folder)
    linears = [module.weight for name, module in model.named_modules()
               if isinstance(module, torch.nn.Linear) and name != "lm_head"]
    head = model.get_output_embeddings().weight
    return (sum(p.numel() for p in model.parameters()), model.get_input_embeddings().weight.numel(),
            MatrixSizes(sum(w.numel() for w in linears), sum(w.shape[0] for w in linears)),
            MatrixSizes(head.numel(), head.shape[0]))


def test_an_untied_lm_head_counts_and_the_embedding_does_not(untied_model):
    total, embedding, projections, lm_head = parameter_counts(untied_model)
    assert count_weights(untied_model) == ModelWeights(total, embedding, total - embedding, projections, lm_head)


def test_a_tied_lm_head_reads_the_embedding_every_token(tmp_path):
    folder = make_tiny_checkpoint("llama", tmp_path, tie_word_embeddings=True)
    total, embedding, projections, lm_head = parameter_counts(folder)
    assert count_weights(folder) == ModelWeights(total, embedding, total, projections, lm_head)


def test_a_sharded_checkpoint_counts_as_one(untied_model, tmp_path):
    folder = make_tiny_checkpoint("qwen2", tmp_path, max_shard_size="100KB")
    assert (folder / "model.safetensors.index.json").is_file()
    assert count_weights(folder) == count_weights(untied_model)


def test_a_token_reads_its_routed_experts_share_of_the_expert_weights(tmp_path):
    """Tiny Qwen3-MoE: 8 experts, 2 a token; its router stays a full-precision matrix, not a projection."""
    folder = make_tiny_checkpoint("qwen3_moe", tmp_path)
    with safe_open(str(folder / "model.safetensors"), framework="pt") as reader:
        sizes = {name: reader.get_slice(name).get_shape() for name in reader.keys()}
    experts = sum(math.prod(shape) for name, shape in sizes.items() if ".mlp.experts." in name)
    assert experts > 0
    weights = count_weights(folder)
    dense = count_weights(make_tiny_checkpoint("qwen3", tmp_path / "dense"))
    assert weights.per_token_params == sum(math.prod(shape) for shape in sizes.values()) - experts * 3 // 4 - (
        weights.embedding_params)
    routers = sum(math.prod(shape) for name, shape in sizes.items() if name.endswith("mlp.gate.weight"))
    assert routers > 0 and weights.projections.params == round(
        sum(math.prod(shape) for name, shape in sizes.items() if len(shape) == 2 and "embed" not in name
            and "lm_head" not in name and not name.endswith("mlp.gate.weight")) - experts * 3 / 4)
    assert dense.per_token_params == dense.total_params - dense.embedding_params


# ---- bounds --------------------------------------------------------------------------
def test_bounds_from_bandwidth_flops_and_parameters():
    assert WEIGHTS.bytes_per_token("float32") == 4_000 and WEIGHTS.bytes_per_token("bfloat16") == 2_000
    assert ROOFLINE.decode_bound(WEIGHTS, "float32") == pytest.approx(8e9 / 4_000)
    assert ROOFLINE.decode_bound(WEIGHTS, "bfloat16") == pytest.approx(8e9 / 2_000)
    assert ROOFLINE.best_matmul("float32").m == 64  # the best shape, not the first
    assert ROOFLINE.compute_bound(WEIGHTS, "float32") == pytest.approx(4e11 / 2_000)
    assert ROOFLINE.compute_bound(WEIGHTS, "bfloat16") == pytest.approx(8e11 / 2_000)
    assert ROOFLINE.decode_fraction(1e6, WEIGHTS, "float32") == pytest.approx(0.5)
    assert ROOFLINE.bounds()["bfloat16"] == pytest.approx(
        {"weight_bytes_per_token": 2_000, "decode_tokens_per_s": 4e6, "batched_tokens_per_s": 4e8})


@pytest.mark.parametrize("weight_format, expected", [
    # int8: a byte a weight, a 2-byte scale per row; the 40 norm and bias parameters in 2 bytes
    (WeightFormat("int8", None, "bfloat16"), 640 + 20 * 2 + 320 * 2 + 40 * 2),
    (WeightFormat("int8", None, "int8"), 640 + 20 * 2 + 320 + 10 * 2 + 40 * 2),
    (WeightFormat("int8", 16, "int8"), 640 + 40 * 2 + 320 + 20 * 2 + 40 * 2),
    # int4: half a byte a weight, a 2-byte scale and a 2-byte zero per group of 32 columns
    (WeightFormat("int4", 32, "bfloat16"), 320 + 20 * 4 + 320 * 2 + 40 * 2),
    (WeightFormat("int4", 32, "int4"), 320 + 20 * 4 + 160 + 10 * 4 + 40 * 2),
    # float projections, a float32 head
    (WeightFormat("bfloat16", None, "float32"), 640 * 2 + 320 * 4 + 40 * 2),
])
def test_quantized_weights_read_their_bytes_and_scales(weight_format, expected):
    assert WEIGHTS.bytes_per_token(weight_format) == expected
    assert ROOFLINE.decode_bound(WEIGHTS, weight_format) == pytest.approx(8e9 / expected)


def test_the_bounds_list_int8_and_int4_with_and_without_a_quantized_head():
    bounds = ROOFLINE.bounds()
    assert list(bounds) == ["float32", "bfloat16", "int8, float32 head", "int8, int8 head",
                            "int4 g128, float32 head", "int4 g128, int4 head"]
    assert bounds["int8, int8 head"]["weight_bytes_per_token"] == 640 + 40 + 320 + 20 + 80
    assert bounds["int8, int8 head"]["batched_tokens_per_s"] == pytest.approx(4e11 / 2_000)  # dequantized: float32


def test_weights_counted_before_matrix_sizes_bound_float_only():
    old = ModelWeights.from_dict({"total_params": 1_500, "embedding_params": 500, "per_token_params": 1_000})
    assert old.bytes_per_token("bfloat16") == 2_000
    with pytest.raises(ValueError, match="int8, int8 head weights need; measure them again with "
                                         "`autoglm bench roofline --model`"):
        old.bytes_per_token(WeightFormat("int8", None, "int8"))


def test_an_unmeasured_dtype_has_no_compute_bound():
    with pytest.raises(ValueError, match="no float16 matmul was measured; measured: float32, bfloat16"):
        ROOFLINE.compute_bound(WEIGHTS, "float16")


def test_a_saved_roofline_loads_back(tmp_path):
    path = tmp_path / "roofline.json"
    path.write_text(json.dumps(ROOFLINE.to_dict()))
    assert load_roofline(path) == ROOFLINE


# ---- the command ---------------------------------------------------------------------
@pytest.mark.cpu_isa
def test_roofline_measures_and_bounds_a_model(untied_model, tmp_path, capsys, one_torch_thread):
    path = tmp_path / "roofline.json"
    assert main(["roofline", "--quick", "--model", str(untied_model), "--num-threads", str(one_torch_thread),
                 "--output-json", str(path)]) == 0
    report = json.loads(path.read_text())
    assert (report["device"], report["num_threads"], report["machine"]["torch_threads"]) == ("cpu", 1, 1)
    assert report["engine_dtype"] == ("bfloat16" if cpu_has_native_matmul(torch.bfloat16) else "float32")
    assert report["read_bytes_per_s"] > 0 and report["copy_bytes_per_s"] > 0
    shapes = {(m, width, width) for m in QUICK_SIZES.matmul_rows for width in QUICK_SIZES.matmul_widths}
    for dtype in ("float32", "bfloat16"):
        rates = [rate for rate in report["matmuls"] if rate["dtype"] == dtype]
        assert {(rate["m"], rate["k"], rate["n"]) for rate in rates} == shapes
        assert all(rate["flops_per_s"] > 0 for rate in rates)
        assert report["bounds"][dtype]["decode_tokens_per_s"] > 0
    roofline = load_roofline(path)
    assert roofline.weights == count_weights(untied_model)
    assert report["bounds"]["float32"]["batched_tokens_per_s"] == pytest.approx(
        roofline.compute_bound(roofline.weights, "float32"))
    out = capsys.readouterr().out
    assert "read bandwidth" in out and "batch-1 decode bound" in out and f"{report['engine_dtype']} (engine)" in out
    assert roofline.linear_paths is not None and f"cpu: {cpu_model()}" in out


@pytest.mark.cpu_isa
def test_roofline_times_every_linear_path_this_cpu_runs_and_names_the_others(tmp_path, capsys, one_torch_thread):
    path = tmp_path / "roofline.json"
    assert main(["roofline", "--quick", "--num-threads", str(one_torch_thread), "--output-json", str(path)]) == 0
    paths = load_roofline(path).linear_paths
    runnable = [kernel.name for kernel in CPU_LINEAR_KERNELS if kernel.runs_here()]
    measured = {(rate.path, rate.activation_dtype) for rate in paths.rates}
    assert measured == {("torch", "float32"), ("torch", "bfloat16"),
                        *((name, str(kernel_named(name).activation_dtype).removeprefix("torch.")) for name in runnable)}
    assert all(rate.seconds > 0 for rate in paths.rates)
    gemv = [rate for rate in paths.rates if rate.m == 1]
    assert gemv and all(rate.n * rate.k * 2 >= QUICK_SIZES.bandwidth_bytes - 2 * rate.k for rate in gemv)
    assert set(paths.row_limits) == set(runnable)
    assert set(paths.missing) == {kernel.name for kernel in CPU_LINEAR_KERNELS if not kernel.runs_here()}
    out = capsys.readouterr().out
    assert all(name in out for name in [*runnable, *paths.missing]) and "1 row: GB/s of weights" in out


@pytest.mark.cpu_isa
def test_roofline_without_a_model_reports_only_the_machine(capsys, one_torch_thread):
    assert main(["roofline", "--quick", "--num-threads", str(one_torch_thread)]) == 0
    out = capsys.readouterr().out
    assert "copy bandwidth" in out and "decode bound" not in out


def test_the_compute_bound_takes_a_kernel_where_it_multiplies_faster_than_pytorch():
    """On a CPU without bfloat16 units a float32 model's 64-row steps go through a bfloat16-weight kernel that
    can beat PyTorch's float32 matmul: the bound is the fastest path the CPU has, not PyTorch's alone."""
    rates = [LinearPathRate("bf16-weight-avx512", "float32", "bfloat16", 64, 1024, 1024, 2 * 64 * 1024 * 1024 / 4e11),
             LinearPathRate("bf16-weight-avx512", "float32", "bfloat16", 1, 1024, 262144, 0.01)]
    plain = Roofline("cpu", 2, "float32", 50e9, 40e9, [MatmulRate("float32", 512, 1024, 1024, 2e11)])
    with_kernel = Roofline("cpu", 2, "float32", 50e9, 40e9, [MatmulRate("float32", 512, 1024, 1024, 2e11)],
                           linear_paths=LinearPaths(rates, {}, {}))
    assert plain.compute_bound(WEIGHTS, "float32") == pytest.approx(2e11 / (2 * WEIGHTS.per_token_params))
    assert with_kernel.compute_bound(WEIGHTS, "float32") == pytest.approx(4e11 / (2 * WEIGHTS.per_token_params))
