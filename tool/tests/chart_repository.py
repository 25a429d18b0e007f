"""Helm charts on loopback, for offline tests of HelmRelease rendering.

- package_chart: a chart folder packed as `helm package` lays it out (<name>-<version>.tgz, members under <name>/).
- make_chart / copy_chart: small chart folders of a test's own, or a copy of one with another version.
- ChartRepository: an HTTP Helm repository (index.yaml and the archives of one folder) on 127.0.0.1.
- real_chart: upstream charts, taken from the Go module proxy's zips of their repositories (Go needed).
- OciRegistry / push_chart: an OCI registry on 127.0.0.1 (go-containerregistry's, built with Go) and a chart
  pushed to it with Helm's media types.
- template_charts / fsx_chart: the template's HTTP charts at its pins, packed (the FSx CSI driver's, re-versioned
  from real_chart's, and a stand-in for Cluster Autoscaler's), for the tests and tools/bench_helm.py.

Only the standard library and PyYAML; Go is needed for real_chart and OciRegistry only, which return None
(real_chart, oci_registry_binary) when it or the module is not available, so that tests can skip.
"""

from __future__ import annotations

import fnmatch
import gzip
import hashlib
import http.server
import io
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import yaml

# The modification time of every member of a packed chart (2000-01-01T00:00:00Z), so that packing the same folder
# twice gives the same bytes, hence the same digest.
ARCHIVE_MTIME = 946684800


def cache_root() -> Path:
    """The template's tool cache, as the Makefile's TOOLS_CACHE: $TOOLS_CACHE or ~/.cache/gitops-template."""
    return Path(os.environ.get("TOOLS_CACHE") or Path.home() / ".cache" / "gitops-template")


def read_chart_yaml(chart_dir: Path) -> dict:
    """The Chart.yaml of a chart folder, as a mapping."""
    metadata = yaml.safe_load((Path(chart_dir) / "Chart.yaml").read_text(encoding="utf-8"))
    if not isinstance(metadata, dict) or not metadata.get("name") or not metadata.get("version"):
        raise ValueError(f"{chart_dir}/Chart.yaml has no name or no version")
    return metadata


# --- packing -----------------------------------------------------------------------------------------------------


def _helmignore_patterns(chart_dir: Path) -> list[str]:
    ignore = chart_dir / ".helmignore"
    if not ignore.is_file():
        return []
    patterns = []
    for line in ignore.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        # Negations (!pattern) are not supported: they are left out, which keeps more files, never fewer.
        if line and not line.startswith("#") and not line.startswith("!"):
            patterns.append(line)
    return patterns


def _ignored(relative: str, is_dir: bool, patterns: list[str]) -> bool:
    """Roughly Helm's .helmignore rules: `dir/` matches folders only; a pattern with a slash matches the path
    from the chart's root, one without matches the last name. Always ignored: .git, and archives at the chart's
    root (a chart packed into its own folder); archives in charts/ are dependencies and stay."""
    name = relative.rsplit("/", 1)[-1]
    if name == ".git" or ("/" not in relative and name.endswith(".tgz")):
        return True
    for pattern in patterns:
        if pattern.endswith("/"):
            if not is_dir:
                continue
            pattern = pattern.rstrip("/")
        subject = relative if "/" in pattern else name
        if fnmatch.fnmatchcase(subject, pattern.lstrip("/")):
            return True
    return False


def chart_files(chart_dir: Path) -> list[str]:
    """The files of a chart folder that a package holds, as paths relative to it, in the package's order:
    Chart.yaml, values.yaml, then the others sorted."""
    chart_dir = Path(chart_dir)
    patterns = _helmignore_patterns(chart_dir)
    found = []
    for folder, dirs, files in os.walk(chart_dir):
        base = Path(folder).relative_to(chart_dir).as_posix()
        prefix = "" if base == "." else base + "/"
        dirs[:] = sorted(d for d in dirs if not _ignored(prefix + d, True, patterns))
        for file in files:
            relative = prefix + file
            if (Path(folder) / file).is_file() and not _ignored(relative, False, patterns):
                found.append(relative)
    first = [name for name in ("Chart.yaml", "values.yaml") if name in found]
    return first + sorted(name for name in found if name not in first)


def package_chart(chart_dir: Path, out_dir: Path) -> Path:
    """Pack a chart folder into out_dir/<name>-<version>.tgz, as `helm package` lays it out: a gzip tar of regular
    files under a top folder named after the chart (<name>/Chart.yaml, <name>/templates/...). The files are
    copied as they are (Helm rewrites Chart.yaml from its parsed fields; this does not). Deterministic: fixed
    modification times, owner 0, mode 0644, fixed order, no time in the gzip header."""
    chart_dir = Path(chart_dir)
    metadata = read_chart_yaml(chart_dir)
    name, version = str(metadata["name"]), str(metadata["version"])
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for relative in chart_files(chart_dir):
            data = (chart_dir / relative).read_bytes()
            member = tarfile.TarInfo(f"{name}/{relative}")
            member.size = len(data)
            member.mode = 0o644
            member.mtime = ARCHIVE_MTIME
            archive.addfile(member, io.BytesIO(data))
    target = out_dir / f"{name}-{version}.tgz"
    with open(target, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as compressed:
        compressed.write(buffer.getvalue())
    return target


def read_packaged_chart_yaml(tgz: Path) -> dict:
    """The Chart.yaml of a packed chart (the member <top folder>/Chart.yaml)."""
    with tarfile.open(tgz, "r:gz") as archive:
        for member in archive.getmembers():
            parts = member.name.split("/")
            if member.isfile() and len(parts) == 2 and parts[1] == "Chart.yaml":
                return yaml.safe_load(archive.extractfile(member).read())
    raise ValueError(f"{tgz} has no <chart>/Chart.yaml")


# --- chart folders -----------------------------------------------------------------------------------------------


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def make_chart(
    root: Path,
    name: str,
    version: str,
    templates: dict[str, str],
    values: dict | None = None,
    crds: dict[str, str] | None = None,
    app_version: str = "1.0.0",
) -> Path:
    """Write root/<name>: a chart (apiVersion v2, type application) with the given templates (file name under
    templates/ -> text), values.yaml and CRDs (file name under crds/ -> text). Returns the chart folder."""
    chart_dir = Path(root) / name
    metadata = {
        "apiVersion": "v2",
        "name": name,
        "description": f"Test chart {name}",
        "type": "application",
        "version": version,
        "appVersion": app_version,
    }
    _write(chart_dir / "Chart.yaml", yaml.safe_dump(metadata, sort_keys=False))
    _write(chart_dir / "values.yaml", yaml.safe_dump(values or {}, sort_keys=False))
    (chart_dir / "templates").mkdir(parents=True, exist_ok=True)
    for file, text in templates.items():
        _write(chart_dir / "templates" / file, text)
    for file, text in (crds or {}).items():
        _write(chart_dir / "crds" / file, text)
    return chart_dir


def _copy_tree(source: Path, target: Path) -> None:
    """Copy the files of source into target, writable (the Go module cache's files are read-only)."""
    for folder, dirs, files in os.walk(source):
        dirs.sort()
        here = Path(folder)
        destination = target / here.relative_to(source)
        destination.mkdir(parents=True, exist_ok=True)
        for file in sorted(files):
            if (here / file).is_file():
                (destination / file).write_bytes((here / file).read_bytes())


def copy_chart(chart_dir: Path, root: Path, version: str | None = None, app_version: str | None = None) -> Path:
    """Copy a chart folder to root/<name>; with version or app_version, Chart.yaml is written anew with them
    (its comments are lost). Returns the copy."""
    chart_dir = Path(chart_dir)
    metadata = read_chart_yaml(chart_dir)
    target = Path(root) / str(metadata["name"])
    _copy_tree(chart_dir, target)
    if version is not None or app_version is not None:
        if version is not None:
            metadata["version"] = version
        if app_version is not None:
            metadata["appVersion"] = app_version
        (target / "Chart.yaml").write_text(yaml.safe_dump(metadata, sort_keys=False), encoding="utf-8")
    return target


# --- HTTP Helm repository ----------------------------------------------------------------------------------------


def _version_key(version: str) -> tuple:
    """A sort key for chart versions, roughly SemVer's: numbers compare as numbers, a pre-release sorts before
    its release."""
    core, _, prerelease = str(version).lstrip("v").split("+", 1)[0].partition("-")
    numbers = tuple(int(part) if part.isdigit() else -1 for part in core.split("."))
    return numbers, prerelease == "", prerelease


def _rfc3339(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def repository_index(charts_dir: Path) -> dict:
    """The index.yaml of a Helm repository serving the .tgz files of charts_dir: each entry is the chart's
    Chart.yaml with `urls` (relative: <file name>), `digest` (sha256 of the archive) and `created` (the file's
    modification time); entries of one chart newest version first."""
    entries: dict[str, list[dict]] = {}
    for tgz in sorted(Path(charts_dir).glob("*.tgz")):
        entry = dict(read_packaged_chart_yaml(tgz))
        entry.setdefault("apiVersion", "v2")
        entry["version"] = str(entry["version"])
        if "appVersion" in entry:
            entry["appVersion"] = str(entry["appVersion"])
        entry["urls"] = [tgz.name]
        entry["digest"] = hashlib.sha256(tgz.read_bytes()).hexdigest()
        entry["created"] = _rfc3339(tgz.stat().st_mtime)
        entries.setdefault(str(entry["name"]), []).append(entry)
    for versions in entries.values():
        versions.sort(key=lambda entry: _version_key(entry["version"]), reverse=True)
    return {"apiVersion": "v1", "entries": dict(sorted(entries.items())), "generated": _rfc3339(time.time())}


class _RepositoryHandler(http.server.BaseHTTPRequestHandler):
    server: _RepositoryServer

    def log_message(self, format, *args):
        pass

    def do_GET(self):
        repository = self.server.repository
        path = urllib.parse.urlsplit(self.path).path
        repository._record(path)
        if repository.stall:
            # Accept and never answer: wait until the test lifts the stall or the repository closes, then drop
            # the connection without a response.
            while repository.stall and not repository._closing.wait(0.05):
                pass
            self.close_connection = True
            return
        name = path.lstrip("/")
        if name == "index.yaml":
            body = yaml.safe_dump(repository_index(repository.charts_dir), sort_keys=False).encode()
            self._answer(200, "application/x-yaml", body)
        elif name.endswith(".tgz") and "/" not in name and (repository.charts_dir / name).is_file():
            self._answer(200, "application/gzip", (repository.charts_dir / name).read_bytes())
        else:
            self._answer(404, "text/plain", b"not found\n")

    def _answer(self, status: int, content_type: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class _RepositoryServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # closing never waits for a client that connected and sent nothing

    def __init__(self, repository: ChartRepository):
        self.repository = repository
        super().__init__(("127.0.0.1", 0), _RepositoryHandler)

    def handle_error(self, request, client_address):
        pass  # a client that went away (a timeout test) is no error of the repository's


class ChartRepository:
    """An HTTP Helm repository on 127.0.0.1 (an ephemeral port) serving the .tgz files of charts_dir and an
    index.yaml made from them at each request, so a chart packed into the folder later is listed.

        with ChartRepository(charts_dir) as repo:
            repo.url        # http://127.0.0.1:PORT, a HelmRepository's spec.url
            repo.requests   # the paths asked for, in order ("/index.yaml", "/kueue-0.19.2.tgz", ...)
            repo.stall = True   # from now on, requests are accepted and never answered
    """

    def __init__(self, charts_dir: Path):
        self.charts_dir = Path(charts_dir)
        self.requests: list[str] = []
        self.stall = False
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._server: _RepositoryServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("the repository is not started")
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def _record(self, path: str) -> None:
        with self._lock:
            self.requests.append(path)

    def count(self, path: str) -> int:
        """How many times path (such as "/index.yaml") was asked for."""
        with self._lock:
            return self.requests.count(path)

    def start(self) -> ChartRepository:
        self._closing.clear()
        self._server = _RepositoryServer(self)
        self._thread = threading.Thread(target=self._server.serve_forever, name="chart-repository", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        self._closing.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._thread.join(timeout=5)
            self._server = None

    def __enter__(self) -> ChartRepository:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.close()


# --- upstream charts from Go module zips -------------------------------------------------------------------------


@dataclass(frozen=True)
class RealChart:
    module: str  # a Go module whose zip holds the chart
    module_version: str
    folder: str  # the chart's folder inside the module
    version: str  # the version its Chart.yaml states, checked after extraction


REAL_CHARTS = {
    # Kueue at the template's pin (cookiecutter.json _kueue_version 0.19.2). The chart's Chart.yaml at the tag
    # states version 0.19.2 and appVersion "v0.19.2" (no placeholder). Its 11 CRDs are templates
    # (templates/crd/), there is no crds/ folder; no dependencies.
    "kueue": RealChart("sigs.k8s.io/kueue", "v0.19.2", "charts/kueue", "0.19.2"),
    # The FSx for Lustre CSI driver's chart. The template pins chart 1.17.0 (_fsx_csi_chart_version), but the
    # module proxy's v1.9.0 zip holds chart 1.16.0 (appVersion 1.8.0): the proxy keeps the commit the tag first
    # named (17c999c0), and the tag was later moved to one with the 1.17.0 chart. Upstream's 1.17.0 differs from
    # this 1.16.0 in Chart.yaml's version and appVersion (1.9.0) and values.yaml's image.tag (v1.9.0) only; the
    # templates are the same. No commit with 1.17.0 is served by the proxy. The path github.com/kubernetes-sigs/...
    # is not served; the module's own path, sigs.k8s.io/aws-fsx-csi-driver, is. No dependencies, no crds/.
    "aws-fsx-csi-driver": RealChart("sigs.k8s.io/aws-fsx-csi-driver", "v1.9.0", "charts/aws-fsx-csi-driver", "1.16.0"),
}


def _go_environment() -> dict[str, str]:
    return {**os.environ, "GOFLAGS": "-mod=mod", "GOTOOLCHAIN": "local"}


def go_module_dir(module: str, version: str, timeout: float = 600) -> Path | None:
    """The folder of module@version in the Go module cache (`go mod download -json`), or None when Go is missing
    or the module cannot be had. The folder is read-only."""
    go = shutil.which("go")
    if go is None:
        return None
    with tempfile.TemporaryDirectory(prefix="go-mod-download-") as empty:
        try:
            done = subprocess.run(
                [go, "mod", "download", "-json", f"{module}@{version}"],
                cwd=empty,
                env=_go_environment(),
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
    try:
        answer = json.loads(done.stdout)
    except json.JSONDecodeError:
        return None
    folder = answer.get("Dir")
    if done.returncode != 0 or answer.get("Error") or not folder or not Path(folder).is_dir():
        return None
    return Path(folder)


def real_chart(name: str) -> Path | None:
    """An upstream chart folder (REAL_CHARTS), copied out of its Go module's zip into
    <cache_root()>/charts/<name>-<version>/<name> once; None when Go or the module is not available (tests skip).
    Raises when the module lacks the folder or its Chart.yaml states another name or version than REAL_CHARTS."""
    spec = REAL_CHARTS[name]
    charts = cache_root() / "charts"
    target = charts / f"{name}-{spec.version}"
    if (target / name / "Chart.yaml").is_file():
        return target / name
    module_dir = go_module_dir(spec.module, spec.module_version)
    if module_dir is None:
        return None
    source = module_dir / spec.folder
    if not (source / "Chart.yaml").is_file():
        raise RuntimeError(f"{spec.module}@{spec.module_version} has no {spec.folder}/Chart.yaml")
    metadata = read_chart_yaml(source)
    if (metadata["name"], str(metadata["version"])) != (name, spec.version):
        raise RuntimeError(
            f"{spec.module}@{spec.module_version}/{spec.folder} is chart {metadata['name']} {metadata['version']}, "
            f"not {name} {spec.version}"
        )
    charts.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=charts))
    _copy_tree(source, staging / name)
    try:
        staging.rename(target)
    except OSError:  # another process was first
        shutil.rmtree(staging, ignore_errors=True)
    return target / name


# --- OCI registry ------------------------------------------------------------------------------------------------

REGISTRY_MODULE = "github.com/google/go-containerregistry/cmd/registry"
REGISTRY_VERSION = "v0.22.1"

HELM_CONFIG_MEDIA_TYPE = "application/vnd.cncf.helm.config.v1+json"
HELM_CHART_MEDIA_TYPE = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"
OCI_MANIFEST_MEDIA_TYPE = "application/vnd.oci.image.manifest.v1+json"


def oci_registry_binary(timeout: float = 600) -> Path | None:
    """go-containerregistry's in-memory registry (cmd/registry, REGISTRY_VERSION), built with `go install` into
    <cache_root()>/oci-registry-<version>/ once; None when Go is missing or the build fails."""
    folder = cache_root() / f"oci-registry-{REGISTRY_VERSION}"
    binary = folder / "registry"
    if binary.is_file():
        return binary
    go = shutil.which("go")
    if go is None:
        return None
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="go-install-") as empty:
        try:
            done = subprocess.run(
                [go, "install", f"{REGISTRY_MODULE}@{REGISTRY_VERSION}"],
                cwd=empty,
                env={**_go_environment(), "GOBIN": str(folder)},
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
    return binary if done.returncode == 0 and binary.is_file() else None


class OciRegistry:
    """An OCI distribution registry on 127.0.0.1 (a free port), in memory, for the life of the context.

    with OciRegistry(binary) as registry:
        registry.url    # http://127.0.0.1:PORT
        registry.host   # 127.0.0.1:PORT, for oci://127.0.0.1:PORT/<repository> (an insecure OCIRepository)
    """

    def __init__(self, binary: Path, start_timeout: float = 30):
        self.binary = Path(binary)
        self.start_timeout = start_timeout
        self.port: int | None = None
        self._process: subprocess.Popen | None = None
        self._folder: tempfile.TemporaryDirectory | None = None

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"http://{self.host}"

    def start(self) -> OciRegistry:
        # The registry logs to stderr (its port first, then every request): into a file, so no pipe fills up.
        self._folder = tempfile.TemporaryDirectory(prefix="oci-registry-")
        log_path = Path(self._folder.name) / "registry.log"
        with open(log_path, "wb") as log:
            self._process = subprocess.Popen(
                [str(self.binary), "-port", "0"], stdin=subprocess.DEVNULL, stdout=log, stderr=log
            )
        deadline = time.monotonic() + self.start_timeout
        while self.port is None:
            for line in log_path.read_text(errors="replace").splitlines():
                if "serving on port " in line:
                    self.port = int(line.rsplit(" ", 1)[-1])
            if self.port is None:
                if self._process.poll() is not None or time.monotonic() > deadline:
                    output = log_path.read_text(errors="replace")
                    self.close()
                    raise RuntimeError(f"the OCI registry did not start: {output.strip()}")
                time.sleep(0.05)
        return self

    def close(self) -> None:
        if self._process is not None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
            self._process = None
        if self._folder is not None:
            self._folder.cleanup()
            self._folder = None

    def __enter__(self) -> OciRegistry:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.close()


@dataclass(frozen=True)
class PushedChart:
    url: str  # oci://127.0.0.1:PORT/<repository>, an OCIRepository's spec.url
    tag: str  # the chart's version
    digest: str  # sha256:... of the manifest


def _request(method: str, url: str, body: bytes = b"", content_type: str | None = None):
    request = urllib.request.Request(url, data=body if method in ("POST", "PUT") else None, method=method)
    if content_type:
        request.add_header("Content-Type", content_type)
    return urllib.request.urlopen(request, timeout=30)


def _push_blob(registry_url: str, repository: str, data: bytes) -> str:
    """Upload data as a blob of repository (POST an upload, PUT its bytes); returns its digest."""
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    with _request("POST", f"{registry_url}/v2/{repository}/blobs/uploads/") as started:
        location = urllib.parse.urljoin(f"{registry_url}/", started.headers["Location"])
    separator = "&" if "?" in location else "?"
    upload = f"{location}{separator}digest={urllib.parse.quote(digest, safe='')}"
    with _request("PUT", upload, data, "application/octet-stream"):
        pass
    return digest


def push_chart(tgz: Path, registry_url: str, namespace: str = "") -> PushedChart:
    """Push a packed chart to an OCI registry as `helm push` does: a manifest (OCI image manifest) whose config
    is the chart's Chart.yaml as JSON (Helm's config media type) and whose one layer is the archive, tagged with
    the chart's version, in repository <namespace>/<name> (<name> without a namespace), with plain HTTP calls."""
    tgz = Path(tgz)
    registry_url = registry_url.rstrip("/")
    metadata = read_packaged_chart_yaml(tgz)
    name, version = str(metadata["name"]), str(metadata["version"])
    repository = f"{namespace.strip('/')}/{name}" if namespace.strip("/") else name
    archive = tgz.read_bytes()
    config = json.dumps(metadata, sort_keys=True, separators=(",", ":"), default=str).encode()
    manifest = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST_MEDIA_TYPE,
        "config": {
            "mediaType": HELM_CONFIG_MEDIA_TYPE,
            "digest": _push_blob(registry_url, repository, config),
            "size": len(config),
        },
        "layers": [
            {
                "mediaType": HELM_CHART_MEDIA_TYPE,
                "digest": _push_blob(registry_url, repository, archive),
                "size": len(archive),
            }
        ],
        "annotations": {"org.opencontainers.image.title": name, "org.opencontainers.image.version": version},
    }
    body = json.dumps(manifest, separators=(",", ":")).encode()
    with _request("PUT", f"{registry_url}/v2/{repository}/manifests/{version}", body, OCI_MANIFEST_MEDIA_TYPE):
        pass
    host = urllib.parse.urlsplit(registry_url).netloc
    return PushedChart(f"oci://{host}/{repository}", version, "sha256:" + hashlib.sha256(body).hexdigest())


# --- the template's charts ---------------------------------------------------------------------------------------

# Cluster Autoscaler's chart 9.59.0 is in no registry this machine reaches (its repository's tags are not Go
# modules): a stand-in with the values the template sets.
AUTOSCALER_DEPLOYMENT = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}
  labels:
    app.kubernetes.io/name: cluster-autoscaler
spec:
  selector:
    matchLabels:
      app.kubernetes.io/name: cluster-autoscaler
  template:
    metadata:
      labels:
        app.kubernetes.io/name: cluster-autoscaler
    spec:
      serviceAccountName: {{ .Values.rbac.serviceAccount.name }}
      nodeSelector: {{ toJson .Values.nodeSelector }}
      containers:
        - name: cluster-autoscaler
          image: registry.k8s.io/autoscaling/cluster-autoscaler:{{ .Values.image.tag }}
          command:
            - ./cluster-autoscaler
            - --cloud-provider={{ .Values.cloudProvider }}
            {{- range $key, $value := .Values.extraArgs }}
            - --{{ $key }}={{ $value }}
            {{- end }}
"""
AUTOSCALER_VALUES = {
    "image": {"tag": "v1.34.5"},
    "cloudProvider": "aws",
    "rbac": {"serviceAccount": {"name": "cluster-autoscaler"}},
    "nodeSelector": {},
    "extraArgs": {},
}


def fsx_chart(root: Path, version: str = "1.17.0", app_version: str = "1.9.0") -> Path:
    """The FSx CSI driver's chart as `version`: real_chart's 1.16.0 copied to root/aws-fsx-csi-driver with that
    version, `app_version` and the image tag v<app_version> (the template's 1.17.0 differs from 1.16.0 in these
    only: REAL_CHARTS). Raises when real_chart cannot give it (Go or the module proxy missing)."""
    source = real_chart("aws-fsx-csi-driver")
    if source is None:
        raise RuntimeError("Go or the module proxy could not give the FSx CSI driver's chart")
    chart = copy_chart(source, root, version=version, app_version=app_version)
    values = chart / "values.yaml"
    values.write_text(values.read_text().replace('tag: "v1.8.0"', f'tag: "v{app_version}"', 1))
    return chart


def template_charts(work: Path) -> Path:
    """work/served, the template's HTTP charts at its pins packed into it: the FSx CSI driver's 1.17.0 (fsx_chart;
    its folder is work/fsx-1.17.0/aws-fsx-csi-driver) and the Cluster Autoscaler stand-in 9.59.0 (its folder is
    work/src/cluster-autoscaler). Kueue's is served through OCI: push_chart(package_chart(real_chart("kueue"),
    ...), registry, "kueue/charts"). Raises when real_chart cannot give the FSx chart."""
    work = Path(work)
    served = work / "served"
    package_chart(fsx_chart(work / "fsx-1.17.0"), served)
    templates = {"deployment.yaml": AUTOSCALER_DEPLOYMENT}
    package_chart(make_chart(work / "src", "cluster-autoscaler", "9.59.0", templates, AUTOSCALER_VALUES), served)
    return served
