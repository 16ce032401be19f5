"""``autoglm bench batch``: whether interactive requests keep their time to first token while a batch runs."""
