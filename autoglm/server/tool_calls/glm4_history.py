"""A conversation reshaped for GLM-4's chat templates (GLM-4-9B-Chat, GLM-4-0414).

Those templates know no ``tool`` role and no ``tool_calls``: a tool's result is an ``observation``
turn, and a call is an assistant turn whose ``metadata`` is the function's name and whose content
is its arguments, rendered ``<|assistant|>name\\n{...}``, the very text the model writes to call
(see glm4.py). Sent as OpenAI shapes them, both would vanish from the prompt: the templates skip
a role they do not know, and an assistant turn with empty content. GLM-4-9B-Chat's template also
reads the tools from a message's ``tools`` key rather than from the ``tools`` it is given.
"""
from __future__ import annotations

import json
from typing import Any

# How GLM-4-9B-Chat's template reads the tools: from the message it is rendering.
TOOLS_ON_A_MESSAGE = "item['tools']"


def glm4_history(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                 chat_template: str) -> list[dict[str, Any]]:
    """`messages` (chat template inputs, OpenAI's shapes) in the shapes GLM-4's templates render."""
    history: list[dict[str, Any]] = []
    for message in messages:
        if message["role"] == "tool":
            history.append({"role": "observation", "content": message["content"]})
        elif message["role"] == "assistant" and message.get("tool_calls"):
            if message["content"]:
                history.append({"role": "assistant", "content": message["content"]})
            history.extend({"role": "assistant", "metadata": call["function"]["name"],
                            "content": _arguments_text(call["function"]["arguments"])}
                           for call in message["tool_calls"])
        else:
            history.append(message)
    if tools and TOOLS_ON_A_MESSAGE in chat_template:
        if history and history[0]["role"] == "system":
            history[0] = {**history[0], "tools": tools}
        else:
            history.insert(0, {"role": "system", "content": "", "tools": tools})
    return history


def _arguments_text(arguments: dict[str, Any] | str) -> str:
    """The arguments as JSON text; text that was not a JSON object is passed on as it came."""
    return arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
