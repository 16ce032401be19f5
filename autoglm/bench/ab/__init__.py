"""``autoglm bench ab``: one benchmark run on two revisions in turn (A, B, A, B), so that the
machine's noise hits both, and each headline metric's after/before ratio checked against a threshold.
"""
