"""Where thinking stands when the output starts, read from what the chat template wrote for the turn."""
from __future__ import annotations

from autoglm.thinking import ThinkingPhase


def prompt_phase(generation_prompt: str, start: str, end: str) -> ThinkingPhase:
    """The phase the text the template appended for this turn leaves thinking in ("<|assistant|>",
    "<|assistant|>\\n<think></think>", "<|im_start|>assistant\\n<think>\\n"): the last marker decides,
    and with neither the model may open thinking itself."""
    start_at, end_at = generation_prompt.rfind(start), generation_prompt.rfind(end)
    if end_at >= 0 and start_at < end_at + len(end):  # a start marker found inside the end marker is the end's
        return ThinkingPhase.CLOSED
    return ThinkingPhase.NOT_BEGUN if start_at < 0 else ThinkingPhase.OPEN
