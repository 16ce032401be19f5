"""The directory registry: numbered versions, aliases, references, errors that name what exists, and files
that are replaced whole."""
from __future__ import annotations

import json
import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from autoglm.config import AutoGLMConfig
from autoglm.registry import (
    ChecksumMismatchError,
    DirectoryRegistry,
    RegistryError,
    registry_from_config,
    verify_checksum,
)
from autoglm.registry.checkpoint import weights_sha256


def test_registering_twice_numbers_the_versions_and_the_first_becomes_stable(registry, checkpoints):
    first = registry.register("shakespeare", checkpoints[0], notes="baseline")
    second = registry.register("shakespeare", checkpoints[1])
    assert (first.version, second.version) == ("1", "2")
    assert first.path == checkpoints[0].resolve() and first.path.is_absolute()
    assert first.sha256 != second.sha256 and first.sha256 == weights_sha256(checkpoints[0])
    assert first.architecture == "LlamaForCausalLM" and first.size_bytes > 0 and first.notes == "baseline"
    assert first.created.tzinfo is not None
    assert registry.aliases("shakespeare") == {"stable": "1"}
    assert [version.version for version in registry.versions("shakespeare")] == ["1", "2"]
    assert registry.names() == ["shakespeare"]


def test_a_new_registry_object_reads_what_another_wrote(registry, checkpoints):
    registered = registry.register("shakespeare", checkpoints[0], version="v1", eval_ppl=12.5)
    assert DirectoryRegistry(registry.root).version("shakespeare", "v1") == registered


def test_a_given_version_is_kept_and_numbering_continues_after_numbers(registry, checkpoints):
    registry.register("m", checkpoints[0], version="7")
    registry.register("m", checkpoints[0], version="canary-build")
    assert registry.register("m", checkpoints[1]).version == "8"


def test_an_existing_version_is_refused(registry, checkpoints):
    registry.register("m", checkpoints[0])
    with pytest.raises(RegistryError, match=r"already has version '1'; versions: 1"):
        registry.register("m", checkpoints[1], version="1")


@pytest.mark.parametrize("name", ["../escape", "a/b", "a@b", ".hidden", ""])
def test_names_that_are_no_file_name_or_reference_are_refused(registry, checkpoints, name):
    with pytest.raises(RegistryError, match="model name .* is not allowed: expected 1-128 letters"):
        registry.register(name, checkpoints[0])


def test_a_folder_without_weights_is_refused(registry, tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "config.json").write_text('{"model_type": "llama"}')
    with pytest.raises(RegistryError, match=r"holds no weight files \(expected \*.safetensors or \*.bin\)"):
        registry.register("m", tmp_path / "empty")
    with pytest.raises(RegistryError, match="checkpoint folder not found"):
        registry.register("m", tmp_path / "absent")


def test_aliases_are_set_moved_and_removed(registry, checkpoints):
    registry.register("m", checkpoints[0])
    registry.register("m", checkpoints[1])
    registry.set_alias("m", "canary", "2")
    registry.set_alias("m", "stable", "2")
    assert registry.aliases("m") == {"stable": "2", "canary": "2"}
    registry.remove_alias("m", "canary")
    assert registry.aliases("m") == {"stable": "2"}
    with pytest.raises(RegistryError, match=r"model 'm' has no alias 'canary'; aliases: stable"):
        registry.remove_alias("m", "canary")


def test_an_alias_must_point_at_a_version_and_not_look_like_one(registry, checkpoints):
    registry.register("m", checkpoints[0])
    with pytest.raises(RegistryError, match=r"at version '9': versions: 1"):
        registry.set_alias("m", "canary", "9")
    with pytest.raises(RegistryError, match="digits alone would hide the version"):
        registry.set_alias("m", "2", "1")
    with pytest.raises(RegistryError, match=r"no model 'other' in the registry .*; models: m"):
        registry.set_alias("other", "stable", "1")
    assert not (registry.root / ".other.lock").exists()


def test_references_resolve_to_stable_an_alias_or_a_version(registry, checkpoints):
    registry.register("m", checkpoints[0])
    registry.register("m", checkpoints[1])
    registry.set_alias("m", "canary", "2")
    assert registry.resolve("m").version == "1"
    assert registry.resolve("m@stable").version == "1"
    assert registry.resolve("m@canary").version == "2"
    assert registry.resolve("m@2").version == "2"
    assert registry.resolve("m@2").reference == "m@2"


def test_an_alias_is_tried_before_a_version_of_the_same_name(registry, checkpoints):
    registry.register("m", checkpoints[0], version="latest")
    registry.register("m", checkpoints[1], version="next")
    registry.set_alias("m", "latest", "next")
    assert registry.resolve("m@latest").version == "next"


def test_unresolvable_references_name_what_exists(registry, checkpoints):
    registry.register("m", checkpoints[0])
    registry.register("m", checkpoints[1])
    with pytest.raises(RegistryError, match=r"model 'm' has no alias or version '3'; aliases: stable=1; "
                                            r"versions: 1, 2"):
        registry.resolve("m@3")
    with pytest.raises(RegistryError, match=r"no model 'n' in the registry .*; models: m"):
        registry.resolve("n")
    with pytest.raises(RegistryError, match=r"malformed: expected NAME, NAME@ALIAS or NAME@VERSION"):
        registry.resolve("m@")
    registry.remove_alias("m", "stable")
    with pytest.raises(RegistryError, match=r"no alias or version 'stable'; aliases: none; versions: 1, 2"):
        registry.resolve("m")


def test_an_empty_registry_has_no_names_and_says_so(registry):
    assert registry.names() == []
    with pytest.raises(RegistryError, match="models: none"):
        registry.versions("m")


def test_the_checksum_catches_a_changed_added_or_missing_weight_file(registry, checkpoints, tmp_path):
    copy = Path(shutil.copytree(checkpoints[0], tmp_path / "copy"))
    version = registry.register("m", copy)
    verify_checksum(version)
    weights = copy / "model.safetensors"
    original = weights.read_bytes()
    weights.write_bytes(original[:-1] + bytes([original[-1] ^ 1]))
    with pytest.raises(ChecksumMismatchError, match=r"m@1: the weight files in .* changed since they were "
                                                    r"registered"):
        verify_checksum(version)
    weights.write_bytes(original)
    verify_checksum(version)
    (copy / "extra.bin").write_bytes(b"\0")
    with pytest.raises(ChecksumMismatchError):
        verify_checksum(version)
    shutil.rmtree(copy)
    with pytest.raises(ChecksumMismatchError, match="its checkpoint folder .* is missing"):
        verify_checksum(version)


def test_a_failed_write_leaves_the_old_file_whole(registry, checkpoints, monkeypatch):
    registry.register("m", checkpoints[0])
    model_file = registry.root / "m.json"
    before = model_file.read_text()

    def disk_full(fd: int) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "fsync", disk_full)  # the new text is written, then cannot be made durable
    with pytest.raises(OSError, match="disk full"):
        registry.set_alias("m", "canary", "1")
    monkeypatch.undo()
    assert model_file.read_text() == before
    assert sorted(file.name for file in registry.root.iterdir()) == [".m.lock", "m.json"]


def test_concurrent_registrations_each_get_their_own_version(registry, checkpoints):
    with ThreadPoolExecutor(max_workers=8) as pool:
        versions = list(pool.map(lambda _: registry.register("m", checkpoints[0]).version, range(8)))
    assert sorted(versions, key=int) == [str(number) for number in range(1, 9)]
    assert len(registry.versions("m")) == 8


def test_a_damaged_file_is_reported_with_its_path(registry, checkpoints):
    registry.register("m", checkpoints[0])
    (registry.root / "m.json").write_text("{not json")
    with pytest.raises(RegistryError, match=r"the registry file .*m.json is damaged"):
        registry.versions("m")


def test_the_file_is_plain_json_with_the_absolute_checkpoint_path(registry, checkpoints):
    registry.register("m", checkpoints[0])
    data = json.loads((registry.root / "m.json").read_text())
    assert data["aliases"] == {"stable": "1"}
    assert data["versions"][0]["path"] == str(checkpoints[0].resolve())


def test_the_settings_choose_the_folder(tmp_path, monkeypatch):
    versions = AutoGLMConfig(registry_dir=str(tmp_path / "r")).server_config().versions
    assert registry_from_config(versions).root == tmp_path / "r"
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert registry_from_config(AutoGLMConfig().server_config().versions).root == tmp_path / "data" / "autoglm" / "registry"
