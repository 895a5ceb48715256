"""A STAND-IN for a Kubernetes API server (no real one can run on these machines): a small
loopback HTTP server implementing only the endpoints cmx-k8s's client calls (create, read
and delete Job, ConfigMap and PVC; list pods by ``job-name``; read a pod's log), so the real
``kubernetes`` client is exercised against it through a kubeconfig.

Its "kubelet" runs a created Job's container command on this machine as a child process
(the image is not pulled): each volume's mountPath is mapped to a private directory (the
ConfigMap's files written into its own, those of every ConfigMap a ``projected`` volume
lists too), in the command's arguments and environment, which
is what the container would see; ``$(NAME)`` in them is expanded from the container's env
as Kubernetes does. The child's output is the pod log; its exit code sets the Job's
Complete/Failed condition. An Indexed Job (``completionMode: Indexed``) runs its
``completions`` indexes, ``parallelism`` pods at a time (the next index started as one
ends), each pod with the ``batch.kubernetes.io/job-completion-index`` annotation (and env
from its fieldRef); the status counts ``succeeded``/``failed`` and ``completedIndexes``/
``failedIndexes``, with ``backoffLimitPerIndex`` each index failing on its own. Deleting the
Job kills its children's process groups.

Cluster DNS: a pod of an Indexed Job whose ``subdomain`` is a created Service runs under
bubblewrap with a hosts file naming every pod of the Job (``<job>-<i>.<service>``, all
127.0.0.1, as every pod shares this machine's network) and its own hostname, so a
multi-node run's ``MASTER_ADDR=<job>-0.<service>`` resolves as it would in a cluster.

A pod evicted through the Eviction API (``POST .../pods/NAME/eviction``, as a node drain
does) is killed and ends ``Failed`` with the ``DisruptionTarget`` condition. The Job's
``podFailurePolicy`` is honoured as the Job controller does: an ``Ignore`` rule on
``DisruptionTarget`` replaces such a pod without counting it against ``backoffLimit``, and a
``FailJob`` rule on exit codes fails the Job at once (reason ``PodFailurePolicy``); other
failures count against ``backoffLimit``."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

_ROUTE = re.compile(r"^/(?:api/v1|apis/batch/v1)/namespaces/([^/]+)/([a-z]+)(?:/([^/]+))?(?:/(status|log|eviction))?$")


INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
BWRAP = "bwrap"
"""Bubblewrap, which gives a multi-node run's pods the names of cluster DNS (``_cluster_dns``)."""
_VAR = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


def expand(text: str, env: dict[str, str]) -> str:
    """Kubernetes' rule for ``$(NAME)`` in a container's command, args and env values:
    replaced when NAME is defined, left as it is when not; ``$$`` is one ``$``."""
    def one(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        return env.get(match.group(1), match.group(0))

    return _VAR.sub(one, text)


def ranges(indexes: list[int]) -> str:
    """``[0, 1, 2, 4]`` as the Job status writes it: ``"0-2,4"``."""
    parts: list[str] = []
    for i in sorted(indexes):
        if parts and int(parts[-1].split("-")[-1]) == i - 1:
            parts[-1] = f"{parts[-1].split('-')[0]}-{i}"
        else:
            parts.append(str(i))
    return ",".join(parts)


@dataclass
class Pod:
    name: str
    process: subprocess.Popen[bytes]
    log: Path
    index: int | None = None
    disrupted: bool = False
    """Evicted (the ``DisruptionTarget`` condition)."""


@dataclass
class JobRun:
    """A created Job's pods: an Indexed Job starts ``min(parallelism, completions)`` at a
    time and the next index as one ends; each index may fail ``backoffLimitPerIndex``
    times more; without it the Job fails at the first failure over ``backoffLimit``."""

    spec: dict[str, Any]
    pods: list[Pod] = field(default_factory=list)
    waiting: list[int] = field(default_factory=list)
    succeeded: list[int] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)
    failures: dict[int, int] = field(default_factory=dict)
    counted: set[str] = field(default_factory=set)
    ended: str | None = None  # "Complete", "Failed"
    reason: str = ""

    @property
    def indexed(self) -> bool:
        return self.spec.get("completionMode") == "Indexed"


@dataclass
class StandIn:
    """The server's state; ``calls`` records (method, path) and ``created`` each created
    object's body, for assertions; ``peak`` is the most pods that ever ran at once."""

    root: Path
    objects: dict[tuple[str, str, str], dict[str, Any]] = field(default_factory=dict)
    pods: dict[str, JobRun] = field(default_factory=dict)
    calls: list[tuple[str, str]] = field(default_factory=list)
    created: list[dict[str, Any]] = field(default_factory=list)
    peak: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    deleted: dict[str, JobRun] = field(default_factory=dict)
    """Each deleted Job's pods, by name (for assertions after cmx deleted the Job)."""

    def start_job(self, namespace: str, job: dict[str, Any]) -> None:
        name = job["metadata"]["name"]
        run = JobRun(job["spec"])
        run.waiting = list(range(int(run.spec.get("completions", 1)))) if run.indexed else [0]
        self.pods[name] = run
        self._advance(namespace, name, run)
        threading.Thread(target=self._kubelet, args=(namespace, name, run), daemon=True).start()

    def _kubelet(self, namespace: str, name: str, run: JobRun) -> None:
        while True:
            with self.lock:
                if self.pods.get(name) is not run or run.ended:
                    return
                self._advance(namespace, name, run)
            time.sleep(0.05)

    def _advance(self, namespace: str, name: str, run: JobRun) -> None:
        """Account for ended pods, then start waiting indexes while there is room."""
        for pod in run.pods:
            code = pod.process.poll()
            index = pod.index or 0
            if code is None or pod.name in run.counted:
                continue
            run.counted.add(pod.name)
            if code == 0:
                run.succeeded.append(index)
                continue
            action = _policy_action(run.spec, pod, code)
            if action == "Ignore":
                run.waiting.insert(0, index)
                continue
            if action == "FailJob":
                run.failed.append(index)
                run.ended, run.reason = "Failed", "PodFailurePolicy"
                self._kill(run)
                return
            run.failures[index] = run.failures.get(index, 0) + 1
            per_index = run.spec.get("backoffLimitPerIndex")
            if run.indexed and per_index is not None:
                if run.failures[index] > per_index:
                    run.failed.append(index)
                else:
                    run.waiting.insert(0, index)
            elif sum(run.failures.values()) > int(run.spec.get("backoffLimit", 6)):
                run.failed.append(index)
                run.ended, run.reason = "Failed", "BackoffLimitExceeded"
                self._kill(run)
                return
            else:
                run.waiting.insert(0, index)
        running = [p for p in run.pods if p.process.poll() is None]
        room = int(run.spec.get("parallelism", 1)) - len(running)
        while room > 0 and run.waiting:
            self._start_pod(namespace, name, run, run.waiting.pop(0))
            room -= 1
            running.append(run.pods[-1])
            self.peak = max(self.peak, sum(len([p for p in r.pods if p.process.poll() is None])
                                           for r in self.pods.values()))
        if not running and not run.waiting:
            run.ended = "Complete" if not run.failed else "Failed"
            run.reason = "Exited" if not run.indexed else ("" if not run.failed else "FailedIndexes")

    def _start_pod(self, namespace: str, name: str, run: JobRun, index: int) -> None:
        spec = run.spec["template"]["spec"]
        container = spec["containers"][0]
        base = Path(tempfile.mkdtemp(prefix=f"pod-{name}-", dir=self.root))
        mapping: dict[str, str] = {}
        volumes = {v["name"]: v for v in spec["volumes"]}
        for mount in container["volumeMounts"]:
            local = base / mount["name"]
            local.mkdir()
            volume = volumes[mount["name"]]
            sources = [volume["configMap"]] if "configMap" in volume else \
                [s["configMap"] for s in volume.get("projected", {}).get("sources", []) if "configMap" in s]
            for config in sources:  # a projected volume: every source's keys in one directory
                for key, text in self.objects[(namespace, "configmaps", config["name"])]["data"].items():
                    (local / key).write_text(text)
            mapping[mount["mountPath"]] = str(local)

        def mapped(text: str) -> str:
            for far, near in sorted(mapping.items(), key=lambda kv: -len(kv[0])):
                text = text.replace(far, near)
            return text

        annotations = {INDEX_ANNOTATION: str(index)} if run.indexed else {}
        defined: dict[str, str] = {}
        for item in container.get("env", []):
            if "value" in item:
                defined[item["name"]] = expand(item["value"], defined)
            elif "valueFrom" in item:
                path = item["valueFrom"]["fieldRef"]["fieldPath"]
                found = re.fullmatch(r"metadata\.annotations\['([^']+)'\]", path)
                defined[item["name"]] = annotations.get(found.group(1), "") if found else ""
        env = {"PATH": os.environ["PATH"], **{k: mapped(v) for k, v in defined.items()}}
        argv = [mapped(expand(a, defined)) for a in [*container["command"], *container.get("args", [])]]
        argv = [*self._cluster_dns(namespace, name, run, index, base), *argv]
        log = base / "pod.log"
        with open(log, "wb") as out:
            process = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL, start_new_session=True)
        run.pods.append(Pod(f"{name}-{index}-pod{len(run.pods)}", process, log,
                            index if run.indexed else None))

    def _cluster_dns(self, namespace: str, name: str, run: JobRun, index: int, base: Path) -> list[str]:
        """The prefix that gives a pod of an Indexed Job under a headless Service (the pod
        spec's ``subdomain``) the names cluster DNS would: its hostname ``<job>-<index>`` and
        every pod's ``<job>-<i>.<service>`` (the short and the namespace-qualified forms),
        here all 127.0.0.1, in a hosts file bubblewrap binds over ``/etc/hosts`` in a UTS
        namespace of the pod's own. No prefix (the pod sees this machine's names) otherwise."""
        service = run.spec["template"]["spec"].get("subdomain")
        if not run.indexed or not service or (namespace, "services", service) not in self.objects:
            return []
        pods = [f"{name}-{i}" for i in range(int(run.spec.get("completions", 1)))]
        lines = [f"127.0.0.1 {pod}.{service} {pod}.{service}.{namespace}.svc.cluster.local" for pod in pods]
        hosts = base / "hosts"
        hosts.write_text("\n".join(["127.0.0.1 localhost", f"127.0.0.1 {name}-{index}", *lines, ""]))
        return [BWRAP, "--dev-bind", "/", "/", "--ro-bind", str(hosts), "/etc/hosts", "--unshare-uts",
                "--hostname", f"{name}-{index}", "--"]

    def job_status(self, name: str) -> dict[str, Any]:
        run = self.pods.get(name)
        if run is None:
            return {}
        with self.lock:
            active = len([p for p in run.pods if p.process.poll() is None])
            status: dict[str, Any] = {"active": active, "succeeded": len(run.succeeded), "failed": len(run.failed)}
            if run.indexed:
                status.update(completedIndexes=ranges(run.succeeded), failedIndexes=ranges(run.failed))
            if run.ended:
                last = run.pods[-1].process.returncode if run.pods else None
                message = f"exit {last}" if not run.indexed else f"{len(run.failed)} index(es) failed"
                status["conditions"] = [{"type": run.ended, "status": "True", "reason": run.reason or "Completed",
                                         "message": message}]
            return status

    def pod_items(self, namespace: str, job: str) -> list[dict[str, Any]]:
        run = self.pods.get(job)
        items = []
        for number, pod in enumerate(run.pods if run else ()):
            code = pod.process.poll()
            phase = "Running" if code is None else ("Succeeded" if code == 0 else "Failed")
            state = {"running": {}} if code is None else {"terminated": {"exitCode": code}}
            conditions = [{"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI"}] \
                if pod.disrupted else []
            annotations = {INDEX_ANNOTATION: str(pod.index)} if pod.index is not None else {}
            items.append({"metadata": {"name": pod.name, "namespace": namespace, "labels": {"job-name": job},
                                       "annotations": annotations,
                                       "creationTimestamp": f"2026-01-01T00:{number // 60:02d}:{number % 60:02d}Z"},
                          "status": {"phase": phase, "conditions": conditions, "containerStatuses": [
                              {"name": "cmx", "ready": False, "restartCount": 0, "image": "standin",
                               "imageID": "", "state": state}]}})
        return items

    def find_pod(self, name: str) -> Pod | None:
        return next((p for r in self.pods.values() for p in r.pods if p.name == name), None)

    def evict(self, name: str) -> bool:
        """Evict a running pod: killed, with the DisruptionTarget condition. False: no such pod."""
        pod = self.find_pod(name)
        if pod is None or pod.process.poll() is not None:
            return False
        pod.disrupted = True
        os.killpg(pod.process.pid, signal.SIGKILL)
        pod.process.wait()
        return True

    def _kill(self, run: JobRun) -> None:
        for pod in run.pods:
            if pod.process.poll() is None:
                os.killpg(pod.process.pid, signal.SIGKILL)
                pod.process.wait()

    def stop_pod(self, name: str) -> None:
        run = self.pods.pop(name, None)
        if run is not None:
            self._kill(run)
            self.deleted[name] = run

    def stop_all(self) -> None:
        for name in list(self.pods):
            self.stop_pod(name)


def _policy_action(spec: dict[str, Any], pod: Pod, code: int) -> str | None:
    """The action of the first ``podFailurePolicy`` rule a failed pod matches (None: none)."""
    for rule in (spec.get("podFailurePolicy") or {}).get("rules", ()):
        exits = rule.get("onExitCodes")
        if exits is not None and not pod.disrupted:
            values = set(exits.get("values", ()))
            if (code in values) == (exits.get("operator", "In") == "In"):
                return str(rule["action"])
        for condition in rule.get("onPodConditions", ()):
            if condition.get("type") == "DisruptionTarget" and pod.disrupted:
                return str(rule["action"])
    return None


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
            namespace, kind, name, sub, _ = self._route()
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if kind == "pods" and sub == "eviction":
                with state.lock:
                    evicted = state.evict(str(name))
                state.calls.append(("EVICT", str(name)))
                if evicted:
                    self._send(201, {"kind": "Status", "apiVersion": "v1", "status": "Success"})
                else:
                    self._missing(f"pod {name}")
                return
            key = (namespace, kind, body["metadata"]["name"])
            with state.lock:
                if key in state.objects:
                    self._send(409, {"kind": "Status", "code": 409, "reason": "AlreadyExists", "status": "Failure"})
                    return
                body["metadata"].update(namespace=namespace, uid=f"uid-{len(state.objects)}")
                state.objects[key] = body
                state.created.append(json.loads(json.dumps(body)))
                if kind == "jobs":
                    state.start_job(namespace, body)
            self._send(201, body)

        def do_GET(self) -> None:
            namespace, kind, name, sub, query = self._route()
            if kind == "pods" and name is None:
                job = query.get("labelSelector", [""])[0].removeprefix("job-name=")
                with state.lock:
                    items = state.pod_items(namespace, job)
                self._send(200, {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items})
                return
            if kind == "pods" and sub == "log":
                pod = state.find_pod(str(name))
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
            if kind == "services":  # the API server answers a Service's deletion with the Service
                self._send(200, found)
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
