"""Chat tools: what a request's tools and tool_choice ask of the model, and the calls read back out of its text."""
