"""``autoglm bench make-model``: a random-weight checkpoint of a real model's shape."""
