"""A step plan survives the trip to the workers exactly: header and payload back to an equal plan."""
from __future__ import annotations

import dataclasses

import torch

from autoglm.engine.tensor_parallel.plan_codec import Header, MessageKind, decode_plan, encode_plan
from autoglm.multimodal import ImageInput
from autoglm.step_plan import ImageRows, KVTransfers, PromptScoring, RowSampling, StepPlan

# Every field away from its default, floats that have no short binary form, a seed past int64.
EVERY_SETTING = RowSampling(
    greedy=True, temperature=0.7, top_k=40, top_p=0.9, min_p=0.05, repetition_penalty=1.1, frequency_penalty=-0.3,
    presence_penalty=0.2, logit_bias={7: -100.0, 3: 0.1}, banned_token_ids=(2, 9), num_logprobs=0,
    seed=2**64 - 5, draw_index=3, prompt_token_ids=[5, 6, 7], output_token_ids=[8],
)


def a_plan() -> StepPlan:
    return StepPlan(
        input_ids=torch.tensor([11, 12, 13, 14, 15]), positions=torch.tensor([4, 0, 1, 2, 3]),
        slot_mapping=torch.tensor([20, 4, 5, 6, 7]), block_tables=torch.tensor([[5, 0], [1, 2]]), block_size=4,
        query_lens=[1, 4], seq_lens=[5, 4], row_ids=[3, 8], sample_tokens=[0, 4],
        sampling=[EVERY_SETTING, RowSampling(seed=1)], prompt_scoring=[PromptScoring(1, [12, 13], 2)],
        deferred_positions=[0], deferred_sources=[1],
        # The sign bit set (a token at t % 32 == 31) and an all-allowed row: int32 words travel as int64.
        token_bitmask=torch.tensor([[-1, -(2**31)], [5, 2**31 - 1]], dtype=torch.int32),
        use_cpu_kernels=True,  # the engine's switch reaches every rank with the plan
        kv_transfers=KVTransfers(save_blocks=[3], save_slots=[0], save_hashes=[bytes(range(250, 256)) + b"\0"],
                                 disk_read_slots=[2, 3], disk_read_sequences=[9, 10], disk_read_hashes=[b"a", b""],
                                 restore_slots=[1, 0], restore_blocks=[4, 6]),
        mrope_positions=torch.tensor([[4, 0, 1, 1, 3], [4, 0, 1, 2, 3], [4, 0, 2, 1, 3]]),
        # An odd number of patch values (the last int64 is half padding), and floats with no short form.
        encode_images=[ImageInput(torch.tensor([[0.1, -0.0, 1e-40], [float("inf"), -2.5, 3.0e38]]), (1, 1, 2),
                                  b"\xff\0image"),
                       ImageInput(torch.tensor([[0.3]]), (1, 1, 1), b"")],
        image_rows=[ImageRows(token_index=2, key=b"\xff\0image", first_row=0, num_rows=2)],
        drop_images=[b"old", b"\0"],
    )


def assert_same_plan(decoded: StepPlan, plan: StepPlan) -> None:
    for field in dataclasses.fields(StepPlan):
        mine, theirs = getattr(decoded, field.name), getattr(plan, field.name)
        if isinstance(theirs, torch.Tensor):
            assert torch.equal(mine, theirs) and mine.dtype == theirs.dtype, field.name
        elif field.name == "encode_images":  # images compare by identity: their parts must be equal bit for bit
            assert [(image.grid_thw, image.content_hash, image.pixel_values.shape) for image in mine] == [
                (image.grid_thw, image.content_hash, image.pixel_values.shape) for image in theirs]
            assert all(torch.equal(a.pixel_values.view(torch.int32), b.pixel_values.view(torch.int32))
                       for a, b in zip(mine, theirs))
        else:
            assert mine == theirs, field.name


def test_every_field_of_a_plan_comes_back_exactly():
    assert all(getattr(EVERY_SETTING, field.name) != field.default for field in dataclasses.fields(RowSampling)
               if field.default is not dataclasses.MISSING), "a new RowSampling field must be set here too"
    plan = a_plan()
    header, payload = encode_plan(plan)
    assert header.shape == (Header.SIZE,) and header.dtype == payload.dtype == torch.long
    assert_same_plan(decode_plan(Header.from_tensor(header), payload), plan)


def test_a_plan_that_samples_nothing_and_the_stop_message():
    plan = dataclasses.replace(a_plan(), sample_tokens=[], sampling=[], prompt_scoring=[], deferred_positions=[],
                               deferred_sources=[], token_bitmask=None, kv_transfers=None, mrope_positions=None,
                               encode_images=[], image_rows=[], drop_images=[])
    header, payload = encode_plan(plan)
    assert_same_plan(decode_plan(Header.from_tensor(header), payload), plan)
    assert Header.from_tensor(Header(MessageKind.STOP).to_tensor()).kind is MessageKind.STOP
