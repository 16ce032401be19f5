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

# GLM-4-0414's layout, cut down: the tools from `tools` in a system turn; a call an assistant turn
# whose metadata names the function; a result an observation turn; other roles not rendered at all.
GLM4_0414_TEMPLATE = (
    "[gMASK]<sop>{% if tools %}<|system|>\n# Tools{% for tool in tools %}\n## {{ tool.function.name }}"
    "{% endfor %}{% endif %}"
    "{% for message in messages %}{% set meta = message.get('metadata', '') %}"
    "{% if message.role == 'system' %}<|system|>\n{{ message.content }}"
    "{% elif message.role == 'user' %}<|user|>\n{{ message.content }}"
    "{% elif message.role == 'assistant' and meta %}<|assistant|>{{ meta }}\n{{ message.content }}"
    "{% elif message.role == 'assistant' %}<|assistant|>\n{{ message.content }}"
    "{% elif message.role == 'observation' %}<|observation|>\n{{ message.content }}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
# GLM-4-9B-Chat's layout, cut down: the tools read from a message's own `tools` key; every turn with
# content rendered as <|role|>metadata, turns without content skipped.
GLM4_9B_CHAT_TEMPLATE = (
    "[gMASK]<sop>{% for item in messages %}{% if item['tools'] is defined %}<|system|>\n# Tools"
    "{% for tool in item['tools'] %}\n## {{ tool.function.name }}{% endfor %}{% endif %}"
    "{% if item['content'] %}<|{{ item['role'] }}|>{{ item['metadata'] }}\n{{ item['content'] }}{% endif %}"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
