"""MLflow's model URIs as the MLflow registry reads them."""
from __future__ import annotations

import pytest

from autoglm.registry import RegistryError
from autoglm.registry.models_uri import ModelsUri, is_models_uri, parse_models_uri


def test_a_version_and_an_alias_are_told_apart():
    assert parse_models_uri("models:/shakespeare/2") == ModelsUri(name="shakespeare", version="2")
    assert parse_models_uri("models:/shakespeare@stable") == ModelsUri(name="shakespeare", alias="stable")


def test_only_the_models_scheme_is_a_models_uri():
    assert is_models_uri("models:/m@stable") and not is_models_uri("m@stable")


@pytest.mark.parametrize("uri", ["models:/", "models:/m", "models:/m/", "models:/m/latest", "models:/m@",
                                 "models:/@stable", "models:/m/2/extra", "m@stable"])
def test_malformed_uris_name_both_forms(uri):
    with pytest.raises(RegistryError, match="expected models:/NAME/VERSION .* or models:/NAME@ALIAS"):
        parse_models_uri(uri)
