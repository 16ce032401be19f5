"""Which tool-call format a model writes: named by the server's settings, or else told by the chat
template, which is where a family teaches its model to call tools and names the markers it was trained on."""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from autoglm.errors import named_entry
from autoglm.server.tool_calls import glm45, hermes
from autoglm.server.tool_calls.glm4 import Glm4ToolCallParser
from autoglm.server.tool_calls.glm4_history import glm4_history
from autoglm.server.tool_calls.glm45 import Glm45ToolCallParser, Glm47ToolCallParser
from autoglm.server.tool_calls.hermes import HermesToolCallParser
from autoglm.server.tool_calls.llama3_json import PYTHON_TAG, Llama3JsonToolCallParser
from autoglm.server.tool_calls.parsed import ToolCallParser


@dataclass(frozen=True)
class ToolCallFamily:
    key: str  # the name the server's tool-call parser setting takes (vLLM's)
    name: str  # the models, for people
    # The literal strings calls are written with: where they are special tokens, the server keeps
    # detokenization from dropping them.
    markers: tuple[str, ...]
    recognises: Callable[[str], bool]  # given the chat template's text
    # Given the declared tools: each function's name and its parameters' schema (None: it declared none).
    new_parser: Callable[[Mapping[str, dict[str, Any] | None]], ToolCallParser]
    # The conversation (chat template inputs) and tools reshaped for the family's template, given
    # that template; None where the template reads OpenAI's shapes as they are.
    history: Callable[[list[dict[str, Any]], list[dict[str, Any]] | None, str], list[dict[str, Any]]] | None = None


# What every GLM-4 template writes first. GLM-4-9B-Chat's never names <|observation|> itself: it
# writes each turn's role as <|{{ role }}|>.
GLM_PREFIX = "[gMASK]<sop>"
# GLM-4.5 and GLM-4.6 write each argument's tags on lines of their own; GLM-4.7 writes them on one.
GLM47_ARGUMENT = "</arg_key><arg_value>"


def _writes_xml_arguments(template: str) -> bool:
    return "<arg_key>" in template


HERMES = ToolCallFamily("hermes", "Qwen2.5/Qwen3 <tool_call>", (hermes.OPEN, hermes.CLOSE),
                        lambda template: hermes.OPEN in template and not _writes_xml_arguments(template),
                        HermesToolCallParser)
# In the order they are tried on a template: the first that recognises it is its family.
TOOL_CALL_PARSERS: dict[str, ToolCallFamily] = {family.key: family for family in (
    ToolCallFamily("glm45", "GLM-4.5/GLM-4.6 <tool_call> with <arg_key> lines", glm45.MARKERS,
                   lambda template: _writes_xml_arguments(template) and GLM47_ARGUMENT not in template,
                   Glm45ToolCallParser),
    ToolCallFamily("glm47", "GLM-4.7 <tool_call> with <arg_key>", glm45.MARKERS,
                   lambda template: GLM47_ARGUMENT in template, Glm47ToolCallParser),
    HERMES,
    replace(HERMES, key="qwen3"),  # the same format under the name Qwen3's own deployments give it
    ToolCallFamily("llama3_json", "Llama 3.1 JSON", (PYTHON_TAG,), lambda template: PYTHON_TAG in template,
                   Llama3JsonToolCallParser),
    ToolCallFamily("glm4", "GLM-4", (), lambda template: GLM_PREFIX in template and hermes.OPEN not in template,
                   Glm4ToolCallParser, glm4_history),
)}


def tool_call_family(chat_template: str | None) -> ToolCallFamily | None:
    """The family whose tool-call format the template teaches; None when it teaches none of those known."""
    if not chat_template:
        return None
    return next((family for family in TOOL_CALL_PARSERS.values() if family.recognises(chat_template)), None)


def tool_call_family_named(key: str) -> ToolCallFamily:
    """The family a tool-call parser setting names."""
    return named_entry(TOOL_CALL_PARSERS, "tool-call parser", key)



def known_families() -> str:
    """The formats a template can be recognised as teaching, for people."""
    return ", ".join(dict.fromkeys(family.name for family in TOOL_CALL_PARSERS.values()))
