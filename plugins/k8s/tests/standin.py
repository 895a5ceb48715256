"""A STAND-IN for a Kubernetes API server (no real one can run on these machines): a small
loopback HTTP server implementing only the endpoints cmx-k8s's client calls (create, read
and delete Job, ConfigMap and PVC; list pods by ``job-name``; read a pod's log), so the real
``kubernetes`` client is exercised against it through a kubeconfig.

Its "kubelet" runs a created Job's container command on this machine as a child process
(the image is not pulled): each volume's mountPath is mapped to a private directory (the
ConfigMap's files written into its own), in the command's arguments and environment, which
is what the container would see. The child's output is the pod log; its exit code sets the
Job's Complete/Failed condition. Deleting the Job kills the child's process group."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import tempfile
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

_ROUTE = re.compile(r"^/(?:api/v1|apis/batch/v1)/namespaces/([^/]+)/([a-z]+)(?:/([^/]+))?(?:/(status|log))?$")


@dataclass
class Pod:
    name: str
    process: subprocess.Popen[bytes]
    log: Path


@dataclass
class StandIn:
    """The server's state; ``calls`` records (method, path) for assertions."""

    root: Path
    objects: dict[tuple[str, str, str], dict[str, Any]] = field(default_factory=dict)
    pods: dict[str, Pod] = field(default_factory=dict)
    calls: list[tuple[str, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def start_pod(self, namespace: str, job: dict[str, Any]) -> None:
        name = job["metadata"]["name"]
        spec = job["spec"]["template"]["spec"]
        container = spec["containers"][0]
        base = Path(tempfile.mkdtemp(prefix=f"pod-{name}-", dir=self.root))
        mapping: dict[str, str] = {}
        volumes = {v["name"]: v for v in spec["volumes"]}
        for mount in container["volumeMounts"]:
            local = base / mount["name"]
            local.mkdir()
            config = volumes[mount["name"]].get("configMap")
            if config:
                for key, text in self.objects[(namespace, "configmaps", config["name"])]["data"].items():
                    (local / key).write_text(text)
            mapping[mount["mountPath"]] = str(local)

        def mapped(text: str) -> str:
            for far, near in sorted(mapping.items(), key=lambda kv: -len(kv[0])):
                text = text.replace(far, near)
            return text

        env = {"PATH": os.environ["PATH"]}
        env.update({e["name"]: mapped(e["value"]) for e in container.get("env", []) if "value" in e})
        log = base / "pod.log"
        with open(log, "wb") as out:
            process = subprocess.Popen([mapped(a) for a in container["command"]], env=env, stdout=out,
                                       stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        self.pods[name] = Pod(f"{name}-pod0", process, log)

    def job_status(self, name: str) -> dict[str, Any]:
        pod = self.pods.get(name)
        code = pod.process.poll() if pod else None
        if code is None:
            return {"active": 1}
        kind = "Complete" if code == 0 else "Failed"
        return {"succeeded" if code == 0 else "failed": 1,
                "conditions": [{"type": kind, "status": "True", "reason": "Exited", "message": f"exit {code}"}]}

    def stop_pod(self, name: str) -> None:
        pod = self.pods.pop(name, None)
        if pod and pod.process.poll() is None:
            os.killpg(pod.process.pid, signal.SIGKILL)
            pod.process.wait()

    def stop_all(self) -> None:
        for name in list(self.pods):
            self.stop_pod(name)


def _handler(state: StandIn) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, code: int, body: Any, text: bool = False) -> None:
            data = body.encode() if text else json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "text/plain" if text else "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _missing(self, what: str) -> None:
            self._send(404, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound",
                             "code": 404, "message": f"{what} not found"})

        def _route(self) -> tuple[str, str, str | None, str | None, dict[str, list[str]]]:
            url = urlparse(self.path)
            state.calls.append((self.command, url.path))
            match = _ROUTE.match(url.path)
            if not match:
                return "", "", None, None, {}
            return match.group(1), match.group(2), match.group(3), match.group(4), parse_qs(url.query)

        def do_POST(self) -> None:
            namespace, kind, _, _, _ = self._route()
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            key = (namespace, kind, body["metadata"]["name"])
            with state.lock:
                if key in state.objects:
                    self._send(409, {"kind": "Status", "code": 409, "reason": "AlreadyExists", "status": "Failure"})
                    return
                body["metadata"].update(namespace=namespace, uid=f"uid-{len(state.objects)}")
                state.objects[key] = body
                if kind == "jobs":
                    state.start_pod(namespace, body)
            self._send(201, body)

        def do_GET(self) -> None:
            namespace, kind, name, sub, query = self._route()
            if kind == "pods" and name is None:
                job = query.get("labelSelector", [""])[0].removeprefix("job-name=")
                pod = state.pods.get(job)
                items = [{"metadata": {"name": pod.name, "namespace": namespace, "labels": {"job-name": job},
                                       "creationTimestamp": "2026-01-01T00:00:00Z"}}] if pod else []
                self._send(200, {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items})
                return
            if kind == "pods" and sub == "log":
                pod = next((p for p in state.pods.values() if p.name == name), None)
                if pod is None:
                    self._missing(f"pod {name}")
                    return
                self._send(200, pod.log.read_text(errors="replace"), text=True)
                return
            found = state.objects.get((namespace, kind, name or ""))
            if found is None:
                self._missing(f"{kind} {name}")
                return
            if kind == "jobs":
                found = {**found, "status": state.job_status(str(name))}
            self._send(200, found)

        def do_DELETE(self) -> None:
            namespace, kind, name, _, _ = self._route()
            with state.lock:
                found = state.objects.pop((namespace, kind, name or ""), None)
                if kind == "jobs" and name:
                    state.stop_pod(name)
            if found is None:
                self._missing(f"{kind} {name}")
                return
            self._send(200, {"kind": "Status", "apiVersion": "v1", "status": "Success"})

    return Handler


def serve(root: Path) -> tuple[ThreadingHTTPServer, StandIn]:
    """Start the stand-in on 127.0.0.1 (a free port) in a daemon thread."""
    state = StandIn(root)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, state


def kubeconfig(path: Path, port: int) -> Path:
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "standin",
        "clusters": [{"name": "standin", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
        "users": [{"name": "standin", "user": {"token": "standin-token"}}],
        "contexts": [{"name": "standin", "context": {"cluster": "standin", "user": "standin"}}]}))
    return path
