"""The OpenAI-compatible HTTP server behind ``autoglm serve``."""
