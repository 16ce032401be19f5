"""Speculative decoding: propose a few tokens cheaply, verify them all in one pass of the target.

A decoding sequence gets lookahead slots from the scheduler, a proposer fills them
(:mod:`~autoglm.engine.speculative.ngram`, :mod:`~autoglm.engine.speculative.draft_model` or
:mod:`~autoglm.engine.speculative.mtp`), the
target samples at its last token and at every proposed one, and :func:`~autoglm.engine.speculative.verify.num_accepted`
keeps the proposals up to the first the target did not draw itself.
"""
