"""A local Kubernetes control plane on loopback ports: etcd and kube-apiserver, and for a simulation
kube-scheduler, kwok (fake nodes that run no container) and the MPI operator.

Used by `scripts/simulate` and by the tests of the live-cluster commands. The binaries are found in
$GITOPS_CONTROL_PLANE_BIN when set, then in the toolchain cache, then on PATH (live/toolchain.py):
`eks-gpu-gitops toolchain build` (`scripts/toolchain build`) builds them; official release binaries work as well.

Everything lives in one temporary folder (etcd's data, certificates, the service-account key, a
kubeconfig with an admin token), removed by `stop`. The admin is in system:masters, as a cluster's
creator is on EKS; the API server keeps its default admission plugins (Pod Security included).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from ..core.errors import InputError
from . import toolchain

BIN_VARIABLE = toolchain.BIN_VARIABLE
CORE = ("etcd", "kube-apiserver")
SIMULATION = ("kube-scheduler", "kwok", "mpi-operator")
# Started like the controllers above when a plane asks for them (a GitOps loop needs Deployments, Jobs, namespace
# deletion and garbage collection; a simulation does not).
OPTIONAL = ("kube-controller-manager",)
_READY_TIMEOUT = 120.0


def find_binary(name: str) -> str:
    """The path of `name`: in $GITOPS_CONTROL_PLANE_BIN, then the toolchain cache, then PATH (toolchain.locate)."""
    located = toolchain.locate(name)
    if located is None:
        raise InputError(toolchain.missing_text(name))
    return located.path


# mpi-operator v0.8.2 serves its health check on a fixed port, whatever its flags (cmd/mpi-operator/app/server.go,
# healthCheckPort), so two planes on one machine cannot both run it: the second waits for the first to stop.
MPI_OPERATOR_PORT = 8080
_PORT_WAIT = 900.0


def _hold_mpi_operator_port():
    """An exclusive lock on a file named after the MPI operator's port, held until the returned file is closed."""
    lock = open(Path(tempfile.gettempdir()) / f"eks-gpu-gitops-port-{MPI_OPERATOR_PORT}.lock", "w")  # noqa: SIM115
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return lock
    except BlockingIOError:
        print(
            f"control plane: waiting for another run's MPI operator to stop (it always listens on port "
            f"{MPI_OPERATOR_PORT})",
            file=sys.stderr,
            flush=True,
        )
    deadline = time.monotonic() + _PORT_WAIT
    while time.monotonic() < deadline:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return lock
        except BlockingIOError:
            time.sleep(0.5)
    lock.close()
    raise InputError(
        f"another run's MPI operator held port {MPI_OPERATOR_PORT} for {_PORT_WAIT:.0f} s; stop it and try again"
    )


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass
class ControlPlane:
    """Start with `start()`, stop with `stop()` (or use it as a context manager)."""

    components: tuple[str, ...] = CORE
    folder: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="gitops-control-plane-")))
    processes: dict[str, subprocess.Popen] = field(default_factory=dict)
    kubeconfig: Path | None = None
    server: str = ""
    _port_lock: object = None  # the open lock file of MPI_OPERATOR_PORT while this plane's MPI operator runs

    def __enter__(self) -> ControlPlane:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        binaries = {name: find_binary(name) for name in self.components}
        try:
            etcd = self._start_etcd(binaries["etcd"])
            self._start_apiserver(binaries["kube-apiserver"], etcd)
            for name in self.components:
                if name in SIMULATION or name in OPTIONAL:
                    self._start_controller(name, binaries[name])
        except BaseException:
            self.stop()
            raise

    def _log(self, name: str):
        return open(self.folder / f"{name}.log", "wb")  # noqa: SIM115 - handed to the process

    def _spawn(self, name: str, argv: list[str]) -> subprocess.Popen:
        with self._log(name) as log:
            process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.processes[name] = process
        return process

    def _start_etcd(self, binary: str) -> str:
        client, peer = _free_port(), _free_port()
        url = f"http://127.0.0.1:{client}"
        self._spawn(
            "etcd",
            [
                binary,
                f"--data-dir={self.folder / 'etcd'}",
                f"--listen-client-urls={url}",
                f"--advertise-client-urls={url}",
                f"--listen-peer-urls=http://127.0.0.1:{peer}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
                f"--initial-cluster=default=http://127.0.0.1:{peer}",
                "--unsafe-no-fsync",  # a throwaway store: durability costs seconds per test
                "--log-level=warn",
            ],
        )
        self._wait("etcd", f"{url}/health", verify=False)
        return url

    def _start_apiserver(self, binary: str, etcd: str) -> None:
        pki = self.folder / "pki"
        pki.mkdir()
        key = pki / "sa.key"
        subprocess.run(["openssl", "genrsa", "-out", str(key), "2048"], check=True, capture_output=True, timeout=60)
        token = secrets.token_hex(16)
        tokens = pki / "tokens.csv"
        tokens.write_text(f'{token},admin,admin,"system:masters"\n')
        port = _free_port()
        self.server = f"https://127.0.0.1:{port}"
        self._spawn(
            "kube-apiserver",
            [
                binary,
                f"--etcd-servers={etcd}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={port}",
                f"--cert-dir={pki}",
                f"--token-auth-file={tokens}",
                "--authorization-mode=RBAC",
                f"--service-account-key-file={key}",
                f"--service-account-signing-key-file={key}",
                "--service-account-issuer=https://kubernetes.default.svc",
                "--service-cluster-ip-range=10.96.0.0/16",
                "--allow-privileged=true",
            ],
        )
        self.kubeconfig = self.folder / "kubeconfig"
        self.kubeconfig.write_text(
            "apiVersion: v1\nkind: Config\n"
            f"clusters:\n- name: local\n  cluster:\n    server: {self.server}\n"
            f"    certificate-authority: {pki / 'apiserver.crt'}\n"
            f"users:\n- name: admin\n  user:\n    token: {token}\n"
            "contexts:\n- name: local\n  context:\n    cluster: local\n    user: admin\n"
            "current-context: local\n"
        )
        # kube-apiserver writes a self-signed apiserver.crt for 127.0.0.1 into --cert-dir: the kubeconfig trusts it.
        self._wait("kube-apiserver", f"{self.server}/readyz", verify=False, token=token)

    def add(self, name: str) -> None:
        """Start one more controller on the running plane: the MPI operator exits at start when the
        MPIJob CRD is not served yet, so a simulation installs the CRDs first, then adds it."""
        self._start_controller(name, find_binary(name))
        self.components = (*self.components, name)

    def _start_controller(self, name: str, binary: str) -> None:
        config = str(self.kubeconfig)
        argv = {
            # No serving port (--secure-port=0): nothing scrapes it, and no authn/authz kubeconfigs are needed.
            "kube-scheduler": [binary, f"--kubeconfig={config}", "--leader-elect=false", "--secure-port=0"],
            # Its default controllers; no private key, so no legacy token Secrets (k8s.io/kubernetes v1.34.4
            # cmd/kube-controller-manager/app/controllermanager.go, startServiceAccountTokenController).
            "kube-controller-manager": [binary, f"--kubeconfig={config}", "--leader-elect=false", "--secure-port=0"],
            # kwok v0.7.0 without --config uses its default node and pod stages (its log says "No node
            # stages found, using default node stages"): nodes become Ready, bound pods Running and Ready.
            "kwok": [
                binary,
                f"--kubeconfig={config}",
                "--manage-all-nodes=true",
                "--server-address=127.0.0.1:0",
            ],
            # mpi-operator v0.8.2 takes Go flags (one dash, -kubeConfig); leader election is always on, with
            # its lease in -lock-namespace (mpi-operator), which must exist.
            "mpi-operator": [binary, f"-kubeConfig={config}", "-monitoring-port=0"],
        }[name]
        if name == "mpi-operator" and self._port_lock is None:
            self._port_lock = _hold_mpi_operator_port()
        self._spawn(name, argv)

    def _wait(self, name: str, url: str, verify: bool, token: str = "") -> None:
        import ssl

        context = None if verify else ssl._create_unverified_context()  # noqa: S323 - loopback, self-signed
        request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
        deadline = time.monotonic() + _READY_TIMEOUT
        while time.monotonic() < deadline:
            if self.processes[name].poll() is not None:
                raise InputError(f"{name} exited at start: {self.log_tail(name)}")
            try:
                with urllib.request.urlopen(request, timeout=2, context=context) as response:
                    if response.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        raise InputError(f"{name} not ready after {_READY_TIMEOUT:.0f} s: {self.log_tail(name)}")

    def log_tail(self, name: str, lines: int = 3) -> str:
        try:
            text = (self.folder / f"{name}.log").read_text(errors="replace")
        except OSError:
            return "(no log)"
        return " | ".join(text.strip().splitlines()[-lines:])

    def stop(self) -> None:
        """Kill everything at once: the store is thrown away, so a graceful shutdown (about 20 s for
        kube-apiserver) buys nothing."""
        for process in self.processes.values():
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
        for process in self.processes.values():
            process.wait()
        self.processes.clear()
        if self._port_lock is not None:
            self._port_lock.close()  # closing the file releases its lock
            self._port_lock = None
        shutil.rmtree(self.folder, ignore_errors=True)
