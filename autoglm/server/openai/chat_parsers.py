"""The reasoning and tool-call parsers a server's settings name, checked where the server starts."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from transformers import PreTrainedTokenizerBase

from autoglm.config.server import ChatConfig
from autoglm.config.sources import ConfigError
from autoglm.server.observability.metrics import ServerMetrics
from autoglm.server.reasoning.registry import ReasoningParserSpec, reasoning_parser_named
from autoglm.server.tool_calls.families import ToolCallFamily, tool_call_family_named
from autoglm.server.tool_calls.tool_use import ToolUse


@dataclass(frozen=True)
class ChatParsers:
    reasoning: ReasoningParserSpec | None  # None: the thinking stays in the content
    tool_calls: ToolCallFamily | None  # None: the format each model's chat template teaches

    @classmethod
    def from_config(cls, chat: ChatConfig) -> ChatParsers:
        """The parsers named by reasoning_parser and tool_call_parser; a ConfigError listing the known
        names for one this server does not have, so that the server does not start."""
        try:
            reasoning = reasoning_parser_named(chat.reasoning_parser) if chat.reasoning_parser else None
        except ValueError as error:
            raise ConfigError(f"reasoning_parser: {error}") from None
        try:
            tool_calls = tool_call_family_named(chat.tool_call_parser) if chat.tool_call_parser else None
        except ValueError as error:
            raise ConfigError(f"tool_call_parser: {error}") from None
        return cls(reasoning, tool_calls)

    def marks_with_special_tokens(self, tokenizer: PreTrainedTokenizerBase, tool_use: ToolUse | None) -> bool:
        """Whether a marker the parsers read (<think>, <tool_call>, ...) is a special token of this model,
        which decoding would drop unless told to keep special tokens."""
        markers = list(tool_use.markers) if tool_use is not None and tool_use.new_parser is not None else []
        if self.reasoning is not None:
            markers += [self.reasoning.start, self.reasoning.end]
        return bool(markers) and not set(markers).isdisjoint(tokenizer.all_special_tokens)

    def malformed_call_counter(self, metrics: ServerMetrics, tool_use: ToolUse | None) -> Callable[[], None]:
        """What counts a call the model wrote wrong, labelled with the format it was read in."""
        parser = tool_use.parser if tool_use is not None else ""
        return lambda: metrics.count_malformed_tool_call(parser)
