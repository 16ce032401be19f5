"""``autoglm bench tenants``: what tenants cost a saturated server, and how fairly it shares itself between them."""
