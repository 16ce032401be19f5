"""A draft must share the target's vocabulary; the error says which sizes differ."""
import pytest

from autoglm import LLM
from tests.engine.sched.scheduling import make_seq
from tests.tiny_models import make_tiny_checkpoint


def test_a_draft_of_another_vocabulary_is_refused(tmp_path):
    target = make_tiny_checkpoint("llama", tmp_path / "target")
    other = make_tiny_checkpoint("qwen2", tmp_path / "other", vocab_size=384)
    spec = {"method": "draft_model", "num_speculative_tokens": 2, "model": str(other)}
    with pytest.raises(ValueError, match="has a vocabulary of 384 tokens but the target's has 320; a draft must "
                                         "share the target's tokenizer"):
        LLM(model=str(target), dtype="float32", speculative_config=spec)


def test_after_a_preemption_the_draft_recomputes_what_it_held(tmp_path):
    """A preempted sequence comes back in other blocks, here ones holding another sequence's draft K/V:
    what the draft pool held of it is gone, even where no proposal was made in between to forget it."""
    target = make_tiny_checkpoint("llama", tmp_path / "target")
    llm = LLM(model=str(target), dtype="float32",
              speculative_config={"method": "draft_model", "num_speculative_tokens": 3, "model": str(target)})
    manager, proposer = llm.engine.block_manager, llm.engine.proposer
    other, seq, filler = (make_seq(tokens, request_id=name, max_tokens=8) for name, tokens in
                          (("other", range(100, 120)), ("seq", range(5, 25)), ("filler", range(20))))

    def admit(sequence):
        sequence.num_computed_tokens = 0
        assert manager.allocate(sequence, sequence.num_tokens + 3)
        sequence.num_computed_tokens = sequence.num_tokens - 1  # as if the target had read the prompt

    admit(other)
    proposer.propose([other], [3])
    other_blocks = list(other.block_table)
    manager.free(other)
    admit(filler)  # takes the other's blocks
    admit(seq)
    first = proposer.propose([seq], [3])
    manager.free(seq)
    seq.num_preemptions += 1
    manager.free(filler)
    admit(seq)  # back in the blocks that hold the other's draft K/V
    assert seq.block_table == other_blocks
    assert proposer.propose([seq], [3]) == first
