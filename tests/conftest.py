"""Every test runs with no AUTOGLM_* variables and leaves the autoglm loggers' level as it found it.

Settings are read from the environment, so a variable set on the machine running the tests
would otherwise change what they see; the command line sets the loggers' level. The one
variable kept is the CPU-feature override: it is how a whole run takes the path of another
kind of CPU (``make test`` does so on a CPU with bfloat16 units). On a GPU, ``--enforce-eager``
runs the suite a second time without CUDA graphs.
"""
from __future__ import annotations

import logging
import os

import pytest

from autoglm.config.sources import ENV_PREFIX
from autoglm.platforms import CPU_DISABLE_FLAGS_ENV


@pytest.fixture(autouse=True)
def no_autoglm_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in os.environ:
        if variable.startswith(ENV_PREFIX) and variable != CPU_DISABLE_FLAGS_ENV:
            monkeypatch.delenv(variable)


@pytest.fixture(autouse=True)
def autoglm_log_level_restored():
    logger = logging.getLogger("autoglm")
    level = logger.level
    yield
    logger.setLevel(level)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--enforce-eager", action="store_true",
                     help="run every engine as enforce_eager would: no CUDA graphs (for a GPU run of the suite)")


@pytest.fixture(autouse=True)
def eager_when_asked(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """With ``--enforce-eager``, engines capture no graphs whatever their settings say."""
    if request.config.getoption("--enforce-eager"):
        from autoglm.engine import setup

        monkeypatch.setattr(setup, "decode_graph_settings", lambda *args, **kwargs: None)
