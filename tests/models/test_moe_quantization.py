"""int8/int4 experts on the tiny GLM-4.5 and Qwen3-MoE: the engine computes what transformers computes with weights
the compressed-tensors package quantized and dequantized itself (no code of the engine's builds that reference),
routes every token to the same experts, reads a compressed-tensors checkpoint the package wrote and one
``autoglm quantize`` wrote, and keeps no float copy of the experts it quantized."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file
from torch import nn
from transformers import AutoModelForCausalLM

from autoglm import LLM, SamplingParams
from autoglm.models import ModelConfig, load_model
from autoglm.models.expert_choices import record_expert_choices
from autoglm.models.expert_method import UnquantizedExpertMethod
from autoglm.models.expert_method.quantize_at_load import QuantizeAtLoadExpertMethod
from autoglm.models.fused_experts import FusedExperts
from autoglm.models.linear_method.int_weights import GroupSizeError, IntWeightFormat
from autoglm.models.linear_method import WeightQuantization, with_int_weights
from autoglm.models.linear_method.selection import LinearMethods, process_weights_after_loading
from autoglm.models.linear_method.int_kernels import INT8_FUSED_MAX_ROWS
from autoglm.models.parameter_count import count_active_parameters, count_parameters
from autoglm.models.quantization_config import parse_quantization_config
from autoglm.models.weight_loading import load_checkpoint_weights
from autoglm.quantize.writer import quantize_checkpoint
from tests.engine.reference import greedy_reference
from tests.models.logit_parity import prompt_ids, reference_logprobs
from tests.models.quantized_checkpoints import package_args, package_scales
from tests.tiny_models import make_tiny_checkpoint

# float32 activations on both sides: the integer kernels differ from the dequantized float weights only in the
# order they sum in (the same bound as the dense models' quantized layers).
LOGPROB_TOLERANCE = 1e-4
GROUP_SIZE_INT4 = 32  # divides the tiny models' hidden (64) and expert intermediate (32) sizes
CASES = {"int8-glm4_moe": (8, None, "glm4_moe"), "int4-glm4_moe": (4, GROUP_SIZE_INT4, "glm4_moe"),
         "int8-qwen3_moe": (8, None, "qwen3_moe"), "int4-qwen3_moe": (4, GROUP_SIZE_INT4, "qwen3_moe")}
ROUTER_IGNORE = "re:.*mlp.gate$"  # llm-compressor's recipes for these models keep the routers in full precision


class ExpertsLayer(nn.Module):
    """A parent, so that the experts' checkpoint names read ``experts.gate_up_proj``."""

    def __init__(self, method) -> None:
        super().__init__()
        self.experts = FusedExperts(8, 2, 64, 32, method)


@pytest.mark.parametrize("bits,group_size", [(8, None), (8, 32), (4, 32)])
@pytest.mark.parametrize("fused_dtype", [None, torch.bfloat16])
def test_a_layer_of_quantized_experts_equals_the_packages_dequantized_experts_at_any_rows_per_expert(
        bits, group_size, fused_dtype):
    """Experts 0 and 1 take more rows than the fused int8 op's limit, the others one or none; bfloat16 activations
    in the fused ops (a bfloat16 checkpoint computed in float32) round as the reference's are rounded here."""
    generator = torch.Generator().manual_seed(0)
    weights = {"experts.gate_up_proj": torch.randn(8, 64, 64, generator=generator) * 0.2,
               "experts.down_proj": torch.randn(8, 64, 32, generator=generator) * 0.2}
    quantized = ExpertsLayer(QuantizeAtLoadExpertMethod(IntWeightFormat(bits, group_size), fused_dtype))
    load_checkpoint_weights(quantized, weights.items())
    process_weights_after_loading(quantized)
    reference = ExpertsLayer(UnquantizedExpertMethod())
    dequantized = {name: torch.stack([package_fake_quantized(weight, bits, group_size) for weight in stacked])
                   for name, stacked in weights.items()}
    load_checkpoint_weights(reference, dequantized.items())
    num_tokens = 2 * INT8_FUSED_MAX_ROWS + 4
    topk_ids = torch.tensor([[0, 1]] * (num_tokens - 4) + [[2, 3], [4, 5], [5, 3], [2, 4]])
    topk_weights = torch.rand(num_tokens, 2, generator=generator)
    hidden = torch.randn(num_tokens, 64, generator=generator)
    if fused_dtype is not None:
        hidden = hidden.to(fused_dtype).float()
    with torch.inference_mode():
        got = quantized.experts(hidden, topk_ids, topk_weights)
        expected = reference.experts(hidden, topk_ids, topk_weights)
    tolerance = 1e-5 if fused_dtype is None else 2e-2  # bfloat16 products and intermediates: ~2^-8 relative
    assert (got - expected).abs().max() <= tolerance * expected.abs().max()


def package_fake_quantized(weight: torch.Tensor, bits: int, group_size: int | None) -> torch.Tensor:
    """The package's own quantize-then-dequantize of a ``[out, in]`` weight, with its own scales."""
    from compressed_tensors.quantization.lifecycle.forward import fake_quantize

    args = package_args(bits, group_size)
    return fake_quantize(weight, *package_scales(weight, args), args)


def save_dequantized_moe_reference(model_dir: Path, bits: int, group_size: int | None, out_dir: Path) -> Path:
    """``model_dir`` with every projection but the LM head, each routed expert's included, holding its
    package-dequantized weight; the routers untouched."""
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
    with torch.no_grad():
        for name, module in model.named_modules():
            if isinstance(module, nn.Linear) and name != "lm_head":
                module.weight.copy_(package_fake_quantized(module.weight, bits, group_size))
            for stacked_name in ("gate_up_proj", "down_proj"):  # transformers' experts: [experts, out, in]
                stacked = getattr(module, stacked_name, None)
                if isinstance(stacked, nn.Parameter) and stacked.dim() == 3:
                    for expert_weight in stacked:
                        expert_weight.copy_(package_fake_quantized(expert_weight, bits, group_size))
    model.save_pretrained(str(out_dir))
    return out_dir


def is_quantized_projection(name: str, tensor: torch.Tensor) -> bool:
    return tensor.dim() == 2 and name.endswith("proj.weight")


def save_package_compressed(model_dir: Path, bits: int, group_size: int | None, out_dir: Path) -> Path:
    """The per-expert checkpoint compressed by the package's own compressor, tensor by tensor, under the names
    it gives a Qwen3-MoE (``experts.3.gate_proj.weight_packed``, ``weight_shape``, ``weight_scale``)."""
    from compressed_tensors.compressors import IntQuantizationCompressor, PackedQuantizationCompressor
    from compressed_tensors.quantization import QuantizationConfig, QuantizationScheme

    args = package_args(bits, group_size)
    scheme = QuantizationScheme(targets=["Linear"], weights=args)
    compressor = PackedQuantizationCompressor if bits == 4 else IntQuantizationCompressor
    out_dir.mkdir()
    for file in model_dir.iterdir():
        if file.suffix != ".safetensors" and file.name != "config.json":
            (out_dir / file.name).write_bytes(file.read_bytes())
    weights = {}
    for file in model_dir.glob("*.safetensors"):
        for name, tensor in load_file(str(file)).items():
            if not is_quantized_projection(name, tensor):
                weights[name] = tensor
                continue
            scale, zero_point = package_scales(tensor, args)
            module = name.removesuffix(".weight")
            state = {"weight": tensor, "weight_scale": scale, "weight_zero_point": zero_point}
            weights.update({f"{module}.{key}": value.contiguous()
                            for key, value in compressor.compress(state, scheme).items()})
    save_file(weights, str(out_dir / "model.safetensors"))
    storage = "pack-quantized" if bits == 4 else "int-quantized"
    quantization = QuantizationConfig(config_groups={"group_0": scheme}, ignore=["lm_head", ROUTER_IGNORE],
                                      format=storage, quantization_status="compressed")
    config = json.loads((model_dir / "config.json").read_text())
    config["quantization_config"] = quantization.model_dump(mode="json")
    (out_dir / "config.json").write_text(json.dumps(config))
    return out_dir


def quantized_engine_model(model_dir: Path, bits: int | None = None, group_size: int | None = None) -> nn.Module:
    """The engine's model of ``model_dir``, quantized at load time to ``bits`` (None: as the checkpoint is)."""
    config = ModelConfig.from_pretrained(model_dir)
    requested = None if bits is None else WeightQuantization.from_settings(f"int{bits}", group_size)
    methods = with_int_weights(LinearMethods(), config, requested, torch.float32, torch.float32)
    model, _ = load_model(model_dir, torch.float32, torch.device("cpu"), config, methods)
    return model


def logprobs_and_routing(model: nn.Module, input_ids: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    positions = torch.arange(input_ids.shape[0])
    with torch.inference_mode(), record_expert_choices(model) as recorded:
        logprobs = model.compute_logits(model(input_ids, positions)).log_softmax(-1)
    return logprobs, {name: calls[0].topk_ids for name, calls in recorded.items()}


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory) -> dict[str, Path]:
    """Each family's float checkpoint, and its package-dequantized references, made once for the module."""
    folders = {}
    for family in ("glm4_moe", "qwen3_moe"):
        folders[family] = make_tiny_checkpoint(family, tmp_path_factory.mktemp(family))
    for case, (bits, group_size, family) in CASES.items():
        folders[case] = save_dequantized_moe_reference(folders[family], bits, group_size,
                                                       tmp_path_factory.mktemp(f"{case}-reference"))
    return folders


@pytest.mark.parametrize("case", CASES)
def test_quantized_experts_match_the_packages_dequantized_reference(case, checkpoints):
    bits, group_size, family = CASES[case]
    input_ids = prompt_ids(ModelConfig.from_pretrained(checkpoints[family]).vocab_size)
    quantized, routing = logprobs_and_routing(quantized_engine_model(checkpoints[family], bits, group_size), input_ids)
    _, reference_routing = logprobs_and_routing(quantized_engine_model(checkpoints[case]), input_ids)
    reference = reference_logprobs(checkpoints[case], input_ids, torch.arange(input_ids.shape[0]))
    assert (quantized - reference).abs().max().item() < LOGPROB_TOLERANCE
    assert routing.keys() == reference_routing.keys() and routing
    for router, topk_ids in routing.items():
        assert torch.equal(topk_ids, reference_routing[router]), f"{router} chose other experts"


def test_greedy_tokens_through_the_engine_match_the_dequantized_reference(checkpoints):
    prompts = [[5, 17, 42], [7] * 9, list(range(3, 40))]
    reference = greedy_reference(checkpoints["int8-qwen3_moe"], prompts, 12)
    llm = LLM(model=str(checkpoints["qwen3_moe"]), dtype="float32", device="cpu", quantization="int8")
    params = SamplingParams(temperature=0.0, max_tokens=12, ignore_eos=True)
    outputs = llm.generate(prompts, params, use_tqdm=False)
    assert [output.outputs[0].token_ids for output in outputs] == reference.token_ids


@pytest.mark.parametrize("case", ["int8-qwen3_moe", "int4-glm4_moe"])
def test_package_compressed_moe_checkpoint_matches_its_dequantized_reference(case, checkpoints, tmp_path):
    bits, group_size, family = CASES[case]
    compressed_dir = save_package_compressed(checkpoints[family], bits, group_size, tmp_path / "compressed")
    input_ids = prompt_ids(ModelConfig.from_pretrained(checkpoints[family]).vocab_size)
    logprobs, _ = logprobs_and_routing(quantized_engine_model(compressed_dir), input_ids)
    reference = reference_logprobs(checkpoints[case], input_ids, torch.arange(input_ids.shape[0]))
    assert (logprobs - reference).abs().max().item() < LOGPROB_TOLERANCE


def test_autoglm_quantize_writes_a_moe_checkpoint_that_loads_as_quantize_at_load_runs(checkpoints, tmp_path):
    int4 = WeightQuantization.from_settings("int4", GROUP_SIZE_INT4)
    out = quantize_checkpoint(checkpoints["qwen3_moe"], tmp_path / "int4", int4)
    assert ModelConfig.from_pretrained(out).quantization.weight_format == IntWeightFormat(4, GROUP_SIZE_INT4)
    input_ids = prompt_ids(ModelConfig.from_pretrained(out).vocab_size)
    written, _ = logprobs_and_routing(quantized_engine_model(out), input_ids)
    at_load, _ = logprobs_and_routing(quantized_engine_model(checkpoints["qwen3_moe"], 4, GROUP_SIZE_INT4), input_ids)
    assert torch.equal(written, at_load)  # the same scales and values either way
    with pytest.raises(GroupSizeError, match="'mlp.experts.*.down_proj': quantization group size 64 does not divide"):
        quantize_checkpoint(checkpoints["qwen3_moe"], tmp_path / "bad", WeightQuantization.from_settings("int4", 64))


def test_quantized_experts_keep_no_float_copy_and_count_as_the_float_model(checkpoints):
    float_model = quantized_engine_model(checkpoints["glm4_moe"])
    model = quantized_engine_model(checkpoints["glm4_moe"], 4, GROUP_SIZE_INT4)
    layers = [module for module in model.modules() if isinstance(module, FusedExperts)]
    float_layers = [module for module in float_model.modules() if isinstance(module, FusedExperts)]
    assert layers and all(not list(layer.parameters()) for layer in layers)
    float_weights = sum(parameter.numel() for layer in float_layers for parameter in layer.parameters())
    scales = sum(buffer.numel() for layer in layers for buffer in layer.buffers() if buffer.is_floating_point())
    assert 0 < scales <= float_weights // GROUP_SIZE_INT4 * 2  # a scale (and a zero) per group: no float weights
    assert count_parameters(model) == count_parameters(float_model)
    assert count_active_parameters(model) == count_active_parameters(float_model)


def test_a_group_size_that_does_not_divide_the_experts_is_named(checkpoints):
    with pytest.raises(GroupSizeError, match="layer 'model.layers.0.mlp.experts': quantization group size 64 does "
                                             "not divide the input size 32"):
        quantized_engine_model(checkpoints["qwen3_moe"], 4, 64)


@pytest.mark.parametrize("ignore,accepted", [
    (["lm_head", "re:.*mlp.gate$"], True),
    (["lm_head", "model.layers.0.mlp.gate", "model.layers.2.mlp.gate"], True),
    (["re:.*gate.*"], False),  # would leave the gate projections unquantized too
    (["model.layers.0.mlp.gate_proj"], False),
])
def test_a_checkpoint_may_leave_only_its_routers_and_lm_head_unquantized(ignore, accepted):
    config = {"quant_method": "compressed-tensors", "format": "int-quantized", "ignore": ignore,
              "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
                  "num_bits": 8, "type": "int", "symmetric": True, "strategy": "channel"}}}}
    if accepted:
        assert parse_quantization_config(config, "config.json").weight_format == IntWeightFormat(8)
    else:
        with pytest.raises(ValueError, match="'ignore' may name only 'lm_head' and a mixture-of-experts model's "
                                             "routers"):
            parse_quantization_config(config, "config.json")
