"""Who a batch's lines speak for: the key that made the batch, looked up again as each line runs, so that a
key revoked or expired, or a tenant's changed role, models or limits, apply to the lines still to run."""
from __future__ import annotations

from autoglm.server.batches.records import BatchRecord
from autoglm.server.tenants.keyring import KeyRing, Principal, invalid_key


def line_principal(keyring: KeyRing | None, batch: BatchRecord) -> Principal | None:
    """The principal of `batch`'s lines now; None on a server without keys; a 401 APIError when the key no
    longer speaks for anyone."""
    if keyring is None:
        return None
    if batch.key_id is None:
        raise invalid_key("The batch was made while this server had no keys; it has keys now, and lines run only "
                          "as a key's: make the batch again with one.")
    return keyring.principal_of_key(batch.key_id)
