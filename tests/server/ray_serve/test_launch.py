"""``autoglm serve --ray`` keeps the application up until a stop signal, then deletes it so replicas drain."""
from __future__ import annotations

import os
import signal

import pytest

from autoglm.config import AutoGLMConfig
from autoglm.server.ray_serve import launch

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def calls(monkeypatch) -> list[str]:
    """Ray and Serve as the launcher calls them, recorded instead of started; signal handlers restored after."""
    recorded: list[str] = []
    monkeypatch.setattr(launch.ray, "init", lambda: recorded.append("init"))
    monkeypatch.setattr(launch.serve, "start", lambda http_options: recorded.append(f"start {http_options}"))
    monkeypatch.setattr(launch.serve, "run", lambda app, name, route_prefix: recorded.append(f"run {name}"))
    monkeypatch.setattr(launch.serve, "delete", lambda name: recorded.append(f"delete {name}"))
    monkeypatch.setattr(launch, "build_application", lambda config: "application")
    handlers = {handled: signal.getsignal(handled) for handled in (*launch.STOP_SIGNALS, signal.SIGHUP)}
    yield recorded
    for handled, handler in handlers.items():
        signal.signal(handled, handler)


def test_a_stop_signal_deletes_the_application(calls, monkeypatch):
    def deployed_then_stopped(app, name, route_prefix) -> None:
        calls.append(f"run {name}")
        os.kill(os.getpid(), signal.SIGTERM)  # as a user's stop arrives while the application serves

    monkeypatch.setattr(launch.serve, "run", deployed_then_stopped)
    assert launch.run_on_ray(AutoGLMConfig(port=8123).server_config()) == 0
    assert calls == ["init", "start {'host': '127.0.0.1', 'port': 8123}", f"run {launch.APP_NAME}",
                     f"delete {launch.APP_NAME}"]


def test_a_signal_while_deploying_deletes_once_deployed_and_a_second_exits_at_once(calls, monkeypatch):
    def deploy_interrupted(app, name, route_prefix) -> None:
        os.kill(os.getpid(), signal.SIGINT)
        calls.append(f"run {name}")

    monkeypatch.setattr(launch.serve, "run", deploy_interrupted)
    assert launch.run_on_ray(AutoGLMConfig().server_config()) == 0
    assert calls[-2:] == [f"run {launch.APP_NAME}", f"delete {launch.APP_NAME}"]

    def deploy_interrupted_twice(app, name, route_prefix) -> None:
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(launch.serve, "run", deploy_interrupted_twice)
    with pytest.raises(SystemExit) as exited:
        launch.run_on_ray(AutoGLMConfig().server_config())
    assert exited.value.code == 128 + signal.SIGTERM


def test_sighup_has_every_replica_read_the_tenants_file_again_until_a_stop_signal(calls, monkeypatch):
    def deployed_then_signalled(app, name, route_prefix) -> None:
        calls.append(f"run {name}")
        for sent in (signal.SIGHUP, signal.SIGHUP, signal.SIGTERM):
            os.kill(os.getpid(), sent)

    monkeypatch.setattr(launch.serve, "run", deployed_then_signalled)
    monkeypatch.setattr(launch, "reload_every_replica", lambda: calls.append("reload"))
    assert launch.run_on_ray(AutoGLMConfig().server_config()) == 0
    assert calls[-4:] == [f"run {launch.APP_NAME}", "reload", "reload", f"delete {launch.APP_NAME}"]
