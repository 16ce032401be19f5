"""Which tool-call format a model writes, told by its chat template: the template is where a family
teaches its model to call tools, and it names the markers the model was trained on."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from autoglm.server.tool_calls.glm4 import Glm4ToolCallParser
from autoglm.server.tool_calls.glm4_history import glm4_history
from autoglm.server.tool_calls.hermes import HermesToolCallParser
from autoglm.server.tool_calls.llama3_json import PYTHON_TAG, Llama3JsonToolCallParser
from autoglm.server.tool_calls.parsed import ToolCallParser


@dataclass(frozen=True)
class ToolCallFamily:
    name: str
    recognises: Callable[[str], bool]  # given the chat template's text
    new_parser: Callable[[list[str]], ToolCallParser]  # given the declared tools' names
    # The conversation (chat template inputs) and tools reshaped for the family's template, given
    # that template; None where the template reads OpenAI's shapes as they are.
    history: Callable[[list[dict[str, Any]], list[dict[str, Any]] | None, str], list[dict[str, Any]]] | None = None


# What every GLM-4 template writes first. GLM-4-9B-Chat's never names <|observation|> itself: it
# writes each turn's role as <|{{ role }}|>.
GLM_PREFIX = "[gMASK]<sop>"
# In the order they are tried. GLM-4.5's template also writes <tool_call>, then XML arguments
# (<arg_key>) that the Hermes parser does not read, so it is recognised as none of these.
TOOL_CALL_FAMILIES = (
    ToolCallFamily("Qwen2.5/Qwen3 <tool_call>",
                   lambda template: "<tool_call>" in template and "<arg_key>" not in template, HermesToolCallParser),
    ToolCallFamily("Llama 3.1 JSON", lambda template: PYTHON_TAG in template, Llama3JsonToolCallParser),
    ToolCallFamily("GLM-4", lambda template: GLM_PREFIX in template and "<tool_call>" not in template,
                   Glm4ToolCallParser, glm4_history),
)


def tool_call_family(chat_template: str | None) -> ToolCallFamily | None:
    """The family whose tool-call format the template teaches; None when it teaches none of those known."""
    if not chat_template:
        return None
    return next((family for family in TOOL_CALL_FAMILIES if family.recognises(chat_template)), None)


def known_families() -> str:
    return ", ".join(family.name for family in TOOL_CALL_FAMILIES)
