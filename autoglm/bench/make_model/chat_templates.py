"""Chat templates in the layouts of GLM-4.1V and Qwen2.5-VL, cut down to roles, text and images.

An image part renders as the model's own markers around one image token, which the model's processor
then repeats once per merged patch of that image.
"""
from __future__ import annotations


def _content(image_markers: str) -> str:
    """A message's content: a string as it is, or a list of text and image parts in order."""
    return (
        "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
        "{% for part in message['content'] %}"
        f"{{% if part['type'] == 'image' %}}{image_markers}"
        "{% elif part['type'] == 'text' %}{{ part['text'] }}"
        "{% else %}{{ raise_exception('a content part must be of type text or image, not ' ~ part['type']) }}"
        "{% endif %}{% endfor %}{% endif %}"
    )


GLM4V_CHAT_TEMPLATE = (
    "{% for message in messages %}<|{{ message['role'] }}|>\n"
    + _content("<|begin_of_image|><|image|><|end_of_image|>")
    + "{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)

QWEN2_5_VL_CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    + _content("<|vision_start|><|image_pad|><|vision_end|>")
    + "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
