"""``autoglm bench serve``: load an OpenAI-compatible server with timed streaming requests.

One idea per module: the prompts (``datasets``), when each request is sent (``arrivals``),
one timed request (``client``), a whole run at one rate (``runner``), what it measured
(``metrics``), how it is shown (``summary``, ``plot``), and the command line (``command``).
"""
