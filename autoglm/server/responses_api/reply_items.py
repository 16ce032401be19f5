"""A reply's output items: its thinking, its text and its calls, in the order the model writes them."""
from __future__ import annotations

from autoglm.server.openai.responses import AssistantMessage
from autoglm.server.responses_api.items import new_id
from autoglm.server.responses_api.objects import (
    FunctionCallMade,
    ItemStatus,
    MessageOutput,
    OutputItem,
    OutputTextPart,
    ReasoningOutput,
    ReasoningTextPart,
)


def reasoning_output(item_id: str, thinking: str, status: ItemStatus, shows_encrypted: bool) -> ReasoningOutput:
    """`shows_encrypted`: whether the request included ``reasoning.encrypted_content``."""
    return ReasoningOutput(id=item_id, content=[ReasoningTextPart(text=thinking)],
                           encrypted_content=thinking if shows_encrypted else None, status=status)


def message_output(item_id: str, text: str, status: ItemStatus) -> MessageOutput:
    return MessageOutput(id=item_id, status=status, content=[OutputTextPart(text=text)])


def whole_output(message: AssistantMessage, status: ItemStatus, shows_encrypted: bool) -> list[OutputItem]:
    """A whole reply's items, each with `status` but the thinking, complete once the answer began. A reply with
    no text but its thinking or calls has no message item; one with nothing at all has an empty one, as a
    streamed reply does."""
    items: list[OutputItem] = []
    calls = message.tool_calls or []
    if message.reasoning_content is not None:
        thinking_status = "completed" if message.content or calls else status
        items.append(reasoning_output(new_id("rs"), message.reasoning_content, thinking_status, shows_encrypted))
    if message.content or (message.content is not None and not items and not calls):
        items.append(message_output(new_id("msg"), message.content, status))
    items.extend(FunctionCallMade(id=new_id("fc"), call_id=call.id, name=call.function.name,
                                  arguments=call.function.arguments, status=status) for call in calls)
    return items
