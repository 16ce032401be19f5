"""The transformers processor of a vision checkpoint, for references in tests: the model's own processor
class without its video processor, which transformers builds only with torchvision (not installed)."""
from __future__ import annotations

import json
from pathlib import Path

import transformers
from transformers import AutoImageProcessor, AutoTokenizer


def image_only_processor(folder: Path):
    """The checkpoint's processor (image processor on the PIL backend, tokenizer, chat template)."""
    processor_class = getattr(transformers, json.loads((folder / "preprocessor_config.json").read_text())
                              ["processor_class"])

    class ImageOnlyProcessor(processor_class):
        @classmethod
        def get_attributes(cls):
            return ["image_processor", "tokenizer"]

    tokenizer = AutoTokenizer.from_pretrained(folder)
    return ImageOnlyProcessor(image_processor=AutoImageProcessor.from_pretrained(folder, backend="pil"),
                              tokenizer=tokenizer, chat_template=tokenizer.chat_template)
