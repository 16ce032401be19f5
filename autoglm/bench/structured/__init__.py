"""``autoglm bench structured``: what constrained requests cost the unconstrained ones decoding beside them."""
