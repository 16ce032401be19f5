"""``autoglm bench swap``: how soon a promote and a rollback take effect with streams in flight, none dropped."""
