"""A ``bench roofline`` results file: a machine's limits, and the fastest a model could run within them.

Decoding one sequence reads every weight once per token, so batch-1 decode cannot beat
memory bandwidth / weight bytes per token. A large batch shares that read and is limited by
matrix-multiply speed instead: 2 FLOPs per weight per token. Both bounds ignore attention
over the KV cache, small at short contexts. The embedding table is a row lookup, not a
matmul, so it counts in neither bound; the lm_head, tied to it or not, counts in both.
Quantized weights (:class:`WeightFormat`) are read as their integer bytes plus their scales.
"""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open

from autoglm.bench.results.report import machine_info
from autoglm.models.linear_method.int_selection import INT4_DEFAULT_GROUP_SIZE
from autoglm.models.loader import safetensors_files

EMBEDDING_SUFFIX = "embed_tokens.weight"
LM_HEAD_SUFFIX = "lm_head.weight"
ROUTED_EXPERT_MARK = ".mlp.experts."  # per-expert (``mlp.experts.3.up_proj.weight``) and fused names alike
EXPERT_COUNT_KEYS = ("num_experts", "n_routed_experts", "num_local_experts")
ROUTER_SUFFIX = "mlp.gate.weight"  # a mixture of experts' router: every token reads it, never quantized


@dataclass(frozen=True)
class LinearPathRate:
    """One path on one ``[m, k] x [n, k]^T`` product."""

    path: str  # "torch" or a kernel's name
    activation_dtype: str
    weight_dtype: str
    m: int
    k: int
    n: int
    seconds: float

    @property
    def weight_bytes_per_s(self) -> float:
        return self.n * self.k * getattr(torch, self.weight_dtype).itemsize / self.seconds

    @property
    def flops_per_s(self) -> float:
        return 2 * self.m * self.k * self.n / self.seconds


@dataclass(frozen=True)
class LinearPaths:
    rates: list[LinearPathRate]
    row_limits: dict[str, int]  # kernel name: rows up to which it beat PyTorch on the batch shape
    missing: dict[str, list[str]]  # kernel name: the CPU flags it needs and this CPU lacks


@dataclass(frozen=True)
class MatmulRate:
    dtype: str
    m: int
    k: int
    n: int
    flops_per_s: float


# What one weight and one scale of each integer format cost a decode step on the CPU: int8 values with
# one 16-bit scale per group; PyTorch's int4 packing (two weights a byte) with a 16-bit scale and zero per group.
INT_WEIGHT_BYTES = {"int8": 1.0, "int4": 0.5}
INT_SCALE_BYTES = {"int8": 2, "int4": 4}
SMALL_TENSOR_DTYPE = "bfloat16"  # norms and biases beside quantized weights stay in the 16-bit dtype


@dataclass(frozen=True)
class WeightFormat:
    """What a decode step reads the weights as: a float dtype, or ``int8``/``int4`` with one scale per
    ``group_size`` input columns (None: one per output row); the LM head in ``lm_head_dtype`` (None: the same)."""

    dtype: str
    group_size: int | None = None
    lm_head_dtype: str | None = None

    @classmethod
    def of(cls, value: WeightFormat | str) -> WeightFormat:
        return value if isinstance(value, WeightFormat) else cls(value)

    @property
    def head_dtype(self) -> str:
        return self.lm_head_dtype or self.dtype

    @property
    def quantized(self) -> bool:
        return self.dtype in INT_WEIGHT_BYTES or self.head_dtype in INT_WEIGHT_BYTES

    @property
    def label(self) -> str:
        """``bfloat16``; ``int4 g128, bfloat16 head``; ``int8, int8 head``."""
        if not self.quantized and self.head_dtype == self.dtype:
            return self.dtype
        grouped = f" g{self.group_size}" if self.group_size is not None and self.dtype in INT_WEIGHT_BYTES else ""
        return f"{self.dtype}{grouped}, {self.head_dtype} head"


@dataclass(frozen=True)
class MatrixSizes:
    """Weight matrices: their parameters, and their output rows (one scale each when quantized per row)."""

    params: int
    rows: int

    def bytes_as(self, dtype: str, group_size: int | None) -> float:
        if dtype not in INT_WEIGHT_BYTES:
            return self.params * getattr(torch, dtype).itemsize
        scales = self.rows if group_size is None else self.params // group_size
        return self.params * INT_WEIGHT_BYTES[dtype] + scales * INT_SCALE_BYTES[dtype]


@dataclass(frozen=True)
class ModelWeights:
    """Parameter counts of a checkpoint, read from its safetensors headers (no weight is loaded)."""

    total_params: int
    embedding_params: int
    per_token_params: int  # weights every token multiplies: all but the embedding table, lm_head included; of
    # a mixture of experts, its routed experts' tensors at the share one token reads
    projections: MatrixSizes | None = None  # the decoder's linear layers: what quantization turns to integers
    lm_head: MatrixSizes | None = None  # the embedding's when tied

    def bytes_per_token(self, weight_format: WeightFormat | str) -> float:
        """Bytes a decode step reads: every per-token weight once, integer ones with their scales."""
        weight_format = WeightFormat.of(weight_format)
        if not weight_format.quantized and weight_format.head_dtype == weight_format.dtype:
            return self.per_token_params * getattr(torch, weight_format.dtype).itemsize
        if self.projections is None or self.lm_head is None:
            raise ValueError(f"the weights were counted without their matrix sizes, which {weight_format.label} "
                             "weights need; measure them again with `autoglm bench roofline --model`")
        small_params = self.per_token_params - self.projections.params - self.lm_head.params
        small_dtype = weight_format.dtype if weight_format.dtype not in INT_WEIGHT_BYTES else SMALL_TENSOR_DTYPE
        return (self.projections.bytes_as(weight_format.dtype, weight_format.group_size)
                + self.lm_head.bytes_as(weight_format.head_dtype, weight_format.group_size)
                + small_params * getattr(torch, small_dtype).itemsize)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelWeights:
        matrices = {name: MatrixSizes(**data[name]) for name in ("projections", "lm_head") if data.get(name)}
        return cls(**{**data, **matrices})


def routed_expert_share(model_dir: str | Path) -> float:
    """The share of a routed expert tensor one token reads: top-k of the layer's experts in a mixture-of-experts
    checkpoint (``num_experts_per_tok`` over its expert count), 1 in a dense one."""
    config = json.loads((Path(model_dir) / "config.json").read_text())
    config = config.get("text_config") or config
    experts = next((config[key] for key in EXPERT_COUNT_KEYS if config.get(key)), None)
    return config["num_experts_per_tok"] / experts if experts else 1.0


def count_weights(model_dir: str | Path) -> ModelWeights:
    """A checkpoint without an ``lm_head`` tensor ties it to the embedding, which it then reads per token. A token
    reads only its routed experts' weights: those tensors count per token at ``routed_expert_share``."""
    shapes: dict[str, list[int]] = {}
    for file in safetensors_files(Path(model_dir)):
        with safe_open(str(file), framework="pt") as reader:
            shapes.update({name: reader.get_slice(name).get_shape() for name in reader.keys()})
    share = routed_expert_share(model_dir)
    sizes = {name: math.prod(shape) for name, shape in shapes.items()}
    read = {name: size * share if ROUTED_EXPERT_MARK in name else size for name, size in sizes.items()}
    total = sum(sizes.values())
    embeddings = [name for name in sizes if name.endswith(EMBEDDING_SUFFIX)]
    heads = [name for name in sizes if name.endswith(LM_HEAD_SUFFIX)] or embeddings
    embedding = sum(sizes[name] for name in embeddings)
    tied_lm_head = embedding if heads == embeddings else 0
    projections = [name for name, shape in shapes.items() if len(shape) in (2, 3) and name not in embeddings
                   and name not in heads and not name.endswith(ROUTER_SUFFIX)]

    def matrices(names: list[str]) -> MatrixSizes:
        rows = sum(math.prod(shapes[name][:-1]) * (share if ROUTED_EXPERT_MARK in name else 1) for name in names)
        return MatrixSizes(round(sum(read[name] for name in names)), round(rows))

    per_token = round(sum(read.values())) - embedding + tied_lm_head
    return ModelWeights(total, embedding, per_token, matrices(projections), matrices(heads))


@dataclass(frozen=True)
class Roofline:
    """Measured limits of one device at one thread count, and the model they were applied to, if any."""

    device: str
    num_threads: int
    engine_dtype: str  # what the engine computes in on this device for the requested dtype
    read_bytes_per_s: float
    copy_bytes_per_s: float  # bytes read plus bytes written, as STREAM counts a copy
    matmuls: list[MatmulRate]
    model: str | None = None
    weights: ModelWeights | None = None
    linear_paths: LinearPaths | None = None  # on a CPU: every linear path's speed, and each kernel's row limit

    @property
    def dtypes(self) -> list[str]:
        return list(dict.fromkeys(rate.dtype for rate in self.matmuls))

    def best_matmul(self, dtype: str) -> MatmulRate:
        rates = [rate for rate in self.matmuls if rate.dtype == dtype]
        if not rates:
            raise ValueError(f"no {dtype} matmul was measured; measured: {', '.join(self.dtypes)}")
        return max(rates, key=lambda rate: rate.flops_per_s)

    def decode_bound(self, weights: ModelWeights, weight_format: WeightFormat | str) -> float:
        """Tokens/s of batch-1 decode if reading the weights were the only cost."""
        return self.read_bytes_per_s / weights.bytes_per_token(weight_format)

    def fastest_flops(self, dtype: str) -> float:
        """FLOP/s of the fastest way measured to multiply ``dtype`` activations: PyTorch's matmul, or on a CPU
        a compiled kernel of the same activation dtype where it was faster (its weights may be narrower)."""
        kernels = [rate.flops_per_s for rate in (self.linear_paths.rates if self.linear_paths else [])
                   if rate.activation_dtype == dtype and rate.m > 1]
        return max([self.best_matmul(dtype).flops_per_s, *kernels])

    def compute_bound(self, weights: ModelWeights, dtype: str) -> float:
        """Tokens/s of a batch large enough that only the matmuls' FLOPs count, at the fastest path's speed."""
        return self.fastest_flops(dtype) / (2 * weights.per_token_params)

    def decode_fraction(self, tokens_per_s: float, weights: ModelWeights, weight_format: WeightFormat | str) -> float:
        """How close a measured batch-1 decode rate came to its bandwidth bound."""
        return tokens_per_s / self.decode_bound(weights, weight_format)

    def weight_formats(self) -> list[WeightFormat]:
        """Each measured dtype; with the model's matrix sizes, int8 and int4 at the engine's default group
        sizes too, their LM head quantized or in the engine's dtype (their large batches compute in it)."""
        formats = [WeightFormat(dtype) for dtype in self.dtypes]
        if self.weights is not None and self.weights.projections is not None:
            for dtype, group_size in (("int8", None), ("int4", INT4_DEFAULT_GROUP_SIZE)):
                formats += [WeightFormat(dtype, group_size, head) for head in (self.engine_dtype, dtype)]
        return formats

    def bounds(self) -> dict[str, dict[str, float]]:
        if self.weights is None:
            return {}
        return {
            weight_format.label: {
                "weight_bytes_per_token": self.weights.bytes_per_token(weight_format),
                "decode_tokens_per_s": self.decode_bound(self.weights, weight_format),
                "batched_tokens_per_s": self.compute_bound(
                    self.weights, self.engine_dtype if weight_format.quantized else weight_format.dtype),
            }
            for weight_format in self.weight_formats()
        }

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "bounds": self.bounds(), "machine": machine_info()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Roofline:
        values = {field.name: data[field.name] for field in fields(cls) if field.name in data}
        values["matmuls"] = [MatmulRate(**rate) for rate in values["matmuls"]]
        if values.get("weights") is not None:
            values["weights"] = ModelWeights.from_dict(values["weights"])
        if values.get("linear_paths") is not None:
            paths = values["linear_paths"]
            values["linear_paths"] = LinearPaths([LinearPathRate(**rate) for rate in paths["rates"]],
                                                 paths["row_limits"], paths["missing"])
        return cls(**values)


def load_roofline(path: str | Path) -> Roofline:
    """A roofline saved by ``autoglm bench roofline --output-json``."""
    return Roofline.from_dict(json.loads(Path(path).read_text()))
