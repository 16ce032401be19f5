"""Images made ready for a vision-language model, the same way wherever a prompt is built (server, bench)."""
