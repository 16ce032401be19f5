"""Anthropic's Messages API: its requests translated into chat requests, its answers and errors in its shapes."""
