"""cmx-k8s: run cmx plans as Kubernetes Jobs (see README.md)."""
