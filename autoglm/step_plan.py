"""The step plan: one engine step's work as plain data, handed from the engine to the runner.

It holds flat CPU tensors and lists only (no engine objects), so it pickles: it is what a
tensor-parallel worker would receive and what fixed graph buffers would be filled from. Rows are
sequences; a row carries ``query_lens[row]`` tokens, so a speculative step's several tokens per
row fit as well as a prefill chunk. Single-token rows come first.

Built ahead of time: an input token may be left as a placeholder whose id is "the token the
previous step sampled for row ``r``" (``deferred_positions``/``deferred_sources``), filled in on
the device by the runner, so the next plan need not wait for the previous step's ids to come back.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from autoglm.lora_adapter import LoRAAdapter
from autoglm.lora_request import LoRARequest
from autoglm.multimodal import ImageInput

ALL_TOKENS_ALLOWED = -1  # a token bitmask's int32 word with all 32 bits set


@dataclass(frozen=True)
class RowSampling:
    """How one sampled row picks its token: its request's settings, resolved to plain values.

    Randomness is carried as ``seed`` plus ``draw_index`` (how many tokens the row drew before)
    rather than as a ``torch.Generator``: a generator is state that would have to travel back and
    forth with every plan, whereas a seed and a counter fix each draw by themselves, so a seeded
    request's output depends on nothing else in the batch, on which process samples it, or on
    whether the plan was built before the previous step ended.
    """

    greedy: bool = False  # take the most likely token; the settings that shape a draw are ignored
    temperature: float = 1.0
    top_k: int = 0  # 0: every token
    top_p: float = 1.0
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    logit_bias: dict[int, float] = field(default_factory=dict)
    banned_token_ids: tuple[int, ...] = ()  # min_tokens not reached yet: its EOS and stop ids
    num_logprobs: int | None = None  # top-N log-probs to return; None: no log-probs at all
    seed: int = 0  # the engine gives every sequence one (an unseeded request's from the engine's own stream)
    draw_index: int = 0
    # The histories the penalties read; empty when no penalty needs them.
    prompt_token_ids: list[int] = field(default_factory=list)
    output_token_ids: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class PromptScoring:
    """Score prompt positions: the log-probability of each next prompt token given those before it."""

    first_token: int  # index in the flattened batch of the first scored position
    target_token_ids: list[int]  # the token that follows each scored position
    num_top: int  # top-N alternatives to return per position (0: none)


@dataclass(frozen=True)
class PoolingChunk:
    """A pooling row's share of this step: the hidden states of its ``num_tokens`` tokens from batch index
    ``first_token`` reduced as ``pooling_type`` says (MEAN: their sum; CLS: the first, where the chunk starts the
    prompt; LAST: the last, where it ends it). ``head`` then maps a LAST row: "hidden" keeps it, "logits" takes
    the model's logits of it (a classifier's), "token_pair" the logit of ``token_pair[1]`` minus ``token_pair[0]``."""

    first_token: int
    num_tokens: int
    pooling_type: str
    starts_prompt: bool
    ends_prompt: bool
    head: str = "hidden"
    token_pair: tuple[int, int] | None = None


@dataclass(frozen=True)
class ImageRows:
    """Rows of one encoded image that stand for a run of the step's tokens: the encoder's rows
    ``first_row..first_row + num_rows - 1`` of the image keyed ``key`` replace the input embeddings
    of the batch tokens from ``token_index`` on."""

    token_index: int
    key: bytes
    first_row: int
    num_rows: int


@dataclass(frozen=True)
class AdapterLoad:
    """A LoRA adapter the runner puts in slot ``slot`` before the step's forward, in place of what it held.
    ``adapter`` is the copy the engine read; a tensor-parallel worker gets None and reads ``request``'s folder."""

    slot: int
    request: LoRARequest
    adapter: LoRAAdapter | None = None


@dataclass(frozen=True)
class KVTransfers:
    """Whole KV blocks to move between the pool and the host tier before the step's forward pass: saves
    (a block the prefix cache evicted, copied out to a host slot) first, then blocks the disk tier holds (read
    into their slots from the files the engine staged), then restores (a slot copied into a fresh block), so
    that a block saved and reused as a restore's target in one step is read before it is written."""

    save_blocks: list[int] = field(default_factory=list)
    save_slots: list[int] = field(default_factory=list)
    save_hashes: list[bytes] = field(default_factory=list)  # each saved block's hash: its name on disk
    disk_read_slots: list[int] = field(default_factory=list)
    disk_read_sequences: list[int] = field(default_factory=list)  # the engine's name for each staged file
    disk_read_hashes: list[bytes] = field(default_factory=list)
    restore_slots: list[int] = field(default_factory=list)
    restore_blocks: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not (len(self.save_blocks) == len(self.save_slots) == len(self.save_hashes)
                and len(self.disk_read_slots) == len(self.disk_read_sequences) == len(self.disk_read_hashes)
                and len(self.restore_slots) == len(self.restore_blocks)):
            raise ValueError("KV transfers pair each block with one host slot: the save_, disk_read_ and "
                             "restore_ lists must each be of equal lengths")


@dataclass
class StepPlan:
    """Everything the runner needs for one forward pass and the sampling after it."""

    input_ids: torch.Tensor  # [T] long
    positions: torch.Tensor  # [T] long
    slot_mapping: torch.Tensor  # [T] long: KV cache slot of each token
    block_tables: torch.Tensor  # [B, max_blocks] long, padded with block 0
    block_size: int
    query_lens: list[int]  # [B]: tokens each row computes in this step
    seq_lens: list[int]  # [B]: each row's context length once this step's tokens are written
    row_ids: list[int]  # [B]: the sequence behind each row, the same in every step, for per-sequence state
    sample_tokens: list[int] = field(default_factory=list)  # token whose logits choose each sampled row's next token
    sampling: list[RowSampling] = field(default_factory=list)  # one per sampled row
    prompt_scoring: list[PromptScoring] = field(default_factory=list)
    deferred_positions: list[int] = field(default_factory=list)  # placeholder tokens to fill on the device
    deferred_sources: list[int] = field(default_factory=list)  # the previous step's sampled row for each
    # int32 [len(sampling), ceil(vocab / 32)]: bit t % 32 of word t // 32 set where a sampled row may
    # take token t (ALL_TOKENS_ALLOWED in every word, for a row without a grammar); None when no row has a grammar.
    token_bitmask: torch.Tensor | None = None
    # Whether this step runs on the compiled CPU kernels: the engine switches between steps, every rank alike.
    use_cpu_kernels: bool = False
    # Vision-language steps only (left empty when no row has a prompt with images):
    # [3, T] long: each token's temporal, height and width rotary positions, in place of ``positions``.
    mrope_positions: torch.Tensor | None = None
    # Images the runner encodes before the forward, in one encoder call, and keeps by content hash.
    encode_images: list[ImageInput] = field(default_factory=list)
    image_rows: list[ImageRows] = field(default_factory=list)
    # Keys of encoded images the runner drops once this step's rows are gathered: no unfinished sequence has
    # their placeholders left to compute after this step.
    drop_images: list[bytes] = field(default_factory=list)
    # LoRA steps only (left empty when LoRA is off): each row's adapter slot (-1: the base model alone), and the
    # adapters to install first.
    lora_slots: list[int] = field(default_factory=list)
    lora_loads: list[AdapterLoad] = field(default_factory=list)
    # Blocks to save to and restore from the host KV tier first (see kv_offload); None: nothing to move.
    kv_transfers: KVTransfers | None = None
    pooling: list[PoolingChunk] = field(default_factory=list)  # rows of pooling requests, which sample nothing

    def __post_init__(self) -> None:
        if len(self.sample_tokens) != len(self.sampling):
            raise ValueError(f"sample_tokens ({len(self.sample_tokens)}) and sampling ({len(self.sampling)}) "
                             "must have one entry per sampled row")
        if len(self.deferred_positions) != len(self.deferred_sources):
            raise ValueError(f"deferred_positions ({len(self.deferred_positions)}) and deferred_sources "
                             f"({len(self.deferred_sources)}) must pair up")
        if self.lora_slots and len(self.lora_slots) != len(self.query_lens):
            raise ValueError(f"lora_slots has {len(self.lora_slots)} entries for {len(self.query_lens)} rows; give "
                             "one per row, or none when LoRA is off")
        if self.token_bitmask is not None and self.token_bitmask.shape[0] != len(self.sampling):
            raise ValueError(f"token_bitmask has {self.token_bitmask.shape[0]} rows but there are "
                             f"{len(self.sampling)} sampled rows; give one row per sampled row")

    @property
    def num_tokens(self) -> int:
        return int(self.input_ids.shape[0])

    @property
    def num_decode_tokens(self) -> int:
        """Leading single-token rows, one token each."""
        count = 0
        for query_len in self.query_lens:
            if query_len != 1:
                break
            count += 1
        return count

    def token_lora_slots(self) -> list[int]:
        """Each token's adapter slot (its row's), or none when LoRA is off."""
        return [slot for slot, query_len in zip(self.lora_slots, self.query_lens) for _ in range(query_len)]

    def cu_seqlens_q(self) -> list[int]:
        """Each row's first token in the flattened batch, then the total."""
        starts = [0]
        for query_len in self.query_lens:
            starts.append(starts[-1] + query_len)
        return starts

    def logit_tokens(self) -> list[int]:
        """The tokens whose logits this step needs: every scored prompt position, then the sampled rows."""
        scored = [scoring.first_token + i for scoring in self.prompt_scoring
                  for i in range(len(scoring.target_token_ids))]
        return scored + self.sample_tokens
