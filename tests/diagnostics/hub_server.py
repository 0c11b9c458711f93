"""A local Hugging Face Hub for the tests: a real HTTP server on 127.0.0.1 (a random port) that
serves repositories in the Hub's URL layout, /{owner}/{name}/resolve/{revision}/{filename},
with the headers huggingface_hub reads and the errors the Hub gives:

- a small file: 200 with X-Repo-Commit, ETag and Content-Length (HEAD and GET);
- a large (LFS) file: HEAD answers 302 to another host with X-Linked-Size and X-Linked-Etag,
  as the Hub sends weights to its CDN; huggingface_hub's get_hf_file_metadata reads the size
  there and does not follow the redirect off the hub;
- a missing file: 404, X-Error-Code EntryNotFound; a missing revision: 404 RevisionNotFound;
- a missing (or private) repository: 401 RepoNotFound without a token, 404 with one;
- a gated repository: 401 GatedRepo without a token, 403 GatedRepo with a token that has no
  access, the file with the right one.

Sources: huggingface_hub's hf_raise_for_status (the X-Error-Code values) and
get_hf_file_metadata (X-Repo-Commit, X-Linked-Size, X-Linked-Etag, ETag), in
https://github.com/huggingface/huggingface_hub/blob/main/src/huggingface_hub/utils/_http.py and
https://github.com/huggingface/huggingface_hub/blob/main/src/huggingface_hub/file_download.py;
the 401 for missing and private repositories without a token:
https://gist.github.com/Wauplin/46c27ad266b15998ce56a6603796f0b9; the gated messages as the Hub
words them: https://github.com/city96/ComfyUI_ExtraModels/issues/99.

`hang = True` makes it accept requests and never answer, like a hub behind a dead proxy.
"""

from __future__ import annotations

import hashlib
import json
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

COMMIT = "4b1a3c7e9d2f60581b3c4d5e6f708192a3b4c5d6"


@dataclass
class Repo:
    files: dict[str, bytes] = field(default_factory=dict)
    large: dict[str, int] = field(default_factory=dict)  # LFS files, by their size only
    gated_token: str | None = None  # set: gated, and this token has access
    commit: str = COMMIT


@dataclass
class Seen:
    method: str
    path: str
    authorization: str | None


class HubServer:
    def __init__(self) -> None:
        self.repos: dict[str, Repo] = {}
        self.requests: list[Seen] = []
        self.hang = False
        self.status_override: int | None = None  # answer every request with this status
        self._release = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def add(self, repo_id: str, *, config: Any = None, index: Any = None, **kwargs: Any) -> Repo:
        """A repository with a config.json (a dict, or bytes as they are) and optionally a
        model.safetensors.index.json."""
        repo = Repo(**kwargs)
        for name, content in (("config.json", config), ("model.safetensors.index.json", index)):
            if content is not None:
                repo.files[name] = content if isinstance(content, bytes) else json.dumps(content).encode()
        self.repos[repo_id] = repo
        return repo

    def start(self) -> HubServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._release.set()
        self._server.shutdown()
        self._server.server_close()


def _handler(hub: HubServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # keep the test output quiet
            pass

        def do_HEAD(self) -> None:
            self._answer(head=True)

        def do_GET(self) -> None:
            self._answer(head=False)

        def _answer(self, *, head: bool) -> None:
            authorization = self.headers.get("Authorization")
            hub.requests.append(Seen(self.command, self.path, authorization))
            if hub.hang:
                hub._release.wait(60)  # until the test's server stops
                return
            if hub.status_override:
                return self._error(hub.status_override, "", "Internal Error")
            parts = self.path.split("?")[0].strip("/").split("/", 4)
            if len(parts) != 5 or parts[2] != "resolve":
                return self._error(404, "", "Not Found")
            repo_id, revision, filename = f"{parts[0]}/{parts[1]}", parts[3], parts[4]
            token = authorization.removeprefix("Bearer ") if authorization else None
            repo = hub.repos.get(repo_id)
            if repo is None:
                status = 404 if token else 401
                return self._error(status, "RepoNotFound", "Repository not found")
            if repo.gated_token and token != repo.gated_token:
                if token is None:
                    message = (
                        f"Access to model {repo_id} is restricted. You must have access to it and be "
                        "authenticated to access it. Please log in."
                    )
                    return self._error(401, "GatedRepo", message)
                message = f"Access to model {repo_id} is restricted and you are not in the authorized list."
                return self._error(403, "GatedRepo", message)
            if revision not in ("main", repo.commit):
                return self._error(404, "RevisionNotFound", "Invalid rev id: " + revision, commit=None)
            if filename in repo.large:
                return self._large(repo, filename, head=head)
            if filename not in repo.files:
                return self._error(404, "EntryNotFound", "Entry not found", commit=repo.commit)
            body = repo.files[filename]
            self.send_response(200)
            self._hub_headers(repo.commit, etag=hashlib.sha1(body).hexdigest())  # noqa: S324 - a git blob id
            self.send_header(
                "Content-Type", "application/json" if filename.endswith(".json") else "text/plain"
            )
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if not head:
                self.wfile.write(body)

        def _large(self, repo: Repo, filename: str, *, head: bool) -> None:
            size = repo.large[filename]
            sha = hashlib.sha256(filename.encode()).hexdigest()
            self.send_response(302)
            self._hub_headers(repo.commit, etag=hashlib.sha1(filename.encode()).hexdigest())  # noqa: S324
            self.send_header("X-Linked-Size", str(size))
            self.send_header("X-Linked-Etag", f'"{sha}"')
            self.send_header("Location", f"http://localhost:{hub.port}/cdn/{sha}")  # another host
            self.send_header("Content-Length", "0")
            self.end_headers()

        def _hub_headers(self, commit: str | None, *, etag: str | None = None) -> None:
            if commit:
                self.send_header("X-Repo-Commit", commit)
            if etag:
                self.send_header("ETag", f'"{etag}"')

        def _error(self, status: int, code: str, message: str, *, commit: str | None = None) -> None:
            body = json.dumps({"error": message}).encode()
            self.send_response(status)
            self._hub_headers(commit)
            if code:
                self.send_header("X-Error-Code", code)
                self.send_header("X-Error-Message", message)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

    return Handler


def closed_port_url() -> str:
    """The URL of a port nothing listens on: connecting is refused at once."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def serving(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[HubServer]:
    """A running local hub, for a test module's fixture (`yield from serving(...)`), with
    huggingface_hub's home and cache under the test's tmp_path and no token from the
    environment, so nothing on the machine leaks into a test."""
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-home" / "hub"))
    monkeypatch.delenv("HF_TOKEN", raising=False)
    server = HubServer().start()
    yield server
    server.stop()
