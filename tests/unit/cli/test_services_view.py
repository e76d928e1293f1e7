"""``get services``: where each supervised process serves its metrics (from its liveness file)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from hyperjob.cli.main import main


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HYPERJOB_HOME", str(tmp_path))
    logs = tmp_path / "logs"
    logs.mkdir()
    row = {"state": "running", "restarts": 0, "startedAt": 0.0, "lastExit": None, "pid": 1}
    status = {
        "pid": 1,
        "ready": True,
        "nats": "nats://127.0.0.1:4222",
        "redis": "redis://127.0.0.1:6379",
        "dashboard": "http://127.0.0.1:8765/",
        "services": [
            {**row, "name": "nats-server", "log": str(tmp_path / "nats" / "nats-server.log")},
            {**row, "name": "splitter", "log": str(logs / "splitter.log")},
            {**row, "name": "job_controller@c1", "log": str(logs / "job_controller-c1.log")},
            {**row, "name": "dashboard", "log": str(logs / "dashboard.log")},
        ],
    }
    (tmp_path / "services.json").write_text(json.dumps(status))
    (logs / "splitter.alive").write_text(json.dumps({"instance": "splitter", "metrics": "http://127.0.0.1:4100"}))
    (logs / "job_controller-c1.alive").write_text("{not json")
    return tmp_path


def test_each_service_shows_its_metrics_endpoint_from_its_liveness_file(home: Path) -> None:
    from hyperjob.cli.config import services_file

    assert services_file().parent == home
    listed = json.loads(CliRunner().invoke(main, ["get", "services", "-o", "json"]).output)["items"]
    metrics = {i["name"]: i["endpoints"]["metrics"] for i in listed}
    assert metrics == {
        "nats-server": "",
        "splitter": "http://127.0.0.1:4100/metrics",
        "job_controller@c1": "",  # an unreadable liveness file: not known (yet)
        "dashboard": "http://127.0.0.1:8765/metrics",
    }
    wide = CliRunner().invoke(main, ["get", "services", "-o", "wide"]).output.splitlines()
    assert wide[0].split()[5:7] == ["LAST", "EXIT"] and wide[0].split()[7] == "METRICS"
    assert "http://127.0.0.1:4100/metrics" in next(line for line in wide if line.startswith("splitter "))
