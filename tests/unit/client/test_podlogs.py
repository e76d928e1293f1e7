"""``podlogs.LogReader``: a pod's log read as it grows, as ``hyperjob logs -f`` and the
apiserver's ``pods/log`` follow it."""

from __future__ import annotations

from pathlib import Path

from hyperjob.client.podlogs import LogReader


def exec_log(tmp_path: Path, text: bytes) -> Path:
    (tmp_path / "log").write_bytes(text)
    return tmp_path / "log"


def container_log(tmp_path: Path, text: bytes) -> Path:
    (tmp_path / "container").write_text("hyperjob-node-agent-a-p-0")
    return exec_log(tmp_path, text)


def test_the_last_lines_then_what_is_written_since(tmp_path: Path) -> None:
    path = exec_log(tmp_path, b"one\ntwo\nthree\n")
    with LogReader(path) as log:
        assert log.tail(2) == b"two\nthree\n"
        assert log.read() == b""
        with open(path, "ab") as out:
            out.write(b"four\n")
        assert log.read() == b"four\n"
        assert log.tail(0) == b""


def test_a_container_records_half_written_is_read_once_whole(tmp_path: Path) -> None:
    path = container_log(
        tmp_path, b"2026-12-07T10:00:00.1+00:00 stdout F hello\n2026-12-07T10:00:00.2+00:00 stdout F wor"
    )
    with LogReader(path) as log:
        assert log.read() == b"hello\n"
        assert log.read() == b""  # the record being written is not shown cut
        with open(path, "ab") as out:
            out.write(b"ld\n")
        assert log.read() == b"world\n"


def test_the_final_read_takes_a_half_written_record_as_it_is(tmp_path: Path) -> None:
    path = container_log(tmp_path, b"2026-12-07T10:00:00.1+00:00 stdout P no newline yet")
    with LogReader(path) as log:
        assert log.read() == b""
        assert log.read(final=True) == b"no newline yet"


def test_the_tail_of_a_container_log_counts_the_output_lines_not_the_records(tmp_path: Path) -> None:
    path = container_log(
        tmp_path,
        b"2026-12-07T10:00:00.1+00:00 stdout P par\n"
        b"2026-12-07T10:00:00.2+00:00 stdout F tial\n"
        b"2026-12-07T10:00:00.3+00:00 stderr F last\n",
    )
    with LogReader(path) as log:
        assert log.tail(2) == b"partial\nlast\n"
