"""Registry and download path, against a real HTTP server on 127.0.0.1 that can resume, refuse or fail."""

from __future__ import annotations

import hashlib
import random
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from harness.core.errors import DataError
from harness.data import benchmarks
from harness.data.models.registry import Artefact, check_model_file, fetch, file_digests

PAYLOAD = random.Random(0).randbytes(300_000)
PAYLOAD_MD5 = hashlib.md5(PAYLOAD).hexdigest()


@dataclass
class Served:
    """What the server did, and how it should behave: 'range', 'ignore-range' or 'drop' (half the body)."""

    mode: str = "range"
    requests: list[tuple[str | None, int]] = field(default_factory=list)  # (Range header, body bytes sent)


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:
        served = self.server.served
        if self.path != "/model.onnx":
            self.send_error(404)
            return
        range_header = self.headers.get("Range")
        start = 0
        if range_header and served.mode != "ignore-range":
            start = int(range_header.removeprefix("bytes=").split("-")[0])
        if start >= len(PAYLOAD):
            self.send_response(416)
            self.send_header("Content-Range", f"bytes */{len(PAYLOAD)}")
            self.send_header("Content-Length", "0")
            served.requests.append((range_header, 0))  # before answering: the client may return at once
            self.end_headers()
            return
        body = PAYLOAD[start:]
        self.send_response(206 if start else 200)
        if start:
            self.send_header("Content-Range", f"bytes {start}-{len(PAYLOAD) - 1}/{len(PAYLOAD)}")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if served.mode == "drop":
            body = body[: len(body) // 2]
            self.close_connection = True
        served.requests.append((range_header, len(body)))
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        """Keep the test output clean."""


class _Server(ThreadingHTTPServer):
    served: Served


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """urllib honours proxy variables; the tests must only ever talk to 127.0.0.1."""
    for name in ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("no_proxy", "*")


@pytest.fixture()
def server() -> Iterator[tuple[str, Served]]:
    httpd = _Server(("127.0.0.1", 0), _Handler)
    httpd.served = Served()
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", httpd.served
    httpd.shutdown()
    httpd.server_close()
    thread.join()


def _artefact(base: str, md5: str | None = PAYLOAD_MD5, size: int | None = len(PAYLOAD)) -> Artefact:
    return Artefact("test model", "model.onnx", f"{base}/model.onnx", md5, size, "test")


def test_full_download_is_verified_and_renamed(server: tuple[str, Served], tmp_path: Path) -> None:
    base, served = server
    path = fetch(_artefact(base), tmp_path / "models")
    assert path == tmp_path / "models" / "model.onnx"
    assert path.read_bytes() == PAYLOAD
    assert not (tmp_path / "models" / "model.onnx.part").exists()
    assert served.requests == [(None, len(PAYLOAD))]


def test_present_file_with_matching_md5_is_not_downloaded(server: tuple[str, Served], tmp_path: Path) -> None:
    base, served = server
    (tmp_path / "model.onnx").write_bytes(PAYLOAD)
    assert fetch(_artefact(base), tmp_path) == tmp_path / "model.onnx"
    assert served.requests == []


def test_present_file_with_wrong_md5_is_replaced(server: tuple[str, Served], tmp_path: Path) -> None:
    base, served = server
    (tmp_path / "model.onnx").write_bytes(b"stale")
    assert fetch(_artefact(base), tmp_path).read_bytes() == PAYLOAD
    assert len(served.requests) == 1


def test_resume_requests_only_the_remainder(server: tuple[str, Served], tmp_path: Path) -> None:
    base, served = server
    (tmp_path / "model.onnx.part").write_bytes(PAYLOAD[:100_000])
    assert fetch(_artefact(base), tmp_path).read_bytes() == PAYLOAD
    assert served.requests == [("bytes=100000-", len(PAYLOAD) - 100_000)]
    assert not (tmp_path / "model.onnx.part").exists()


def test_complete_part_answered_416_is_verified(server: tuple[str, Served], tmp_path: Path) -> None:
    base, served = server
    (tmp_path / "model.onnx.part").write_bytes(PAYLOAD)
    assert fetch(_artefact(base), tmp_path).read_bytes() == PAYLOAD
    assert served.requests == [(f"bytes={len(PAYLOAD)}-", 0)]


def test_server_ignoring_range_restarts_from_zero(server: tuple[str, Served], tmp_path: Path) -> None:
    base, served = server
    served.mode = "ignore-range"
    (tmp_path / "model.onnx.part").write_bytes(b"x" * 50_000)  # wrong bytes: appending would corrupt it
    assert fetch(_artefact(base), tmp_path).read_bytes() == PAYLOAD
    assert served.requests == [("bytes=50000-", len(PAYLOAD))]


def test_dropped_connection_keeps_part_and_next_fetch_resumes(
    server: tuple[str, Served], tmp_path: Path
) -> None:
    base, served = server
    served.mode = "drop"
    with pytest.raises(
        DataError, match=r"could not download .*check the network or pass --model FILE"
    ) as info:
        fetch(_artefact(base), tmp_path, timeout=5)
    assert "\n" not in str(info.value)
    half = len(PAYLOAD) // 2
    assert (tmp_path / "model.onnx.part").stat().st_size == half
    assert not (tmp_path / "model.onnx").exists()

    served.mode = "range"
    assert fetch(_artefact(base), tmp_path, timeout=5).read_bytes() == PAYLOAD
    assert served.requests[-1] == (f"bytes={half}-", len(PAYLOAD) - half)


@pytest.mark.parametrize(
    ("md5", "size", "expected"),
    [
        ("0" * 32, len(PAYLOAD), f"md5 {PAYLOAD_MD5}, expected {'0' * 32}"),
        (None, 123, "size 300000 bytes, expected 123"),
    ],
)
def test_mismatch_deletes_part_and_names_both(
    server: tuple[str, Served], tmp_path: Path, md5: str | None, size: int, expected: str
) -> None:
    base, _ = server
    with pytest.raises(DataError, match=expected):
        fetch(_artefact(base, md5=md5, size=size), tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_unreachable_server_is_one_line(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))  # bound but not listening: connections are refused
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        with pytest.raises(DataError, match=r"could not download .*refused") as info:
            fetch(_artefact(url), tmp_path, timeout=5)
    assert "\n" not in str(info.value)


def test_http_error_is_one_line_and_keeps_part(server: tuple[str, Served], tmp_path: Path) -> None:
    base, _ = server
    (tmp_path / "model.onnx.part").write_bytes(PAYLOAD[:10])
    with pytest.raises(DataError, match=r"could not download .*/missing: HTTP Error 404: Not Found; check"):
        fetch(Artefact("m", "model.onnx", f"{base}/missing", None, None, "test"), tmp_path)
    assert (tmp_path / "model.onnx.part").read_bytes() == PAYLOAD[:10]


def test_file_digests_match_hashlib(tmp_path: Path) -> None:
    path = tmp_path / "blob"
    path.write_bytes(PAYLOAD * 4)  # more than one 1 MiB chunk
    assert file_digests(path) == (
        hashlib.md5(PAYLOAD * 4).hexdigest(),
        hashlib.sha256(PAYLOAD * 4).hexdigest(),
    )


def test_official_entries() -> None:
    assert {a.md5 for a in benchmarks.get("resnet50").official_models} == {
        "f6a4da60cd5f084d97efc2c1ddb10beb",
        "a638cf028b5870da29e09ccc2f7182e7",
    }
    assert [a.filename for a in benchmarks.get("retinanet").official_models] == ["resnext50_32x4d_fpn.onnx"]
    # every benchmark of the catalogue carries its official model; the record's file name is its first artefact's
    for name in benchmarks.NAMES:
        assert benchmarks.get(name).official_models, name
        assert benchmarks.get(name).official_model == benchmarks.get(name).official_models[0].filename
    yolo = benchmarks.get("yolo-99").official_models
    assert [(a.filename, a.md5) for a in yolo] == [("yolo11l.onnx", None)]  # no md5 published yet


def test_check_matching_digest_sets_artefact(tmp_path: Path) -> None:
    path = tmp_path / "anything.onnx"
    path.write_bytes(PAYLOAD)
    artefact = _artefact("http://127.0.0.1:9")
    check = check_model_file(path, benchmarks.get("resnet50"), registry=(artefact,))
    assert check.artefact == artefact
    assert check.warning is None
    assert (check.md5, check.sha256) == file_digests(path)


def test_check_unknown_digest_warns(tmp_path: Path) -> None:
    path = tmp_path / "my_model.onnx"
    path.write_bytes(b"not an official model")
    check = check_model_file(path, benchmarks.get("resnet50"))
    assert check.artefact is None
    assert check.warning is not None
    assert "not a known official resnet50 artefact" in check.warning
    assert "marked" in check.warning


def test_check_official_name_without_published_md5_warns(tmp_path: Path) -> None:
    path = tmp_path / "ssd_mobilenet_v1_coco_2018_01_28.onnx"
    path.write_bytes(b"whatever")
    check = check_model_file(path, benchmarks.get("ssd-mobilenet"))
    assert check.artefact is None
    assert check.warning is not None
    assert "cannot be verified" in check.warning


def test_check_official_name_with_wrong_digest_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "resnet50_v1.onnx"
    path.write_bytes(b"truncated download")
    md5 = hashlib.md5(b"truncated download").hexdigest()
    with pytest.raises(DataError) as info:
        check_model_file(path, benchmarks.get("resnet50"))
    message = str(info.value)
    assert f"md5 {md5} does not match the official resnet50_v1.onnx" in message
    assert "f6a4da60cd5f084d97efc2c1ddb10beb" in message and "a638cf028b5870da29e09ccc2f7182e7" in message
    assert "appliance prepare --benchmark resnet50 --fetch" in message
    assert "\n" not in message


def test_check_missing_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="does not exist; pass --model FILE"):
        check_model_file(tmp_path / "absent.onnx", benchmarks.get("resnet50"))
