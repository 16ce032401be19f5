"""A model's text cut the ways it may arrive (a character, a token or a few tokens at a time), fed to a
stream, and what the stream's pieces add up to after each one."""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from tokenizers import Tokenizer, models, trainers

from autoglm.server.tool_calls.parsed import ToolCallParser
from autoglm.server.tool_calls.stream import ToolCallStream

SPLITS = ["characters", "tokens", "3 tokens", "4 tokens"]


def train_tokenizer(texts: Iterable[str]) -> Tokenizer:
    """A BPE tokenizer learnt from `texts` themselves, with no pre-tokenizer: its tokens cross from
    markers into text (``</arg_key>\\n<arg_value>``, ``<tool_call>get_weather``) as a model's do. A
    character it never saw is a token of its own."""
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    trainer = trainers.BpeTrainer(vocab_size=300, min_frequency=3, special_tokens=["<unk>"], show_progress=False)
    tokenizer.train_from_iterator(texts, trainer)
    return tokenizer


def split(text: str, how: str, tokenizer: Tokenizer) -> list[str]:
    """`text` in the pieces `how` (one of SPLITS) names; they join up to `text`."""
    if how == "characters":
        return list(text)
    tokens = [text[start:end] for start, end in tokenizer.encode(text).offsets]
    burst = 1 if how == "tokens" else int(how.split()[0])
    pieces = ["".join(tokens[i:i + burst]) for i in range(0, len(tokens), burst)]
    assert "".join(pieces) == text
    return pieces


@dataclass
class StreamedCalls:
    content: str = ""
    names: list[str] = field(default_factory=list)
    arguments: list[str] = field(default_factory=list)
    # After each piece: how many characters had been fed, and each call's arguments sent by then.
    seen: list[tuple[int, list[str]]] = field(default_factory=list)


def stream_calls(parser: ToolCallParser, pieces: list[str]) -> StreamedCalls:
    """What a ToolCallStream sends for `pieces`, the last one final, added up."""
    stream = ToolCallStream(parser)
    streamed = StreamedCalls()
    fed = 0
    for number, text in enumerate(pieces):
        piece = stream.advance(text, final=number == len(pieces) - 1)
        fed += len(text)
        streamed.content += piece.content
        for call in piece.calls:
            if call.name is not None:
                assert call.index == len(streamed.names)
                streamed.names.append(call.name)
                streamed.arguments.append(call.arguments)
            else:
                streamed.arguments[call.index] += call.arguments
        streamed.seen.append((fed, list(streamed.arguments)))
    return streamed
