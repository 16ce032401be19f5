"""The build time a start-up announces: this machine's last measured build, else the reference figure scaled."""
from __future__ import annotations

import json

import pytest

from autoglm.kernels import build_estimate
from autoglm.kernels.background_build import BackgroundBuild
from autoglm.kernels.build_estimate import (REFERENCE_BUILD_S, REFERENCE_CPUS, estimated_build_seconds,
                                            record_build_seconds)
from tests.kernels.fake_kernels import fake_spec
from tests.kernels.test_kernel_build import HANG_S


@pytest.fixture
def cpus(monkeypatch):
    """Set how many CPUs this process may use."""
    def set_cpus(count: int) -> None:
        monkeypatch.setattr(build_estimate, "usable_cpus", lambda: count)
    return set_cpus


def test_before_any_build_the_reference_build_is_scaled_to_fewer_cpus_but_not_to_more(tmp_path, cpus):
    spec = fake_spec(tmp_path / "src")
    cpus(REFERENCE_CPUS)
    assert estimated_build_seconds(spec, tmp_path) == REFERENCE_BUILD_S
    cpus(1)
    assert estimated_build_seconds(spec, tmp_path) == REFERENCE_BUILD_S * REFERENCE_CPUS
    cpus(REFERENCE_CPUS * 8)  # one file takes most of the build: more CPUs do not shorten it
    assert estimated_build_seconds(spec, tmp_path) == REFERENCE_BUILD_S


def test_the_last_measured_build_replaces_the_reference_and_is_scaled_the_same_way(tmp_path, cpus):
    spec = fake_spec(tmp_path / "src")
    cpus(4)
    record_build_seconds(spec, tmp_path, 300.0)
    record_build_seconds(spec, tmp_path, 41.5)
    assert estimated_build_seconds(spec, tmp_path) == 41.5
    cpus(2)
    assert estimated_build_seconds(spec, tmp_path) == 83.0
    assert estimated_build_seconds(fake_spec(tmp_path / "other", answer=7), tmp_path) == 83.0  # same library, new sources


def test_an_unreadable_record_falls_back_to_the_reference(tmp_path, cpus):
    spec = fake_spec(tmp_path / "src")
    cpus(REFERENCE_CPUS)
    record_build_seconds(spec, tmp_path, 10.0)
    next(tmp_path.glob("*.build-seconds.json")).write_text("{not json")
    assert estimated_build_seconds(spec, tmp_path) == REFERENCE_BUILD_S


def test_a_successful_build_records_its_wall_time_and_the_start_up_announces_it(tmp_path, caplog):
    spec = fake_spec(tmp_path / "src")
    root = tmp_path / "cache"
    build = BackgroundBuild(spec, root)
    build.start()
    assert build.wait(HANG_S).answer() == 42
    record = json.loads(next(root.glob("*.build-seconds.json")).read_text())
    assert record["seconds"] > 0 and record["cpus"] == build_estimate.usable_cpus()
    measured = estimated_build_seconds(spec, root)
    assert measured == record["seconds"]  # this tiny library's own time, not the reference
    spec.library(root).unlink()  # built again: announced with the time measured
    with caplog.at_level("INFO", logger="autoglm.kernels.background_build"):
        again = BackgroundBuild(spec, root)
        again.start()
        assert again.wait(HANG_S) is not None
    assert f"(about {measured:.0f} s on this machine" in caplog.text
