"""A small byte-level BPE tokenizer for benchmark checkpoints, which have no real one offline, with a plain
role-tagged chat template.

Benchmarks feed token ids, so the tokenizer only has to exist (the engine loads one and
detokenizes every output) and hand out ids below the model's vocabulary size. Ids it does
not know decode to nothing.
"""
from __future__ import annotations

from collections.abc import Sequence

from typing import TYPE_CHECKING

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerFast

PAD_TOKEN, EOS_TOKEN = "<|pad|>", "<|endoftext|>"
BASE_SPECIAL_TOKENS = (PAD_TOKEN, EOS_TOKEN)
TARGET_VOCAB_SIZE = 1024
# The vocabulary of the shapes tests build: the 256 bytes, the special tokens, and merges enough to shorten text.
TINY_VOCAB_SIZE = 384
# Each message on its own lines after its role's tag, so /v1/chat/completions works on these checkpoints too.
CHAT_TEMPLATE = (
    "{% for message in messages %}<|{{ message['role'] }}|>\n{{ message['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)

# Fixed training text: the same text gives the same merges, so checkpoints are reproducible.
TRAINING_TEXT = (
    "An inference engine reads a prompt, fills its key and value cache, and then writes one "
    "token after another until the request asks it to stop. Requests arrive at different "
    "times and want different lengths, so the scheduler mixes prompt chunks with decoding "
    "steps in every batch. The cache is split into blocks of sixteen tokens; a request owns "
    "a list of blocks, and two requests that begin with the same words can share the blocks "
    "that hold them. Throughput is counted in tokens per second, latency in milliseconds to "
    "the first token and between tokens. Numbers such as 0, 1, 2, 7, 16, 32, 64, 128, 512, "
    "2048 and 151936 appear as well, with punctuation: commas, colons; quotes 'like this' and "
    "\"like that\", brackets (round) [square] {curly}, and questions? Yes!"
)


def special_token_ids(special_tokens: Sequence[str] = ()) -> dict[str, int]:
    """Where the tokenizer puts its special tokens: first in the vocabulary, pad and end before the markers.

    Fixed ids let a config point at the markers without building the tokenizer.
    """
    return {token: token_id for token_id, token in enumerate((*BASE_SPECIAL_TOKENS, *special_tokens))}


def build_bench_tokenizer(
    model_vocab_size: int, special_tokens: Sequence[str] = (), chat_template: str = CHAT_TEMPLATE
) -> PreTrainedTokenizerFast:
    """A byte-level BPE of at most ``min(TARGET_VOCAB_SIZE, model_vocab_size)`` entries.

    ``special_tokens`` (a model's markers, such as its image tokens) stay whole in encoding and are
    skipped in decoding, as in the model's own tokenizer.
    """
    # Only where a tokenizer is built: listing the benchmarks imports this module's names, not transformers.
    from transformers import PreTrainedTokenizerFast

    duplicated = sorted({token for token in special_tokens if special_tokens.count(token) > 1}
                        | set(BASE_SPECIAL_TOKENS) & set(special_tokens))
    if duplicated:
        raise ValueError(f"special tokens must be distinct and not {', '.join(BASE_SPECIAL_TOKENS)}; "
                         f"repeated: {', '.join(duplicated)}")
    vocab_size = min(TARGET_VOCAB_SIZE, model_vocab_size)
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(special_token_ids(special_tokens)),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator([TRAINING_TEXT], trainer)
    if tokenizer.get_vocab_size() > vocab_size:
        raise ValueError(
            f"a vocabulary of {model_vocab_size} is too small for a byte-level tokenizer, which needs "
            f"{tokenizer.get_vocab_size()} entries; use a vocab_size of at least that"
        )
    markers = {"extra_special_tokens": list(special_tokens)} if special_tokens else {}
    bench_tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, pad_token=PAD_TOKEN, eos_token=EOS_TOKEN, **markers
    )
    bench_tokenizer.chat_template = chat_template
    return bench_tokenizer
