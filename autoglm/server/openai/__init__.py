"""The OpenAI-compatible API: request and response bodies, errors, streaming, and one module per endpoint."""
