"""Images in chat requests: where they may come from, how they are read and checked, and how they become the
prompt's image tokens and the pixels the engine encodes."""
