"""A tenant allowed only models the server does not serve gets a 403 on every request: said at load, not then."""
from __future__ import annotations

import logging
from collections.abc import Collection

from autoglm.server.tenants.file import ANY_MODEL, TenantsFile

logger = logging.getLogger(__name__)


def warn_of_unserved_models(tenants: TenantsFile, served: Collection[str]) -> None:
    """One warning per tenant whose `models` names none of `served`, naming both lists."""
    for tenant in tenants.tenants:
        if ANY_MODEL in tenant.models or any(model in served for model in tenant.models):
            continue
        logger.warning("tenant '%s' may use only %s, none of which this server serves (it serves %s): its "
                       "requests will be refused until its models name a served one", tenant.id,
                       ", ".join(tenant.models), ", ".join(served))
