"""Anthropic's request fields this server cannot honour: accepted at values that ask for nothing, refused otherwise
(as the chat side's, see openai/unsupported.py)."""
from __future__ import annotations

from autoglm.server.openai.unsupported import UnimplementedField

MESSAGES_FIELDS_NOT_HONOURED = (
    UnimplementedField("service_tier", (None, "auto", "standard_only")),  # one tier here: the standard one
    UnimplementedField("container", (None,)),
    UnimplementedField("mcp_servers", (None, [])),
    UnimplementedField("context_management", (None,)),
    UnimplementedField("inference_geo", (None,)),
    UnimplementedField("speed", (None, "standard")),
    UnimplementedField("diagnostics", (None,)),
    UnimplementedField("output_config.effort", (None,)),  # thinking is asked for with `thinking`
)
