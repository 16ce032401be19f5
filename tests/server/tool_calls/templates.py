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

# GLM-4.5/4.6's layout, cut down (the tools by name only): a call is <tool_call>NAME, then each
# argument as <arg_key>/<arg_value> lines (non-string values as JSON), then </tool_call>; every
# assistant turn opens with <think>...</think>, holding its reasoning only after the last user turn;
# enable_thinking false closes the thinking in the generation prompt.
GLM45_TEMPLATE = (
    "[gMASK]<sop>{% if tools %}<|system|>\n# Tools{% for tool in tools %}{{ '\\n' + tool.function.name }}{% endfor %}"
    "{{ '\\nCall one as <tool_call>name\\n<arg_key>key</arg_key>\\n<arg_value>value</arg_value>\\n</tool_call>' }}"
    "{% endif %}"
    "{% set ns = namespace(last_user=-1) %}{% for m in messages %}"
    "{% if m.role == 'user' %}{% set ns.last_user = loop.index0 %}{% endif %}{% endfor %}"
    "{% for m in messages %}{% set content = m.content or '' %}"
    "{% if m.role == 'user' %}<|user|>\n{{ content }}"
    "{{ '/nothink' if enable_thinking is defined and not enable_thinking else '' }}"
    "{% elif m.role == 'assistant' %}<|assistant|>"
    "{% set reasoning = m.reasoning_content if m.reasoning_content is string else '' %}"
    "{% if not reasoning and '</think>' in content %}"
    "{% set reasoning = content.split('</think>')[0].split('<think>')[-1].strip() %}"
    "{% set content = content.split('</think>')[-1] %}{% endif %}"
    "{% if loop.index0 > ns.last_user and reasoning %}{{ '\n<think>' + reasoning.strip() + '</think>' }}"
    "{% else %}{{ '\n<think></think>' }}{% endif %}"
    "{% if content.strip() %}{{ '\n' + content.strip() }}{% endif %}"
    "{% for call in m.tool_calls or [] %}{{ '\n<tool_call>' + call.function.name }}"
    "{% for key, value in call.function.arguments.items() %}"
    "{{ '\n<arg_key>' + key + '</arg_key>\n<arg_value>' }}{{ value if value is string else value | tojson }}"
    "{{ '</arg_value>' }}{% endfor %}{{ '\n</tool_call>' }}{% endfor %}"
    "{% elif m.role == 'tool' %}{% if loop.first or messages[loop.index0 - 1].role != 'tool' %}<|observation|>"
    "{% endif %}{{ '\n<tool_response>\n' + content + '\n</tool_response>' }}"
    "{% elif m.role == 'system' %}<|system|>\n{{ content }}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>"
    "{{ '\n<think></think>' if enable_thinking is defined and not enable_thinking else '' }}{% endif %}"
)

# GLM-4.7's layout, cut down: the name on the same line as the first <arg_key>, no newlines between
# tags, a call without arguments written <tool_call>NAME</tool_call>; the generation prompt opens the
# thinking (<think>), or closes it (</think>) when enable_thinking is false.
GLM47_TEMPLATE = (
    "[gMASK]<sop>{% if tools %}<|system|>\n# Tools{% for tool in tools %}{{ '\\n' + tool.function.name }}{% endfor %}"
    "{{ '\\nCall one as <tool_call>name<arg_key>key</arg_key><arg_value>value</arg_value></tool_call>' }}{% endif %}"
    "{% set ns = namespace(last_user=-1) %}{% for m in messages %}"
    "{% if m.role == 'user' %}{% set ns.last_user = loop.index0 %}{% endif %}{% endfor %}"
    "{% for m in messages %}{% set content = m.content or '' %}"
    "{% if m.role == 'user' %}<|user|>{{ content }}"
    "{% elif m.role == 'assistant' %}<|assistant|>"
    "{% set reasoning = m.reasoning_content if m.reasoning_content is string else '' %}"
    "{% if loop.index0 > ns.last_user and reasoning %}{{ '<think>' + reasoning.strip() + '</think>' }}"
    "{% else %}</think>{% endif %}{{ content.strip() }}"
    "{% for call in m.tool_calls or [] %}{{ '<tool_call>' + call.function.name }}"
    "{% for key, value in call.function.arguments.items() %}"
    "{{ '<arg_key>' + key + '</arg_key><arg_value>' }}{{ value if value is string else value | tojson }}"
    "{{ '</arg_value>' }}{% endfor %}</tool_call>{% endfor %}"
    "{% elif m.role == 'tool' %}{% if loop.first or messages[loop.index0 - 1].role != 'tool' %}<|observation|>"
    "{% endif %}{{ '<tool_response>' + content + '</tool_response>' }}"
    "{% elif m.role == 'system' %}<|system|>{{ content }}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>"
    "{{ '</think>' if enable_thinking is defined and not enable_thinking else '<think>' }}{% endif %}"
)
