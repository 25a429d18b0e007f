"""A git server on loopback over smart HTTP: `git http-backend` (a CGI program that ships with git) behind a small
threaded HTTP server on 127.0.0.1, serving every bare repository under one folder.

    with GitServer(folder) as server:
        server.url("project.git")   # http://127.0.0.1:PORT/project.git, a GitRepository's spec.url

Clones and fetches (upload-pack) work for anyone, as GIT_HTTP_EXPORT_ALL allows; pushes (receive-pack) work because
each bare repository is made with http.receivepack=true, since there is no REMOTE_USER here (git-http-backend(1):
receive-pack is enabled by default only for authenticated users).
"""

from __future__ import annotations

import http.server
import os
import shutil
import subprocess
import threading
import urllib.parse
from pathlib import Path

GIT = shutil.which("git") or "git"


def _http_backend() -> str:
    exec_path = subprocess.run([GIT, "--exec-path"], check=True, capture_output=True, text=True).stdout.strip()
    return str(Path(exec_path) / "git-http-backend")


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format, *args):
        self.server.git_server.log(f"{self.command} {self.path} -> " + (format % args))

    def do_GET(self):
        self._cgi(b"")

    def do_POST(self):
        self._cgi(self._body())

    def _body(self) -> bytes:
        # git sends a large push with chunked transfer encoding (bodies above http.postBuffer); BaseHTTPRequestHandler
        # leaves the chunks to us.
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            parts = []
            while True:
                size = int(self.rfile.readline().split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    return b"".join(parts)
                parts.append(self.rfile.read(size))
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _cgi(self, body: bytes) -> None:
        path, _, query = self.path.partition("?")
        environment = {
            "PATH": os.environ.get("PATH", ""),
            "GIT_PROJECT_ROOT": str(self.server.git_server.root),
            "GIT_HTTP_EXPORT_ALL": "1",
            "GATEWAY_INTERFACE": "CGI/1.1",
            "REQUEST_METHOD": self.command,
            "PATH_INFO": urllib.parse.unquote(path),
            "QUERY_STRING": query,
            "CONTENT_TYPE": self.headers.get("Content-Type") or "",
            "CONTENT_LENGTH": str(len(body)),
            "REMOTE_ADDR": self.client_address[0],
            "SERVER_PROTOCOL": "HTTP/1.1",
        }
        if self.headers.get("Content-Encoding"):
            environment["HTTP_CONTENT_ENCODING"] = self.headers["Content-Encoding"]
        if self.headers.get("Git-Protocol"):
            environment["GIT_PROTOCOL"] = self.headers["Git-Protocol"]
        done = subprocess.run([self.server.backend], input=body, env=environment, capture_output=True, timeout=120)
        head, _, payload = done.stdout.partition(b"\r\n\r\n")
        if not _:
            head, _, payload = done.stdout.partition(b"\n\n")
        status, headers = 200, []
        for line in head.decode("latin-1").splitlines():
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = int(value.strip().split()[0])
            elif name:
                headers.append((name, value.strip()))
        if done.returncode != 0 and not done.stdout:
            status, payload, headers = 500, done.stderr, [("Content-Type", "text/plain")]
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, git_server: GitServer):
        self.git_server = git_server
        self.backend = _http_backend()
        super().__init__(("127.0.0.1", 0), _Handler)


class GitServer:
    """Smart HTTP for the bare repositories under `root`; requests are logged to `log_file` when given."""

    def __init__(self, root: Path, log_file: Path | None = None):
        self.root = Path(root)
        self.log_file = log_file
        self._lock = threading.Lock()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    def log(self, line: str) -> None:
        if self.log_file is not None:
            with self._lock, open(self.log_file, "a") as out:
                out.write(line + "\n")

    def url(self, repository: str) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/{repository}"

    def add_bare(self, name: str, source: Path) -> Path:
        """A bare clone of the repository at `source` as root/<name>, which accepts pushes over HTTP."""
        target = self.root / name
        subprocess.run([GIT, "clone", "--quiet", "--bare", str(source), str(target)], check=True, capture_output=True)
        subprocess.run([GIT, "-C", str(target), "config", "http.receivepack", "true"], check=True)
        return target

    def start(self) -> GitServer:
        self.root.mkdir(parents=True, exist_ok=True)
        self._server = _Server(self)
        self._thread = threading.Thread(target=self._server.serve_forever, name="git-server", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> GitServer:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.close()
