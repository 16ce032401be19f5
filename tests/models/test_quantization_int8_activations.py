"""w8a8 and w4a8: their settings, the method on a layer (the kernel where this CPU runs it, PyTorch's same math
elsewhere), and the engine on the default model through the kernel against the PyTorch path."""
from __future__ import annotations

import pytest
import torch

from autoglm import LLM, SamplingParams
from autoglm import platforms
from autoglm.kernels.int_a8_kernel import INT_A8_KERNEL, int_a8_missing_flags
from autoglm.models import ModelConfig, load_model
from autoglm.models.linear import Linear
from autoglm.models.linear_method import LinearMethods, WeightQuantization, with_int_weights
from autoglm.models.linear_method.int_activation_method import Int8ActivationLinearMethod
from autoglm.models.linear_method.int_activation_weights import int_a8_reference_linear, unpack_int_a8
from autoglm.models.linear_method.int_weight_method import DEQUANTIZE_PATH
from autoglm.models.linear_method.int_weights import IntWeightFormat
from tests.kernels.conftest import cpu_kernels  # noqa: F401 (a fixture)
from tests.tiny_models import make_tiny_checkpoint

IN_FEATURES, OUT_FEATURES = 320, 45
# The kernel sums exact int32 group sums in float32; PyTorch multiplies the dequantized floats: the same
# products rounded in another order, a few float32 steps of the output's magnitude.
LAYER_TOLERANCE = 1e-5
NUM_PROMPTS, NUM_NEW_TOKENS = 6, 24
# The kernel and PyTorch paths differ by float32 rounding (1e-6 in logprob), but an activation that lies on a
# rounding boundary of its int8 step then rounds the other way in one of them: one step of one value, which
# moved a whole sequence's logprobs by up to 0.03 on this model and can turn a near-tie into another token.
# Until the tokens part, logprobs stay within this; and most of the tokens never part.
LOGPROB_TOLERANCE = 0.1
MIN_SHARED_TOKENS = 0.8


@pytest.fixture
def cpu_without_vnni(monkeypatch):
    """The engine treats this CPU as one without AVX512-VNNI: w8a8/w4a8 take PyTorch's path."""
    monkeypatch.setenv(platforms.CPU_DISABLE_FLAGS_ENV, "avx512_vnni")
    platforms._cpu_flags.cache_clear()
    yield
    monkeypatch.undo()
    platforms._cpu_flags.cache_clear()


def vnni_kernel() -> None:
    missing = int_a8_missing_flags()
    if missing:
        pytest.skip(f"the int8-activation kernel needs CPU flags this CPU lacks (or hides): {', '.join(missing)}")


@pytest.mark.parametrize(("method", "bits", "group_size"), [("w8a8", 8, None), ("w4a8", 4, 32)])
def test_the_settings_name_weights_and_int8_activations(method, bits, group_size):
    quantization = WeightQuantization.from_settings(method)
    assert quantization.weight_format == IntWeightFormat(bits, group_size) and quantization.int8_activations
    assert WeightQuantization.from_settings("w4a8", 128).weight_format.group_size == 128
    assert not WeightQuantization.from_settings("int8").int8_activations


@pytest.mark.parametrize("group_size", [16, 48, 96])
def test_a_group_size_the_kernel_cannot_sum_is_refused_naming_it(group_size):
    with pytest.raises(ValueError, match=f"quantization_group_size {group_size} does not suit w4a8: its "
                                         "int8-activation kernel takes groups of 32 or a multiple of 64"):
        WeightQuantization.from_settings("w4a8", group_size)


def test_an_unknown_method_names_the_methods():
    with pytest.raises(ValueError, match="unknown quantization method 'w2a8'; choose one of: none, int8, int4, "
                                         "w8a8, w4a8"):
        WeightQuantization.from_settings("w2a8")


def test_a_checkpoint_already_quantized_is_refused_with_w8a8(tmp_path):
    config = ModelConfig.from_pretrained(make_tiny_checkpoint("qwen2", tmp_path))
    stored = WeightQuantization.from_settings("int8").weight_format
    config = type(config)(**{**config.__dict__, "quantization": type("Stored", (), {"weight_format": stored})()})
    with pytest.raises(ValueError, match=r"already quantized to 8-bit weights \(W8A16\); w8a8 and w4a8 quantize a "
                                         "float checkpoint as it loads"):
        with_int_weights(LinearMethods(), config, WeightQuantization.from_settings("w8a8"), torch.float32,
                         torch.float32)


def quantized_layer(bits: int, group_size: int | None) -> Linear:
    torch.manual_seed(0)
    layer = Linear(IN_FEATURES, OUT_FEATURES, True, Int8ActivationLinearMethod(IntWeightFormat(bits, group_size)))
    layer.weight.weight_loader(layer.weight, torch.randn(OUT_FEATURES, IN_FEATURES) * 0.1)
    layer.bias.weight_loader(layer.bias, torch.randn(OUT_FEATURES))
    layer.linear_method.process_weights_after_loading(layer)
    return layer


def expected(layer: Linear, x: torch.Tensor, bits: int) -> torch.Tensor:
    return int_a8_reference_linear(x, unpack_int_a8(layer.qweight, bits, OUT_FEATURES), layer.weight_scale, layer.bias)


def relative_error(actual: torch.Tensor, reference: torch.Tensor) -> float:
    return float((actual.float() - reference.float()).abs().max() / reference.float().abs().max())


@pytest.mark.cpu_isa
@pytest.mark.parametrize("rows", [1, 3, 40, 300])
@pytest.mark.parametrize(("bits", "group_size"), [(8, None), (4, 32), (4, 64)])
def test_the_kernel_computes_what_pytorch_computes(cpu_kernels, bits, group_size, rows):
    vnni_kernel()
    layer = quantized_layer(bits, group_size)
    x = torch.randn(2, rows, IN_FEATURES)
    assert layer.linear_method.path(layer, x) == INT_A8_KERNEL
    y = layer(x)
    assert y.shape == (2, rows, OUT_FEATURES)
    assert relative_error(y, expected(layer, x, bits)) < LAYER_TOLERANCE


@pytest.mark.parametrize(("bits", "group_size"), [(8, None), (4, 32)])
def test_without_vnni_pytorch_computes_the_same_math(cpu_without_vnni, bits, group_size):
    layer = quantized_layer(bits, group_size)
    x = torch.randn(3, IN_FEATURES)
    assert layer.linear_method.path(layer, x) == DEQUANTIZE_PATH
    assert layer.linear_method.native_linear(layer) is None
    assert torch.equal(layer(x), expected(layer, x, bits))


@pytest.mark.cpu_isa
def test_the_native_step_is_given_the_tensors_the_kernel_reads(cpu_kernels):
    vnni_kernel()
    layer = quantized_layer(4, 32)
    native = layer.linear_method.native_linear(layer)
    assert native.kind == "int-a8" and (native.bits, native.group_size) == (4, 32)
    assert native.weight is layer.qweight and native.scales is layer.weight_scale
    assert native.bias.dtype == torch.float32 and torch.equal(native.bias, layer.bias.float())
    x = torch.randn(2, IN_FEATURES)
    assert torch.equal(cpu_kernels.linear_int_a8(x, native.weight, native.scales, native.bias, native.bits,
                                                 native.group_size), layer(x))


@pytest.mark.parametrize("tied", [False, True])
def test_quantize_lm_head_takes_the_head_tied_or_not(tied, tmp_path):
    model_dir = make_tiny_checkpoint("qwen2", tmp_path, tie_word_embeddings=tied)
    config = ModelConfig.from_pretrained(model_dir)
    methods = with_int_weights(LinearMethods(), config, WeightQuantization.from_settings("w4a8", None, True),
                               torch.float32, torch.float32)
    model = load_model(model_dir, torch.float32, torch.device("cpu"), config, methods)[0]
    assert isinstance(model.lm_head.linear_method, Int8ActivationLinearMethod) and hasattr(model.lm_head, "qweight")
    assert model.model.embed_tokens.weight.dtype == torch.float32
    logits = model.compute_logits(model(torch.tensor([5, 6, 7]), torch.arange(3)))
    assert logits.shape == (3, 320) and bool(torch.isfinite(logits).all())


def generate(quantization: str, dtype: str):
    llm = LLM(device="cpu", dtype=dtype, quantization=quantization, quantize_lm_head=True)
    prompts = [[(11 * i + 7 * j) % 4000 + 5 for j in range(4 + 5 * i)] for i in range(NUM_PROMPTS)]
    params = SamplingParams(temperature=0.0, max_tokens=NUM_NEW_TOKENS, ignore_eos=True, logprobs=0)
    return llm, [output.outputs[0] for output in llm.generate(prompts, params, use_tqdm=False)]


def logprobs_of(completion) -> list[float]:
    return [next(iter(position.values())).logprob for position in completion.logprobs]


@pytest.mark.cpu_isa
@pytest.mark.parametrize("quantization", ["w8a8", "w4a8"])
def test_the_engine_on_the_kernel_generates_what_the_pytorch_path_does(cpu_kernels, quantization, monkeypatch):
    vnni_kernel()
    llm, on_kernel = generate(quantization, "float32")
    model = llm.engine.runner.model
    assert all(module.int_a8_kernel for module in model.modules() if hasattr(module, "int_a8_kernel"))
    del llm
    monkeypatch.setenv(platforms.CPU_DISABLE_FLAGS_ENV, "avx512_vnni")
    platforms._cpu_flags.cache_clear()
    try:
        _, on_pytorch = generate(quantization, "float32")
    finally:
        monkeypatch.undo()
        platforms._cpu_flags.cache_clear()
    shared = 0
    for kernel, pytorch in zip(on_kernel, on_pytorch):
        same = next((i for i, (a, b) in enumerate(zip(kernel.token_ids, pytorch.token_ids)) if a != b),
                    NUM_NEW_TOKENS)
        shared += same
        differences = [abs(a - b) for a, b in zip(logprobs_of(kernel)[: same + 1], logprobs_of(pytorch))]
        assert max(differences) < LOGPROB_TOLERANCE
    assert shared >= MIN_SHARED_TOKENS * NUM_PROMPTS * NUM_NEW_TOKENS
