"""``autoglm keys``: make, revoke and list the API keys of a tenants file.

A new key is printed once, alone on stdout so scripts can capture it; the file keeps only its hash.
"""
from __future__ import annotations

import argparse
import sys
from datetime import timedelta
from pathlib import Path

from autoglm.errors import quote_value
from autoglm.server.tenants.file import (Role, StoredKey, add_key_to_file, create_tenants_file, load_tenants_file,
                                         revoke_key_in_file, utc_now)
from autoglm.server.tenants.keys import generate_key, generate_key_id, hash_key

DEFAULT_TENANTS_FILE = Path("tenants.yaml")


def _create(args: argparse.Namespace) -> int:
    if args.init and not args.file.exists():
        create_tenants_file(args.file, args.tenant, Role(args.role or Role.USER.value))
        print(f"created {args.file} (readable by its owner only) with tenant '{args.tenant}'", file=sys.stderr)
    elif not args.file.exists():
        raise ValueError(f"tenants file not found: {args.file}; add --init to create it with the tenant "
                         f"{quote_value(args.tenant)}")
    tenants = load_tenants_file(args.file)
    tenant = tenants.tenant(args.tenant)
    if tenant is None:
        raise ValueError(f"no tenant {quote_value(args.tenant)} in {args.file}; tenants: "
                         f"{', '.join(known.id for known in tenants.tenants)}")
    now = utc_now()
    key = generate_key()
    stored = StoredKey(id=generate_key_id(), tenant=tenant.id, hash=hash_key(key),
                       role=Role(args.role) if args.role else None, created=now,
                       expires=now + timedelta(days=args.expires) if args.expires is not None else None)
    updated = add_key_to_file(args.file, stored)  # refused before anything is written if invalid
    print(key)
    print(f"key '{stored.id}' of tenant '{tenant.id}' (role {updated.key_role(stored).value}) written to {args.file} "
          f"as its hash; this is the only time the key is shown", file=sys.stderr)
    return 0


def _revoke(args: argparse.Namespace) -> int:
    try:
        revoke_key_in_file(args.file, args.id)
    except KeyError:
        ids = [key.id for key in load_tenants_file(args.file).keys]
        raise ValueError(f"no key '{args.id}' in {args.file}; keys: {', '.join(ids) or 'none'}") from None
    print(f"key '{args.id}' revoked in {args.file}; a running server refuses it once it reads the file again "
          f"(on SIGHUP or POST /admin/reload)",
          file=sys.stderr)
    return 0


def _list(args: argparse.Namespace) -> int:
    tenants = load_tenants_file(args.file)
    now = utc_now()
    print(f"{'id':10} {'tenant':16} {'role':7} {'created':17} {'expires':17} state")
    for key in tenants.keys:
        state = "revoked" if key.revoked else "expired" if key.expired(now) else "active"
        expires = f"{key.expires:%Y-%m-%d %H:%M}" if key.expires is not None else "never"
        print(f"{key.id:10} {key.tenant:16} {tenants.key_role(key).value:7} {key.created:%Y-%m-%d %H:%M} "
              f"{expires:17} {state}")
    return 0


def _positive_days(text: str) -> float:
    days = float(text)
    if not days > 0:
        raise argparse.ArgumentTypeError(f"expected a number of days > 0, got {text!r}")
    return days


def add_keys_subcommand(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "keys", help="make, revoke and list API keys in a tenants file",
        description="Manage the API keys of a tenants file (the tenants_file setting). The file stores only "
                    "each key's SHA-256 hash; a new key is printed once. create and revoke change only the lines "
                    "of the key, keeping the rest of the file as written.",
    )
    actions = parser.add_subparsers(dest="keys_action", required=True)
    create = actions.add_parser("create", help="make a key for a tenant and print it once")
    create.add_argument("--tenant", required=True, metavar="ID", help="id of the tenant the key speaks for")
    create.add_argument("--role", choices=[role.value for role in Role],
                        help="narrow the key to this role (default: the tenant's role)")
    create.add_argument("--init", action="store_true", help="create the tenants file with this tenant (--role, "
                        "default user; every model) if it is missing, readable by its owner only")
    create.add_argument("--expires", type=_positive_days, metavar="DAYS", help="days until the key expires "
                        "(default: never)")
    create.set_defaults(handler=_create)
    revoke = actions.add_parser("revoke", help="mark a key revoked; it stays listed")
    revoke.add_argument("id", metavar="ID", help="the key's id, as 'autoglm keys list' shows it")
    revoke.set_defaults(handler=_revoke)
    listing = actions.add_parser("list", help="list the keys: id, tenant, role, dates and state, never the key")
    listing.set_defaults(handler=_list)
    for action in (create, revoke, listing):
        action.add_argument("--file", type=Path, default=DEFAULT_TENANTS_FILE, metavar="FILE",
                            help=f"the tenants file (default: {DEFAULT_TENANTS_FILE})")
