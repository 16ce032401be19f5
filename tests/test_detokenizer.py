import random

import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from autoglm.engine.detokenizer import IncrementalDetokenizer
from autoglm.sampling_params import SamplingParams

CORPUS = [
    "Hello world, the café is naïve über alles.",
    "Emoji 😀 and 🎉 and a fox 🦊 jump over the lazy dog.",
    "你好世界，こんにちは、안녕하세요.",
    "Señor Müller déjà vu — façade résumé.",
]
TEXT = "Hello café 😀 你好 world 🦊 naïve déjà vu 🎉"


def train(pre_tokenizer, decoder, vocab_size: int, alphabet: list[str]) -> PreTrainedTokenizerFast:
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizer
    tokenizer.decoder = decoder
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, initial_alphabet=alphabet, special_tokens=["<unk>", "<eos>"]
    )
    tokenizer.train_from_iterator(CORPUS * 4, trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, unk_token="<unk>", eos_token="<eos>", clean_up_tokenization_spaces=False
    )


@pytest.fixture(scope="module")
def tokenizer() -> PreTrainedTokenizerFast:
    """Byte-level BPE with few merges, so multi-byte characters span several tokens."""
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False)
    return train(byte_level, decoders.ByteLevel(), 290, pre_tokenizers.ByteLevel.alphabet())


def stream(tokenizer, output_ids, params, prompt_ids=(), rng=None):
    """Feeds the output one token at a time, or in chunks of 1 to 3 tokens when given an rng;
    returns the detokenizer and its deltas, the last one taken as finished."""
    detokenizer = IncrementalDetokenizer(tokenizer, list(prompt_ids), params)
    deltas, start = [], 0
    while start < len(output_ids):
        size = rng.randint(1, 3) if rng else 1
        if detokenizer.add_tokens(output_ids[start:start + size]) is not None:
            break
        start += size
        deltas.append(detokenizer.take_delta(finished=False))
    deltas.append(detokenizer.take_delta(finished=True))
    return detokenizer, deltas


def test_multi_byte_characters_really_span_tokens(tokenizer):
    for char in "😀你":
        pieces = [tokenizer.decode([token_id]) for token_id in tokenizer.encode(" " + char)]
        assert any("\ufffd" in piece for piece in pieces)


def test_streamed_text_never_shows_a_broken_character(tokenizer):
    output_ids = tokenizer.encode(TEXT)
    detokenizer, deltas = stream(tokenizer, output_ids, SamplingParams())
    assert not any("\ufffd" in delta for delta in deltas)
    assert "".join(deltas) == detokenizer.output_text == TEXT
    assert sum(1 for delta in deltas if delta) > 5  # streamed, not all at the end


def test_prompt_context_keeps_the_leading_space_of_the_first_word():
    # Metaspace decoding drops the space of a first word, so "▁world" alone reads "world".
    tokenizer = train(pre_tokenizers.Metaspace(), decoders.Metaspace(), 120, [])
    prompt_ids, output_ids = tokenizer.encode("Hello"), tokenizer.encode(" world")
    assert tokenizer.decode(output_ids) == "world"
    detokenizer, deltas = stream(tokenizer, output_ids, SamplingParams(), prompt_ids)
    assert "".join(deltas) == detokenizer.output_text == " world"


def test_stop_string_spanning_tokens_is_cut_and_never_streamed(tokenizer):
    output_ids = tokenizer.encode("Hello café 😀 world")
    params = SamplingParams(stop=["é 😀"])
    detokenizer = IncrementalDetokenizer(tokenizer, [], params)
    streamed, matched = "", None
    for token_id in output_ids:
        matched = detokenizer.add_tokens([token_id])
        if matched:
            break
        streamed += detokenizer.take_delta(finished=False)
        assert "é" not in streamed
    assert matched == "é 😀"
    assert detokenizer.output_text == "Hello caf"
    assert streamed + detokenizer.take_delta(finished=True) == "Hello caf"


def test_stop_string_is_kept_when_asked(tokenizer):
    params = SamplingParams(stop=["你好"], include_stop_str_in_output=True)
    detokenizer, deltas = stream(tokenizer, tokenizer.encode(TEXT), params)
    assert "".join(deltas) == detokenizer.output_text == "Hello café 😀 你好"


def test_tokens_after_a_stop_in_the_same_call_are_ignored(tokenizer):
    detokenizer = IncrementalDetokenizer(tokenizer, [], SamplingParams(stop=["world"]))
    assert detokenizer.add_tokens(tokenizer.encode(TEXT)) == "world"
    assert detokenizer.output_text == "Hello café 😀 你好 "
    with pytest.raises(RuntimeError, match="add_tokens called after the stop string 'world' matched"):
        detokenizer.add_tokens(tokenizer.encode("more"))


def test_the_stop_string_completed_first_wins_even_if_another_started_earlier(tokenizer):
    detokenizer = IncrementalDetokenizer(tokenizer, [], SamplingParams(stop=["world 🦊", "ld"]))
    assert detokenizer.add_tokens(tokenizer.encode(TEXT)) == "ld"
    assert detokenizer.output_text == "Hello café 😀 你好 wor"


def test_of_stop_strings_completed_together_the_earliest_wins(tokenizer):
    # Both end with the same character, so they complete on the same token.
    detokenizer = IncrementalDetokenizer(tokenizer, [], SamplingParams(stop=["lo", "Hello"]))
    assert detokenizer.add_tokens(tokenizer.encode(TEXT)) == "Hello"
    assert detokenizer.output_text == ""


def test_tail_that_could_start_a_stop_string_is_held_back(tokenizer):
    detokenizer = IncrementalDetokenizer(tokenizer, [], SamplingParams(stop=["xyz!"]))
    detokenizer.add_tokens(tokenizer.encode("Hello world"))
    assert detokenizer.take_delta(finished=False) == "Hello wo"
    assert detokenizer.take_delta(finished=False) == ""
    assert detokenizer.take_delta(finished=True) == "rld"


def test_special_tokens_follow_skip_special_tokens(tokenizer):
    output_ids = tokenizer.encode("Hello") + [tokenizer.eos_token_id] + tokenizer.encode(" world")
    skipped, _ = stream(tokenizer, output_ids, SamplingParams())
    kept, _ = stream(tokenizer, output_ids, SamplingParams(skip_special_tokens=False))
    assert skipped.output_text == "Hello world"
    assert kept.output_text == "Hello<eos> world"


@pytest.mark.parametrize("skip_special_tokens", [True, False])
def test_deltas_add_up_to_the_full_decode_of_random_tokens(tokenizer, skip_special_tokens):
    rng = random.Random(0)
    params = SamplingParams(skip_special_tokens=skip_special_tokens)
    for _ in range(40):
        prompt_ids = [rng.randrange(len(tokenizer)) for _ in range(rng.randrange(0, 8))]
        output_ids = [rng.randrange(len(tokenizer)) for _ in range(rng.randrange(1, 40))]
        detokenizer, deltas = stream(tokenizer, output_ids, params, prompt_ids, rng)
        expected = tokenizer.decode(output_ids, skip_special_tokens=skip_special_tokens)
        assert "".join(deltas) == detokenizer.output_text == expected


@pytest.mark.parametrize("include_stop_str_in_output", [False, True])
def test_deltas_add_up_to_the_text_before_a_random_stop_string(tokenizer, include_stop_str_in_output):
    rng = random.Random(1)
    alphabet = "ab 😀é你"
    for _ in range(40):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 30)))
        stop = "".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 4)))
        params = SamplingParams(stop=[stop], include_stop_str_in_output=include_stop_str_in_output)
        detokenizer, deltas = stream(tokenizer, tokenizer.encode(text), params, rng=rng)
        index = text.find(stop)
        if index == -1:
            expected = text
        else:
            expected = text[:index + len(stop)] if include_stop_str_in_output else text[:index]
        assert "".join(deltas) == detokenizer.output_text == expected
