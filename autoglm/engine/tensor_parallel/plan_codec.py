"""A step plan as two int64 tensors, so that rank 0 can broadcast it to the workers.

A fixed-size header says what follows and how long it is; the payload then holds every field of
the :class:`~autoglm.step_plan.StepPlan`: its tensors as they are, its lists, and its rows'
sampling settings column by column (floats as the bits of float64, so they come back exactly), the
token bitmask, if any, a vision step's three-axis positions, images to encode (their patches as the bits
of float32, two to an int64) and where their rows go, the rows' LoRA slots and the adapters to install (by name,
id and folder: a worker reads an adapter's files itself), and the KV blocks to move to and from the host tier,
if any.
No Python object is pickled: a worker reads numbers it knows how to place.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

import torch

from autoglm.lora_request import LoRARequest
from autoglm.multimodal import ImageInput
from autoglm.step_plan import AdapterLoad, ImageRows, KVTransfers, PromptScoring, RowSampling, StepPlan

_UINT64 = 2**64


class MessageKind(IntEnum):
    STEP = 1  # a plan follows
    STOP = 2  # the engine is closing: the worker leaves its loop


@dataclass(frozen=True)
class Header:
    """The fixed-size part of a message: what it is, and the sizes that place the payload."""

    kind: MessageKind
    payload_len: int = 0
    num_tokens: int = 0
    num_rows: int = 0
    max_blocks: int = 0
    block_size: int = 0
    use_cpu_kernels: int = 0

    SIZE = 7

    def to_tensor(self) -> torch.Tensor:
        return torch.tensor([self.kind, self.payload_len, self.num_tokens, self.num_rows, self.max_blocks,
                             self.block_size, self.use_cpu_kernels], dtype=torch.long)

    @classmethod
    def from_tensor(cls, tensor: torch.Tensor) -> Header:
        kind, *sizes = tensor.tolist()
        return cls(MessageKind(kind), *sizes)


def empty_header() -> torch.Tensor:
    """The buffer a worker receives a header into."""
    return torch.empty(Header.SIZE, dtype=torch.long)


# RowSampling's fields by how they travel: one int64 column each, one float64 column each, one ragged list each.
_INT_FIELDS = ("greedy", "top_k", "num_logprobs", "seed", "draw_index")
_FLOAT_FIELDS = ("temperature", "top_p", "min_p", "repetition_penalty", "frequency_penalty", "presence_penalty")
_LIST_FIELDS = ("banned_token_ids", "prompt_token_ids", "output_token_ids")


class _Writer:
    def __init__(self) -> None:
        self.parts: list[torch.Tensor] = []

    def tensor(self, values: torch.Tensor) -> None:
        self.parts.append(values.reshape(-1).to(torch.long))

    def ints(self, values: list[int]) -> None:
        self.parts.append(torch.tensor(values, dtype=torch.long))

    def floats(self, values: list[float]) -> None:
        self.parts.append(torch.tensor(values, dtype=torch.float64).view(torch.long))

    def float32s(self, values: torch.Tensor) -> None:
        """The bits of float32 values, two to an int64 (the last padded)."""
        bits = values.reshape(-1).to(torch.float32).view(torch.int32)
        if bits.numel() % 2:
            bits = torch.cat([bits, bits.new_zeros(1)])
        self.parts.append(bits.view(torch.long))

    def ragged(self, lists: list[list[int]]) -> None:
        """Each list's length, then every list's values."""
        self.ints([len(values) for values in lists])
        self.ints([value for values in lists for value in values])

    def payload(self) -> torch.Tensor:
        return torch.cat(self.parts) if self.parts else torch.empty(0, dtype=torch.long)


class _Reader:
    def __init__(self, payload: torch.Tensor) -> None:
        self.payload = payload
        self.offset = 0

    def tensor(self, count: int) -> torch.Tensor:
        values = self.payload[self.offset : self.offset + count]
        self.offset += count
        return values

    def ints(self, count: int) -> list[int]:
        return self.tensor(count).tolist()

    def floats(self, count: int) -> list[float]:
        return self.tensor(count).view(torch.float64).tolist()

    def float32s(self, count: int) -> torch.Tensor:
        return self.tensor((count + 1) // 2).view(torch.int32)[:count].view(torch.float32)

    def ragged(self, count: int) -> list[list[int]]:
        lengths = self.ints(count)
        values = self.ints(sum(lengths))
        lists, start = [], 0
        for length in lengths:
            lists.append(values[start : start + length])
            start += length
        return lists


def _as_int64(value: int) -> int:
    """A seed is any uint64; it travels as the int64 of the same bits."""
    return value - _UINT64 if value >= 2**63 else value


def encode_plan(plan: StepPlan) -> tuple[torch.Tensor, torch.Tensor]:
    """(header, payload) of a plan; :func:`decode_plan` gives back an equal plan."""
    num_rows, max_blocks = plan.block_tables.shape
    out = _Writer()
    for tensor in (plan.input_ids, plan.positions, plan.slot_mapping, plan.block_tables):
        out.tensor(tensor)
    for values in (plan.query_lens, plan.seq_lens, plan.row_ids):
        out.ints(values)
    out.ragged([plan.sample_tokens, plan.deferred_positions, plan.deferred_sources])
    scoring = plan.prompt_scoring
    out.ints([len(scoring)])
    out.ints([value for entry in scoring for value in (entry.first_token, entry.num_top)])
    out.ragged([entry.target_token_ids for entry in scoring])
    rows = plan.sampling  # as many as plan.sample_tokens, which travelled above
    for name in _INT_FIELDS:
        out.ints([_sampling_int(row, name) for row in rows])
    for name in _FLOAT_FIELDS:
        out.floats([getattr(row, name) for row in rows])
    for name in _LIST_FIELDS:
        out.ragged([list(getattr(row, name)) for row in rows])
    out.ragged([list(row.logit_bias) for row in rows])
    out.floats([bias for row in rows for bias in row.logit_bias.values()])
    bitmask = plan.token_bitmask  # its width first, 0 for none
    out.ints([0 if bitmask is None else bitmask.shape[1]])
    if bitmask is not None:
        out.tensor(bitmask)
    _write_images(out, plan)
    out.ints([len(plan.lora_slots)])
    out.ints(plan.lora_slots)
    loads = plan.lora_loads
    out.ints([len(loads)])
    out.ints([value for load in loads for value in (load.slot, load.request.lora_int_id)])
    out.ragged([list(text.encode()) for load in loads for text in (load.request.lora_name, load.request.lora_path)])
    transfers = plan.kv_transfers  # a flag, then the KV blocks each rank moves on its own shard
    out.ints([int(transfers is not None)])
    if transfers is not None:
        out.ragged([transfers.save_blocks, transfers.save_slots, transfers.disk_read_slots,
                    transfers.disk_read_sequences, transfers.restore_slots, transfers.restore_blocks])
        out.ragged([list(block_hash) for block_hash in transfers.save_hashes + transfers.disk_read_hashes])
    payload = out.payload()
    header = Header(MessageKind.STEP, int(payload.numel()), plan.num_tokens, num_rows, max_blocks, plan.block_size,
                    int(plan.use_cpu_kernels))
    return header.to_tensor(), payload


def _write_images(out: _Writer, plan: StepPlan) -> None:
    """A vision step's positions, images, rows and drops; four zero counts for a step without images."""
    out.ints([int(plan.mrope_positions is not None)])
    if plan.mrope_positions is not None:
        out.tensor(plan.mrope_positions)
    images = plan.encode_images
    out.ints([len(images)])
    out.ints([value for image in images for value in (*image.grid_thw, *image.pixel_values.shape)])
    out.ragged([list(image.content_hash) for image in images])
    for image in images:
        out.float32s(image.pixel_values)
    rows = plan.image_rows
    out.ints([len(rows)])
    out.ints([value for row in rows for value in (row.token_index, row.first_row, row.num_rows)])
    out.ragged([list(row.key) for row in rows])
    out.ints([len(plan.drop_images)])
    out.ragged([list(key) for key in plan.drop_images])


def _read_images(read: _Reader, num_tokens: int) -> dict[str, object]:
    """The StepPlan fields :func:`_write_images` wrote."""
    (has_mrope,) = read.ints(1)
    mrope_positions = read.tensor(3 * num_tokens).reshape(3, num_tokens) if has_mrope else None
    (num_images,) = read.ints(1)
    sizes = read.ints(5 * num_images)
    hashes = read.ragged(num_images)
    images = []
    for index in range(num_images):
        t, h, w, patches, features = sizes[5 * index : 5 * index + 5]
        pixel_values = read.float32s(patches * features).reshape(patches, features)
        images.append(ImageInput(pixel_values, (t, h, w), bytes(hashes[index])))
    (num_rows,) = read.ints(1)
    row_ints = read.ints(3 * num_rows)
    keys = read.ragged(num_rows)
    rows = [ImageRows(row_ints[3 * i], bytes(keys[i]), row_ints[3 * i + 1], row_ints[3 * i + 2])
            for i in range(num_rows)]
    (num_drops,) = read.ints(1)
    drops = [bytes(key) for key in read.ragged(num_drops)]
    return {"mrope_positions": mrope_positions, "encode_images": images, "image_rows": rows, "drop_images": drops}


def _read_transfers(read: _Reader) -> KVTransfers:
    save_blocks, save_slots, disk_slots, disk_sequences, restore_slots, restore_blocks = read.ragged(6)
    hashes = [bytes(values) for values in read.ragged(len(save_blocks) + len(disk_slots))]
    return KVTransfers(save_blocks=save_blocks, save_slots=save_slots, save_hashes=hashes[: len(save_blocks)],
                       disk_read_slots=disk_slots, disk_read_sequences=disk_sequences,
                       disk_read_hashes=hashes[len(save_blocks) :], restore_slots=restore_slots,
                       restore_blocks=restore_blocks)


def _sampling_int(row: RowSampling, name: str) -> int:
    value = getattr(row, name)
    if name == "num_logprobs":
        return -1 if value is None else value
    return _as_int64(int(value))


def decode_plan(header: Header, payload: torch.Tensor) -> StepPlan:
    """The plan :func:`encode_plan` wrote; its tensors are views of ``payload``."""
    num_tokens, num_rows = header.num_tokens, header.num_rows
    read = _Reader(payload)
    input_ids, positions, slot_mapping = (read.tensor(num_tokens) for _ in range(3))
    block_tables = read.tensor(num_rows * header.max_blocks).reshape(num_rows, header.max_blocks)
    query_lens, seq_lens, row_ids = (read.ints(num_rows) for _ in range(3))
    sample_tokens, deferred_positions, deferred_sources = read.ragged(3)
    (num_scoring,) = read.ints(1)
    scoring_ints = read.ints(2 * num_scoring)
    targets = read.ragged(num_scoring)
    scoring = [PromptScoring(scoring_ints[2 * i], targets[i], scoring_ints[2 * i + 1]) for i in range(num_scoring)]
    num_sampled = len(sample_tokens)
    columns: dict[str, list] = {name: read.ints(num_sampled) for name in _INT_FIELDS}
    columns.update({name: read.floats(num_sampled) for name in _FLOAT_FIELDS})
    columns.update({name: read.ragged(num_sampled) for name in _LIST_FIELDS})
    bias_tokens = read.ragged(num_sampled)
    bias_values = read.floats(sum(len(tokens) for tokens in bias_tokens))
    sampling, start = [], 0
    for row in range(num_sampled):
        tokens = bias_tokens[row]
        values = {name: column[row] for name, column in columns.items()}
        sampling.append(RowSampling(
            greedy=bool(values["greedy"]), temperature=values["temperature"], top_k=values["top_k"],
            top_p=values["top_p"], min_p=values["min_p"], repetition_penalty=values["repetition_penalty"],
            frequency_penalty=values["frequency_penalty"], presence_penalty=values["presence_penalty"],
            logit_bias=dict(zip(tokens, bias_values[start : start + len(tokens)])),
            banned_token_ids=tuple(values["banned_token_ids"]),
            num_logprobs=None if values["num_logprobs"] < 0 else values["num_logprobs"],
            seed=values["seed"] % _UINT64, draw_index=values["draw_index"],
            prompt_token_ids=values["prompt_token_ids"], output_token_ids=values["output_token_ids"],
        ))
        start += len(tokens)
    (bitmask_width,) = read.ints(1)
    token_bitmask = None
    if bitmask_width:
        token_bitmask = read.tensor(num_sampled * bitmask_width).to(torch.int32).reshape(num_sampled, bitmask_width)
    images = _read_images(read, num_tokens)
    (num_lora_rows,) = read.ints(1)
    lora_slots = read.ints(num_lora_rows)
    (num_loads,) = read.ints(1)
    load_ints = read.ints(2 * num_loads)
    texts = [bytes(values).decode() for values in read.ragged(2 * num_loads)]
    lora_loads = [AdapterLoad(load_ints[2 * i], LoRARequest(texts[2 * i], load_ints[2 * i + 1], texts[2 * i + 1]))
                  for i in range(num_loads)]
    (has_transfers,) = read.ints(1)
    kv_transfers = _read_transfers(read) if has_transfers else None
    return StepPlan(input_ids=input_ids, positions=positions, slot_mapping=slot_mapping, block_tables=block_tables,
                    block_size=header.block_size, query_lens=query_lens, seq_lens=seq_lens, row_ids=row_ids,
                    sample_tokens=sample_tokens, sampling=sampling, prompt_scoring=scoring,
                    deferred_positions=deferred_positions, deferred_sources=deferred_sources,
                    token_bitmask=token_bitmask, use_cpu_kernels=bool(header.use_cpu_kernels),
                    lora_slots=lora_slots, lora_loads=lora_loads, kv_transfers=kv_transfers, **images)
