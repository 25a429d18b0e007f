"""Kueue's manager as a local process for the Kueue that Flux installed from its chart, and a kube-proxy stand-in
so that the API server reaches its webhooks and visibility API at their Services.

The chart (sigs.k8s.io/kueue v0.19.2, charts/kueue) registers its admission webhooks, the conversion webhooks of
five CRDs and the visibility APIService behind Services; kube-apiserver v1.34 calls them at the Service's ClusterIP
and port (its default service resolver; --enable-aggregator-routing is off). Here no kube-proxy routes a ClusterIP,
so `ServiceRoute` adds the ClusterIP to the loopback interface (`ip addr add`, which needs CAP_NET_ADMIN) and
forwards ClusterIP:port to the process's loopback port. Nothing of the chart's objects is changed.

The manager runs with the chart's own Configuration (the ConfigMap <fullname>-manager-config) and arguments, with
what a local process needs instead of a pod's: `namespace` set (a pod reads it from its service-account mount),
health, metrics, webhook and visibility servers on free loopback ports, leader election off, and a certDir of its
own. Internal cert management stays on, as the chart has it: the cert rotator (kueue pkg/util/cert/cert.go) writes
the certificate for <service>.<namespace>.svc into the Secret and the CA into the webhook configurations and CRDs,
and waits until the files in certDir match the Secret, which a pod's Secret volume does; here a thread copies them.
"""

from __future__ import annotations

import base64
import contextlib
import os
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

from eks_gpu_gitops.live.control_plane import find_binary

from .flux import free_port


def _pipe(source: socket.socket, target: socket.socket) -> None:
    """Bytes from source to target until source's end of stream, passed on as target's; the other direction goes on
    (a half-close, as a TCP route keeps it)."""
    with contextlib.suppress(OSError):
        while data := source.recv(65536):
            target.sendall(data)
    with contextlib.suppress(OSError):
        target.shutdown(socket.SHUT_WR)


def _connect(incoming: socket.socket, outgoing: socket.socket) -> None:
    """Both directions of one routed connection; both sockets closed once both are done."""
    back = threading.Thread(target=_pipe, args=(outgoing, incoming), daemon=True)
    back.start()
    _pipe(incoming, outgoing)
    back.join()
    for end in (incoming, outgoing):
        end.close()


@dataclass
class ServiceRoute:
    """ClusterIP:port -> 127.0.0.1:target, as kube-proxy would route a Service to its pod."""

    cluster_ip: str
    port: int
    target: int
    _listener: socket.socket | None = None
    _added: bool = False

    def start(self) -> None:
        done = subprocess.run(
            ["ip", "addr", "add", f"{self.cluster_ip}/32", "dev", "lo"], capture_output=True, text=True
        )
        if done.returncode != 0:
            raise RuntimeError(
                f"cannot route Service IP {self.cluster_ip} to a local process: `ip addr add {self.cluster_ip}/32 dev "
                f"lo` failed ({done.stderr.strip()}); the e2e run needs CAP_NET_ADMIN for its kube-proxy stand-in"
            )
        self._added = True
        self._listener = socket.create_server((self.cluster_ip, self.port))
        threading.Thread(target=self._accept, daemon=True, name=f"route-{self.cluster_ip}").start()

    def _accept(self) -> None:
        while self._listener is not None:
            try:
                incoming, _ = self._listener.accept()
            except OSError:
                return
            try:
                outgoing = socket.create_connection(("127.0.0.1", self.target), timeout=10)
            except OSError:
                incoming.close()
                continue
            # No idle timeout once connected: the API server keeps webhook connections open between calls, and a
            # route that dropped an idle one made its next call fail with EOF.
            outgoing.settimeout(None)
            threading.Thread(target=_connect, args=(incoming, outgoing), daemon=True).start()

    def stop(self) -> None:
        if self._listener is not None:
            listener, self._listener = self._listener, None
            listener.close()
        if self._added:
            subprocess.run(["ip", "addr", "del", f"{self.cluster_ip}/32", "dev", "lo"], capture_output=True)
            self._added = False


@dataclass
class KueueProcess:
    api: client.ApiClient
    kubeconfig: Path
    folder: Path
    namespace: str = "kueue-system"
    fullname: str = "kueue"
    process: subprocess.Popen | None = None
    routes: list[ServiceRoute] = field(default_factory=list)
    ports: dict[str, int] = field(default_factory=dict)
    _copying: bool = False

    def _configuration(self) -> dict:
        config_map = client.CoreV1Api(self.api).read_namespaced_config_map(
            f"{self.fullname}-manager-config", self.namespace
        )
        configuration = yaml.safe_load(config_map.data["controller_manager_config.yaml"])
        self.ports = {name: free_port() for name in ("health", "metrics", "webhook", "visibility")}
        configuration["namespace"] = self.namespace
        configuration.setdefault("health", {})["healthProbeBindAddress"] = f"127.0.0.1:{self.ports['health']}"
        configuration.setdefault("metrics", {})["bindAddress"] = f"127.0.0.1:{self.ports['metrics']}"
        configuration["webhook"] = {
            **(configuration.get("webhook") or {}),
            "host": "127.0.0.1",
            "port": self.ports["webhook"],
            "certDir": str(self.folder / "certs"),
        }
        configuration["visibilityServer"] = {"bindAddress": "127.0.0.1", "bindPort": self.ports["visibility"]}
        configuration.setdefault("leaderElection", {})["leaderElect"] = False
        return configuration

    def _chart_arguments(self) -> list[str]:
        """The Deployment's container args but --config (feature gates, log level), as the chart renders them."""
        deployment = client.AppsV1Api(self.api).read_namespaced_deployment(
            f"{self.fullname}-controller-manager", self.namespace
        )
        container = deployment.spec.template.spec.containers[0]
        return [arg for arg in container.args or [] if not arg.startswith("--config")]

    def _service_port(self, name: str) -> tuple[str, int]:
        service = client.CoreV1Api(self.api).read_namespaced_service(name, self.namespace)
        return service.spec.cluster_ip, service.spec.ports[0].port

    def start(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / "certs").mkdir(exist_ok=True)
        configuration = self._configuration()
        config_file = self.folder / "config.yaml"
        config_file.write_text(yaml.safe_dump(configuration, sort_keys=False))
        for service, port in (
            (f"{self.fullname}-webhook-service", "webhook"),
            (f"{self.fullname}-visibility-server", "visibility"),
        ):
            with contextlib.suppress(ApiException):
                cluster_ip, service_port = self._service_port(service)
                route = ServiceRoute(cluster_ip, service_port, self.ports[port])
                route.start()
                self.routes.append(route)
        self._copying = True
        threading.Thread(target=self._copy_certificates, daemon=True, name="kueue-certs").start()
        environment = {**os.environ, "KUBECONFIG": str(self.kubeconfig)}
        with open(self.folder / "kueue.log", "wb") as log:
            self.process = subprocess.Popen(
                # --kubeconfig (controller-runtime's flag), not only $KUBECONFIG: the visibility server takes its
                # delegated authentication and authorization from that flag (kueue pkg/visibility/server.go), and
                # fails without it outside a pod.
                [
                    find_binary("kueue"),
                    f"--config={config_file}",
                    f"--kubeconfig={self.kubeconfig}",
                    *self._chart_arguments(),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=environment,
                start_new_session=True,
            )

    def _copy_certificates(self) -> None:
        """What the pod's Secret volume does: the Secret's tls.crt and tls.key into certDir, whenever they change."""
        core = client.CoreV1Api(self.api)
        secret_name = f"{self.fullname}-webhook-server-cert"
        while self._copying:
            with contextlib.suppress(ApiException):
                data = core.read_namespaced_secret(secret_name, self.namespace).data or {}
                for key in ("ca.crt", "tls.crt", "tls.key"):
                    if key in data:
                        path = self.folder / "certs" / key
                        value = base64.b64decode(data[key])
                        if not path.exists() or path.read_bytes() != value:
                            path.write_bytes(value)
            time.sleep(1)

    def healthy(self) -> bool:
        import urllib.request

        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ports['health']}/readyz", timeout=2) as answer:
                return answer.status == 200
        except OSError:
            return False

    def stop(self) -> None:
        self._copying = False
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        for route in self.routes:
            route.stop()
