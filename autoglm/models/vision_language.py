"""A decoder with a vision encoder beside it: what GLM-4.1V and Qwen2.5-VL share.

Each image placeholder token's input embedding is replaced by a row of the encoder's output; the
runner encodes images apart (:meth:`encode_images`) and hands the rows in with the step. A step
whose rows have three-axis positions ``[3, T]`` turns each frequency group by its own axis; a text
step's 1-D positions stand on all three axes, which turns exactly as the plain rotary would.
The families differ in their decoder's :class:`DecoderSpec`, their encoder and how its
checkpoint tensors are named.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator
import torch
from torch import nn

from autoglm.models.decoder import DecoderForCausalLM, DecoderSpec
from autoglm.models.image_embeddings import ImageEmbeddings
from autoglm.models.linear_method import LinearMethods
from autoglm.models.model_config import ModelConfig
from autoglm.models.mrope import MROPE_AXES, MultimodalRotaryEmbedding
from autoglm.models.pipeline_stage import OnAnotherStage
from autoglm.models.vision_towers import vision_tower_config
from autoglm.models.vision_weights import VISION_PREFIXES, decoder_name, vision_tower_weights
from autoglm.multimodal import ImageInput

_ENCODER_NAME = "visual"


class VisionLanguageModel(DecoderForCausalLM):
    """The decoder (``model``, ``lm_head``) and the vision encoder (``visual``)."""

    def __init__(self, config: ModelConfig, spec: DecoderSpec, linear_methods: LinearMethods,
                 encoder_class: type[nn.Module]) -> None:
        """``encoder_class`` is built from the tower's settings and the layers' linear method."""
        if config.vision is None or config.rope.mrope_section is None:
            raise ValueError(f"{config.architecture} needs a 'vision_config' and an 'mrope_section' in its text "
                             "config's rotary settings; the checkpoint's config.json lacks one")
        super().__init__(config, spec, linear_methods)
        self.model.rotary_emb = MultimodalRotaryEmbedding(config, interleaved=spec.interleaved_rotary,
                                                          mrope_section=config.rope.mrope_section)
        self.vision_config = vision_tower_config(config.architecture, config.vision.vision_config)
        # The first pipeline stage embeds the tokens, so it alone puts image rows among them.
        self.visual = (encoder_class(self.vision_config, linear_methods.layers) if self.encodes_images
                       else OnAnotherStage())

    @property
    def encodes_images(self) -> bool:
        """Whether this process holds the encoder: everywhere but on a pipeline stage after the first."""
        return self.model.parts.first

    def enable_native_decode(self, max_rows: int) -> None:
        """Never: the native decode step turns 1-D positions only, so every step runs layer by layer."""

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor,
                images: ImageEmbeddings | None = None) -> torch.Tensor:
        """Hidden states ``[T, hidden]``; ``positions`` ``[T]`` (text) or ``[3, T]`` (temporal, height, width),
        and ``images`` the encoder rows that stand for the step's placeholder tokens."""
        num_tokens = input_ids.shape[0]
        if input_ids.dim() != 1 or positions.shape not in ((num_tokens,), (MROPE_AXES, num_tokens)):
            raise ValueError(f"input_ids must be [num_tokens] and positions [num_tokens] or [3, num_tokens], got "
                             f"{tuple(input_ids.shape)} and {tuple(positions.shape)}")
        if positions.dim() == 1:
            positions = positions.expand(MROPE_AXES, -1)
        if not self.encodes_images:  # a later pipeline stage: its input is the stage before's stream
            return self.model(input_ids, positions)
        embeddings = self.model.embed_tokens(input_ids)
        if images is not None:
            embeddings = embeddings.index_copy(0, images.token_indices, images.rows.to(embeddings.dtype))
        return self.model(input_ids, positions, embeddings)

    def encode_images(self, images: list[ImageInput]) -> list[torch.Tensor]:
        """Each image's rows ``[t * h * w / merge^2, hidden]``, all images encoded in one call."""
        device = self.model.embed_tokens.weight.device
        pixel_values = torch.cat([image.pixel_values for image in images]).to(device)
        grid_thw = torch.tensor([image.grid_thw for image in images], dtype=torch.long)
        rows = self.visual(pixel_values, grid_thw.to(device))
        window = self.vision_config.spatial_merge_size ** 2
        return list(rows.split([int(grid.prod()) // window for grid in grid_thw]))

    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> None:
        """Fill the decoder and the encoder from one pass over the full checkpoint."""
        super().load_weights(self._engine_names(weights))

    def vision_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> Iterator[tuple[str, torch.Tensor]]:
        """The vision tower's checkpoint tensors under the encoder's names; a family whose encoder reshapes
        more than the patch embedding says so here."""
        return vision_tower_weights(weights, self.vision_config)

    def _engine_names(self, weights: Iterable[tuple[str, torch.Tensor]]) -> Iterator[tuple[str, torch.Tensor]]:
        """Checkpoint tensors under this model's names: the decoder's prefix made ``model.``, the vision
        tower's moved under ``visual.``."""
        for name, tensor in weights:
            if name.startswith(VISION_PREFIXES):
                for encoder_name, encoder_tensor in self.vision_weights([(name, tensor)]):
                    yield f"{_ENCODER_NAME}.{encoder_name}", encoder_tensor
            else:
                yield decoder_name(name), tensor
