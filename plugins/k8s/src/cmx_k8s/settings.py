"""The k8s executor's settings (imported when the plugin registers: keep it light)."""

from __future__ import annotations

from dataclasses import dataclass, field

from cmx_core.api import ExecutorSettings


@dataclass(frozen=True)
class K8sSettings(ExecutorSettings):
    """``--executor-opt`` keys of the k8s executor."""

    render: str | None = field(default=None, metadata={
        "help": "write the manifests (ConfigMap, PVC, Job) into this directory; with cmx plan nothing is applied"})
    image: str | None = field(default=None, metadata={
        "help": "container image (default: cmx-docker's content-addressed tag of the recipe's template)"})
    image_prefix: str = field(default="", metadata={
        "help": "registry path put before the computed tag, e.g. registry.example.org/team/"})
    namespace: str = field(default="default", metadata={"help": "namespace of the Job and ConfigMap"})
    kubeconfig: str | None = field(default=None, metadata={
        "help": "kubeconfig file (default: KUBECONFIG or ~/.kube/config; in a pod, the service account)"})
    context: str | None = field(default=None, metadata={"help": "kubeconfig context (default: the current one)"})
    gpus: int | None = field(default=None, metadata={
        "help": "GPUs to request (default: the detected devices of the plan's accelerator, none without one)"})
    gpu_product: str | None = field(default=None, metadata={
        "help": "node label value the pod must run on, e.g. NVIDIA-H100-80GB-HBM3 (default: from the facts)"})
    pvc: str = field(default="cmx-cache", metadata={
        "help": "PersistentVolumeClaim holding datasets, models and the cmx cache (empty: an emptyDir)"})
    pvc_size: str = field(default="200Gi", metadata={"help": "size of the claim when cmx creates it"})
    pvc_access_mode: str = field(default="ReadWriteMany", metadata={
        "help": "access mode of the claim when cmx creates it: ReadWriteMany lets a sweep's pods on different "
                "nodes share it (ReadWriteOnce: one node only)"})
    cpus: str | None = field(default=None, metadata={
        "help": "CPU request and limit, e.g. 8 (default: the recipe's resources.cpus, else 1)"})
    memory: str | None = field(default=None, metadata={
        "help": "memory request and limit, e.g. 64Gi (default: the recipe's resources.memory, else 1Gi)"})
    backoff_limit: int = field(default=0, metadata={"help": "Job backoffLimit: retries of a failed pod"})
    timeout_s: int | None = field(default=None, metadata={
        "help": "Job activeDeadlineSeconds; the run is cancelled (the Job deleted) after it"})
    python: str = field(default="python3", metadata={"help": "the image's Python, which runs the result framing"})
    cmx: str = field(default="cmx", metadata={"help": "how the image starts cmx"})
    max_result_mb: float = field(default=4.0, metadata={
        "help": "largest far run directory sent back in the pod log, in MB (kubelet rotates logs at 10Mi)"})
    poll_s: float = field(default=2.0, metadata={"help": "seconds between Job status reads"})
    nodes: int = field(default=1, metadata={
        "help": "pods of a multi-node run, one per node (an Indexed Job behind a headless Service; each pod's "
                "launcher, e.g. a train step's launcher: torchrun, meets the others at MASTER_ADDR, pod 0)"})
    master_port: int = field(default=29500, metadata={
        "help": "MASTER_PORT of a multi-node run (torchrun's c10d rendezvous listens on the next port)"})
    metrics_port: int | None = field(default=None, metadata={
        "help": "serve the pod's run telemetry at :PORT/metrics, with prometheus.io scrape annotations"})
