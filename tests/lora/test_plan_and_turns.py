"""The plan's LoRA fields survive the trip to tensor-parallel workers; a step takes at most max_loras adapters and
each adapter gets its turn; the engine's slot table keeps adapters in their slots across steps."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from autoglm.engine.lora.slot_table import SlotTable
from autoglm.engine.sched.adapter_turns import AdapterTurns
from autoglm.engine.tensor_parallel.plan_codec import Header, decode_plan, encode_plan
from autoglm.lora_request import LoRARequest
from autoglm.models.lora import NO_SLOT, LoRAStepRows
from autoglm.step_plan import AdapterLoad, StepPlan


def test_plan_codec_carries_row_slots_and_loads_by_folder():
    request = LoRARequest("ünïcode name", 12, "/adapters/ünïcode")
    plan = StepPlan(input_ids=torch.tensor([1, 2, 3]), positions=torch.tensor([0, 0, 1]),
                    slot_mapping=torch.tensor([0, 4, 5]), block_tables=torch.tensor([[0], [1]]), block_size=4,
                    query_lens=[1, 2], seq_lens=[1, 2], row_ids=[0, 1], lora_slots=[NO_SLOT, 1],
                    lora_loads=[AdapterLoad(1, request)])
    header, payload = encode_plan(plan)
    decoded = decode_plan(Header.from_tensor(header), payload)
    assert decoded.lora_slots == [NO_SLOT, 1] and decoded.lora_loads == [AdapterLoad(1, request)]
    assert decoded.token_lora_slots() == [NO_SLOT, 1, 1]


def test_plan_refuses_slots_that_do_not_match_its_rows():
    with pytest.raises(ValueError, match="lora_slots has 1 entries for 2 rows"):
        StepPlan(input_ids=torch.tensor([1, 2]), positions=torch.tensor([0, 0]), slot_mapping=torch.tensor([0, 4]),
                 block_tables=torch.tensor([[0], [1]]), block_size=4, query_lens=[1, 1], seq_lens=[1, 1],
                 row_ids=[0, 1], lora_slots=[0])


def seq(lora_int_id):
    return SimpleNamespace(lora_int_id=lora_int_id)


def test_adapters_take_turns_so_none_waits_for_good():
    turns = AdapterTurns(max_loras=1)
    candidates = [seq(None), seq(1), seq(2), seq(3)]
    ran = []
    for step in range(6):
        allowed = turns.allowed(candidates)
        assert len(allowed) == 1
        ran.append(*allowed)
        turns.ran([candidate for candidate in candidates if candidate.lora_int_id in allowed], allowed, step)
    assert ran == [1, 2, 3, 1, 2, 3]
    assert AdapterTurns(max_loras=3).allowed(candidates) is None  # every adapter fits


def adapter(lora_int_id):
    return SimpleNamespace(request=LoRARequest(f"a{lora_int_id}", lora_int_id, "/x"))


def test_slot_table_keeps_adapters_in_place_and_replaces_the_least_recently_used():
    table = SlotTable(max_loras=2)
    first, second, third = adapter(1), adapter(2), adapter(3)
    slots, loads = table.assign([first, None, second, first])
    assert slots == [0, NO_SLOT, 1, 0] and [load.slot for load in loads] == [0, 1]
    assert table.assign([second]) == ([1], [])  # already in its slot: nothing to install
    slots, loads = table.assign([third, second])
    assert slots == [0, 1] and [(load.slot, load.request.lora_int_id) for load in loads] == [(0, 3)]
    with pytest.raises(ValueError, match="3 distinct LoRA adapters but there are 2 slots"):
        table.assign([first, second, third])


def test_step_rows_gather_only_when_rows_are_out_of_slot_order():
    rows = LoRAStepRows()
    rows.set([0, 0, 1], torch.device("cpu"))
    assert rows.rows is None and [(g.slot, g.start, g.end) for g in rows.groups] == [(0, 0, 2), (1, 2, 3)]
    rows.set([1, NO_SLOT, 0, 1], torch.device("cpu"))
    assert rows.rows.tolist() == [2, 0, 3] and [(g.slot, g.start, g.end) for g in rows.groups] == [(0, 0, 1), (1, 1, 3)]
    rows.set([NO_SLOT, NO_SLOT], torch.device("cpu"))
    assert not rows.has_adapters
