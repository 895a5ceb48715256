"""``cmx train-k8s``: render (and validate) the Kubernetes manifests of a multi-node run.
Light at import: argparse only; the rendering is imported when the command runs."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from cmx_train.config import parse
from cmx_train.k8s import render, validate, write


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", required=True, help="directory to write configmap/pvc/service/job .yaml into")
    parser.add_argument("--name", default="cmx-train", help="the Job's name (a DNS-1035 label)")
    parser.add_argument("--image", default="pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime",
                        help="container image with torch and cmx-train installed")
    parser.add_argument("--model", default="resnet50", help="digits-cnn, resnet50 or bert-base")
    parser.add_argument("--nodes", type=int, default=2, help="pods, one per node")
    parser.add_argument("--nproc", type=int, default=8, help="GPUs (ranks) per node: the nvidia.com/gpu limit")
    parser.add_argument("--batch-size", type=int, default=2048, help="global batch size")
    parser.add_argument("--precision", default="bf16", help="fp32, bf16 or fp16")
    parser.add_argument("--steps", type=int, default=100, help="timed steps")
    parser.add_argument("--accelerator", default="h100", help="GPU tag for the node selector (h100, h200, a100)")
    parser.add_argument("--pvc-size", default="200Gi", help="size of the data PVC")
    parser.add_argument("--storage-class", default=None, help="storage class of the PVC (ReadWriteMany)")


def run(args: argparse.Namespace) -> int:
    config = parse({"model": args.model, "nodes": args.nodes, "nproc": args.nproc, "batch_size": args.batch_size,
                    "precision": args.precision, "steps": args.steps, "device": "cuda", "backend": "nccl"})
    manifests = render(config, name=args.name, image=args.image, accelerator=args.accelerator,
                       pvc_size=args.pvc_size, storage_class=args.storage_class)
    validate(manifests)
    paths = write(manifests, Path(args.out))
    if getattr(args, "json", False):
        print(json.dumps({"files": [str(p) for p in paths], "kinds": [o["kind"] for o in manifests.objects()],
                          "validated_against": "kubernetes 1.37.0 (kubernetes-validate)"}))
    else:
        for path in paths:
            print(path)
    return 0
