"""A chat template given as a file (vLLM's --chat-template), read and checked where the settings are read, so that
a broken one stops the start in one line instead of failing every chat request."""
from __future__ import annotations

from pathlib import Path

from autoglm.config.sources import ConfigError


def read_chat_template(path: str) -> str:
    """The Jinja template in the file at `path`; a ConfigError naming the file and what is wrong otherwise."""
    try:
        text = Path(path).expanduser().read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"cannot read the chat template file {path}: {error}") from None
    error = template_syntax_error(text)
    if error is not None:
        raise ConfigError(f"the chat template file {path} is not a valid Jinja template: {error}") from None
    return text


def template_syntax_error(text: str) -> str | None:
    """What makes `text` no valid Jinja template (the message and its line); None when it parses."""
    import jinja2  # only where a template is given: the settings are read by commands that never need it

    try:
        jinja2.Environment(extensions=["jinja2.ext.loopcontrols"]).parse(text)
    except jinja2.TemplateSyntaxError as error:
        return f"{error.message} (line {error.lineno})"
    return None
