"""`up` says the system is ready, and kubectl may go, only once the apiserver takes connections:
it once said so while kubectl's first call was refused."""

from __future__ import annotations

import socket
from types import SimpleNamespace

from hyperjob.cli.up import System


def answers(url: str) -> bool:
    return System.api_answers(SimpleNamespace(apiserver_url=url))  # type: ignore[arg-type]


def test_ready_waits_for_the_apiserver_to_listen_and_a_system_without_one_does_not_wait() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        assert answers(f"https://127.0.0.1:{port}")
    assert not answers(f"https://127.0.0.1:{port}")  # closed: not yet (or no longer) listening
    assert answers("")
