"""Small chat templates in each family's own shape, that know tools: what the tests' tiny models render with."""
from __future__ import annotations

# Qwen2.5's layout, cut down (the tools by name only, to fit a tiny model's context): tools in the system turn, calls in <tool_call> blocks, results as "tool" turns.
QWEN_TEMPLATE = (
    "{% if tools %}<|im_start|>system\n# Tools\n<tools>{% for tool in tools %}\n{{ tool.function.name }}{% endfor %}\n"
    "</tools>\nCall one in <tool_call></tool_call> tags.<|im_end|>\n{% endif %}"
    "{% for message in messages %}"
    "{% if message.role == 'tool' %}<|im_start|>user\n<tool_response>\n{{ message.content }}\n"
    "</tool_response><|im_end|>\n"
    "{% else %}<|im_start|>{{ message.role }}\n{{ message.content }}"
    "{% for call in message.tool_calls or [] %}\n<tool_call>\n"
    "{\"name\": \"{{ call.function.name }}\", \"arguments\": {{ call.function.arguments | tojson }}}\n</tool_call>"
    "{% endfor %}<|im_end|>\n{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
