"""The one error an A/B comparison reports instead of results: it could not measure both sides."""


class ABError(Exception):
    """A revision could not be checked out or its benchmark failed; the message says which and where."""
