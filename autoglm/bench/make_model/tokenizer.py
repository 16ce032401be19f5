"""A small byte-level BPE tokenizer for benchmark checkpoints, which have no real one offline, with a plain
role-tagged chat template.

Benchmarks feed token ids, so the tokenizer only has to exist (the engine loads one and
detokenizes every output) and hand out ids below the model's vocabulary size. Ids it does
not know decode to nothing.
"""
from __future__ import annotations

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

PAD_TOKEN, EOS_TOKEN = "<|pad|>", "<|endoftext|>"
TARGET_VOCAB_SIZE = 1024
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


def build_bench_tokenizer(model_vocab_size: int) -> PreTrainedTokenizerFast:
    """A byte-level BPE of at most ``min(TARGET_VOCAB_SIZE, model_vocab_size)`` entries."""
    vocab_size = min(TARGET_VOCAB_SIZE, model_vocab_size)
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[PAD_TOKEN, EOS_TOKEN],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator([TRAINING_TEXT], trainer)
    if tokenizer.get_vocab_size() > vocab_size:
        raise ValueError(
            f"a vocabulary of {model_vocab_size} is too small for a byte-level tokenizer, which needs "
            f"{tokenizer.get_vocab_size()} entries; use a vocab_size of at least that"
        )
    bench_tokenizer = PreTrainedTokenizerFast(tokenizer_object=tokenizer, pad_token=PAD_TOKEN, eos_token=EOS_TOKEN)
    bench_tokenizer.chat_template = CHAT_TEMPLATE
    return bench_tokenizer
