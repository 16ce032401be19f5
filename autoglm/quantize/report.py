"""What quantizing a checkpoint costs: each layer's error, the next-token distributions' drift, perplexity.

Per layer: the relative L2 error of the weight, and of the layer's output on calibration text (the
float model's own activations fed to both weights). Per model: top-1 agreement and mean KL divergence
of the next-token distributions, float model against its dequantized copy (which the engine's
int8/int4 methods equal: see tests/models/test_quantization_parity.py; for w8a8/w4a8 the copy's
quantized layers also round their inputs to int8 per token, as the engine does), over up to
:data:`AGREEMENT_POSITIONS` positions; and the engine's perplexity on the text before and after.
"""
from __future__ import annotations

import copy
import math
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from autoglm.engine.tokenize import encode_text
from autoglm.models.linear_method import WeightQuantization
from autoglm.models.linear_method.int_activation_weights import quantize_activations
from autoglm.models.linear_method.int_weights import dequantize, quantize
from autoglm.perplexity import PerplexityResult
from autoglm.quantize.writer import quantized_linears

AGREEMENT_POSITIONS = 2000


@dataclass(frozen=True)
class LayerError:
    name: str
    weight_relative_error: float
    output_relative_error: float


@dataclass(frozen=True)
class Agreement:
    positions: int
    top1_agreement: float  # share of positions whose likeliest next token is the same
    mean_kl_divergence: float  # KL(float || quantized) of the next-token distributions, nats


@dataclass(frozen=True)
class QuantizationReport:
    method: str
    group_size: int | None
    quantize_lm_head: bool
    layers: list[LayerError]  # worst output error first
    agreement: Agreement
    before: PerplexityResult
    after: PerplexityResult

    @property
    def perplexity_change(self) -> float:
        """Relative change of perplexity per token, after against before."""
        return math.exp(self.after.loss_per_token - self.before.loss_per_token) - 1

    def to_dict(self) -> dict[str, Any]:
        scores = {side: {**asdict(result), "loss_per_token": result.loss_per_token,
                         "loss_per_character": result.loss_per_character}
                  for side, result in (("before", self.before), ("after", self.after))}
        return {**asdict(self), **scores, "perplexity_change": self.perplexity_change}


def layer_input(x: torch.Tensor, quantization: WeightQuantization) -> torch.Tensor:
    """What a quantized projection multiplies: ``x``, or for w8a8/w4a8 ``x`` rounded to int8 per token."""
    if not quantization.int8_activations:
        return x
    q, scale = quantize_activations(x)
    return (q * scale).to(x.dtype)


def dequantized_copy(model: PreTrainedModel, quantization: WeightQuantization) -> PreTrainedModel:
    """A copy of ``model`` whose quantized projections hold their dequantized values: the float reference."""
    reference = copy.deepcopy(model)
    with torch.no_grad():
        for module in quantized_linears(reference, quantization).values():
            group_size = quantization.weight_format.group_size_for(module.in_features)
            q, scale = quantize(module.weight, quantization.weight_format, group_size)
            module.weight.copy_(dequantize(q, scale, module.weight.dtype))
            if quantization.int8_activations:
                module.register_forward_pre_hook(lambda _, inputs: (layer_input(inputs[0], quantization),))
    return reference


def token_windows(tokenizer: PreTrainedTokenizerBase, text: str, window: int, max_tokens: int) -> Iterator[torch.Tensor]:
    """The text's first ``max_tokens`` tokens, in back-to-back windows of at most ``window``."""
    ids = torch.tensor(encode_text(tokenizer, text)[:max_tokens])
    for start in range(0, len(ids), window):
        yield ids[start : start + window].unsqueeze(0)


def layer_errors(model: PreTrainedModel, reference: PreTrainedModel, quantization: WeightQuantization,
                 windows: list[torch.Tensor]) -> list[LayerError]:
    """Each quantized layer's weight and output errors on ``windows``, worst output first."""
    float_layers = quantized_linears(model, quantization)
    quantized_weights = {name: module.weight for name, module in quantized_linears(reference, quantization).items()}
    squared = {name: [0.0, 0.0] for name in float_layers}  # summed ||y - y_q||^2 and ||y||^2

    def hook(name: str):
        def record(module: nn.Linear, inputs: tuple[torch.Tensor, ...], output: torch.Tensor) -> None:
            quantized_output = F.linear(layer_input(inputs[0], quantization), quantized_weights[name], module.bias)
            squared[name][0] += float((output.float() - quantized_output.float()).square().sum())
            squared[name][1] += float(output.float().square().sum())
        return record

    handles = [module.register_forward_hook(hook(name)) for name, module in float_layers.items()]
    try:
        with torch.no_grad():
            for ids in windows:
                model(ids)
    finally:
        for handle in handles:
            handle.remove()
    errors = [LayerError(name, _relative(module.weight, quantized_weights[name]),
                         (squared[name][0] / max(squared[name][1], 1e-30)) ** 0.5)
              for name, module in float_layers.items()]
    return sorted(errors, key=lambda error: error.output_relative_error, reverse=True)


def agreement(model: PreTrainedModel, reference: PreTrainedModel, windows: list[torch.Tensor]) -> Agreement:
    same, kl, positions = 0, 0.0, 0
    with torch.no_grad():
        for ids in windows:
            expected = F.log_softmax(model(ids).logits[0].float(), dim=-1)
            actual = F.log_softmax(reference(ids).logits[0].float(), dim=-1)
            same += int((expected.argmax(-1) == actual.argmax(-1)).sum())
            kl += float(F.kl_div(actual, expected, log_target=True, reduction="sum"))
            positions += ids.shape[1]
    return Agreement(positions, same / positions, kl / positions)


def _relative(expected: torch.Tensor, actual: torch.Tensor) -> float:
    expected, actual = expected.detach().float(), actual.detach().float()
    return float((expected - actual).norm() / expected.norm().clamp_min(1e-30))


def compare_weights(model_dir: str | Path, quantization: WeightQuantization, tokenizer: PreTrainedTokenizerBase,
                    text: str, window: int) -> tuple[list[LayerError], Agreement]:
    """Layer errors and next-token agreement of the float checkpoint against its quantized weights."""
    from autoglm.quantize.writer import load_float_model

    model = load_float_model(model_dir)
    reference = dequantized_copy(model, quantization)
    windows = list(token_windows(tokenizer, text, window, AGREEMENT_POSITIONS))
    return layer_errors(model, reference, quantization, windows), agreement(model, reference, windows)


def measure_report(model_dir: Path, out_dir: Path, quantization: WeightQuantization, method: str,
                   text: str, before: PerplexityResult | None = None,
                   engine_settings: dict[str, Any] | None = None) -> QuantizationReport:
    """The report of ``out_dir``, written from ``model_dir``: perplexities are the engine's, on each checkpoint
    (``before``, where given, is ``model_dir``'s already measured on ``text``; ``engine_settings`` are the
    engine's for ``out_dir``, e.g. w8a8 quantizing a float checkpoint as it loads)."""
    from transformers import AutoTokenizer

    from autoglm.llm import LLM
    from autoglm.models import ModelConfig
    from autoglm.perplexity import evaluate_perplexity

    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    window = ModelConfig.from_pretrained(model_dir).max_position_embeddings
    layers, next_tokens = compare_weights(model_dir, quantization, tokenizer, text, window)
    before = before or evaluate_perplexity(LLM(model=str(model_dir)), text)
    after = evaluate_perplexity(LLM(model=str(out_dir), **(engine_settings or {})), text)
    return QuantizationReport(method, quantization.weight_format.group_size, quantization.quantize_lm_head,
                              layers, next_tokens, before, after)


def report_lines(report: QuantizationReport) -> list[str]:
    """The report as a reader wants it: the model's numbers first, then every layer, worst first."""
    lines = [
        f"perplexity per token: {math.exp(report.before.loss_per_token):.3f} before, "
        f"{math.exp(report.after.loss_per_token):.3f} after ({report.perplexity_change:+.2%}); "
        f"loss per character {report.before.loss_per_character:.4f} -> {report.after.loss_per_character:.4f} nats",
        f"next token over {report.agreement.positions} positions: top-1 agreement "
        f"{report.agreement.top1_agreement:.2%}, mean KL divergence {report.agreement.mean_kl_divergence:.5f} nats",
        f"{'layer':<48} {'weight rel. L2':>14} {'output rel. L2':>14}",
    ]
    lines += [f"{error.name:<48} {error.weight_relative_error:>14.5f} {error.output_relative_error:>14.5f}"
              for error in report.layers]
    return lines
