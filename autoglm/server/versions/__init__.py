"""Serving several model versions from one process: the pool of loaded versions, routing by the `model`
field, promote/rollback/canary, automatic rollback and the /admin/models routes."""
