"""The mixture-of-experts settings of a checkpoint's ``config.json``: how many experts, how a token picks them,
and which layers have them.

GLM-4.5 (``Glm4MoeForCausalLM``) and Qwen3-MoE (``Qwen3MoeForCausalLM``) name the same ideas differently and
route differently (see ``moe_router``); both parse to one :class:`MoeConfig`. A key config.json leaves out
takes the value transformers' config class assumes for that family.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from autoglm.models.config_fields import ConfigFields

# How a token's experts are picked (see moe_router).
GROUPED_SIGMOID_ROUTER = "grouped_sigmoid"  # GLM-4.5
SOFTMAX_ROUTER = "softmax"  # Qwen3-MoE


@dataclass(frozen=True)
class MoeConfig:
    """A model's routed experts (the same in every sparse layer), its shared experts, and its layer layout."""

    num_experts: int  # n_routed_experts (GLM), num_experts or num_local_experts (Qwen3)
    num_experts_per_tok: int  # experts each token is routed to (top-k)
    moe_intermediate_size: int  # each expert's intermediate size
    router: str  # GROUPED_SIGMOID_ROUTER or SOFTMAX_ROUTER
    norm_topk_prob: bool  # the chosen experts' weights rescaled to sum to one
    num_shared_experts: int = 0  # n_shared_experts: one MLP of this many experts' width that every token passes
    num_groups: int = 1  # n_group: experts are cut into this many groups ...
    topk_groups: int = 1  # topk_group: ... and a token picks its experts from this many of them
    routed_scaling_factor: float = 1.0  # multiplies the routed experts' weights
    first_k_dense_replace: int = 0  # this many first layers keep a dense MLP
    decoder_sparse_step: int = 1  # with mlp_only_layers: layer i is sparse where (i + 1) % step == 0
    mlp_only_layers: tuple[int, ...] = ()  # layers that keep a dense MLP
    num_nextn_predict_layers: int = 0  # multi-token prediction layers the checkpoint holds after the decoder's

    def is_sparse(self, layer_index: int) -> bool:
        """Whether layer ``layer_index`` (from 0) routes to experts rather than running a dense MLP."""
        return (layer_index >= self.first_k_dense_replace and layer_index not in self.mlp_only_layers
                and (layer_index + 1) % self.decoder_sparse_step == 0)


def _glm4_moe(fields: ConfigFields, num_hidden_layers: int) -> MoeConfig:
    return MoeConfig(
        num_experts=fields.positive_int("n_routed_experts"),
        num_experts_per_tok=fields.positive_int("num_experts_per_tok"),
        moe_intermediate_size=fields.positive_int("moe_intermediate_size"),
        router=GROUPED_SIGMOID_ROUTER,
        norm_topk_prob=fields.flag("norm_topk_prob", True),
        num_shared_experts=fields.non_negative_int("n_shared_experts", 1),
        num_groups=fields.positive_int("n_group", 1),
        topk_groups=fields.positive_int("topk_group", 1),
        routed_scaling_factor=fields.positive_number("routed_scaling_factor", 1.0),
        first_k_dense_replace=fields.non_negative_int("first_k_dense_replace", 1),
        num_nextn_predict_layers=fields.non_negative_int("num_nextn_predict_layers", 1),
    )


def _qwen3_moe(fields: ConfigFields, num_hidden_layers: int) -> MoeConfig:
    # The hub's configs say num_experts; transformers 5 writes num_local_experts.
    count_key = "num_local_experts" if fields.data.get("num_experts") is None else "num_experts"
    return MoeConfig(
        num_experts=fields.positive_int(count_key),
        num_experts_per_tok=fields.positive_int("num_experts_per_tok"),
        moe_intermediate_size=fields.positive_int("moe_intermediate_size"),
        router=SOFTMAX_ROUTER,
        norm_topk_prob=fields.flag("norm_topk_prob", False),
        decoder_sparse_step=fields.positive_int("decoder_sparse_step", 1),
        mlp_only_layers=fields.indices("mlp_only_layers", num_hidden_layers),
    )


_PARSERS: dict[str, Callable[[ConfigFields, int], MoeConfig]] = {
    "Glm4MoeForCausalLM": _glm4_moe,
    "Qwen3MoeForCausalLM": _qwen3_moe,
}


def parse_moe_config(fields: ConfigFields, architecture: str, num_hidden_layers: int) -> MoeConfig | None:
    """The expert settings of a mixture-of-experts architecture; None for a dense one."""
    parser = _PARSERS.get(architecture)
    if parser is None:
        return None
    moe = parser(fields, num_hidden_layers)
    _check_routing(moe, fields.source)
    return moe


def _check_routing(moe: MoeConfig, source: str) -> None:
    """Refuse settings under which a token could not be given its experts."""
    if moe.num_experts_per_tok > moe.num_experts:
        raise ValueError(f"{source}: num_experts_per_tok ({moe.num_experts_per_tok}) must be at most the number of "
                         f"routed experts ({moe.num_experts})")
    if moe.router != GROUPED_SIGMOID_ROUTER:
        return
    if moe.num_experts % moe.num_groups or moe.num_experts // moe.num_groups < 2:
        raise ValueError(f"{source}: n_group ({moe.num_groups}) must divide n_routed_experts ({moe.num_experts}) "
                         "into groups of at least 2 experts (a group is ranked by its two best)")
    if moe.topk_groups > moe.num_groups:
        raise ValueError(f"{source}: topk_group ({moe.topk_groups}) must be at most n_group ({moe.num_groups})")
    reachable = moe.topk_groups * (moe.num_experts // moe.num_groups)
    if moe.num_experts_per_tok > reachable:
        raise ValueError(f"{source}: num_experts_per_tok ({moe.num_experts_per_tok}) must be at most the experts in "
                         f"topk_group groups ({reachable})")
