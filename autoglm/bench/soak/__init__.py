"""``autoglm bench soak``: steady streams measured with and without hostile traffic beside them."""
