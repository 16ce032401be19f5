"""docs/TENANTS.md's example tenants file is a valid one, every field of it."""
from __future__ import annotations

import re
from pathlib import Path

from autoglm.server.tenants.file import TenantLimits, Tenant, StoredKey, load_tenants_file

DOC = Path(__file__).resolve().parents[2] / "docs" / "TENANTS.md"
YAML_BLOCK = re.compile(r"^```yaml\n(.*?)^```", re.DOTALL | re.MULTILINE)


def example_tenants_file() -> str:
    """The first YAML block of the doc: the full example under "The tenants file"."""
    return YAML_BLOCK.search(DOC.read_text())[1]


def test_the_example_tenants_file_validates_and_shows_every_field(tmp_path):
    path = tmp_path / "tenants.yaml"
    path.write_text(example_tenants_file())
    tenants = load_tenants_file(path)
    shown_tenant_fields = set().union(*(tenant.model_fields_set for tenant in tenants.tenants))
    assert shown_tenant_fields == set(Tenant.model_fields)
    shown_limits = set().union(*(tenant.limits.model_fields_set for tenant in tenants.tenants))
    assert shown_limits == set(TenantLimits.model_fields)
    shown_key_fields = set().union(*(key.model_fields_set for key in tenants.keys))
    assert shown_key_fields == set(StoredKey.model_fields)
