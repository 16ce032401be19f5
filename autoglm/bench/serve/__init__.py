"""``autoglm bench serve``: load an OpenAI-compatible server with timed streaming requests.

Its options (``command``), the run over every rate (``measure``), how it is shown (``report``,
``plot``) and the server's prefix-cache counters (``server_counters``); the HTTP load itself,
shared with the other server benchmarks, is in :mod:`autoglm.bench.lib`.
"""
