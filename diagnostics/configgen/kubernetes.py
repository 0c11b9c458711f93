"""A Kubernetes Deployment and Service for a vLLM launch: GPUs and memory from the sizing,
probes on /health that allow for minutes of loading, /dev/shm as a memory volume."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml
from django.utils.translation import gettext_noop, pgettext_lazy

from diagnostics.configgen import launch
from diagnostics.configgen.base import ConfigFile, Section

PROBE_PERIOD_S = 10


def manifests(spec: launch.LaunchSpec) -> list[dict[str, Any]]:
    labels = {"app.kubernetes.io/name": spec.name, "app.kubernetes.io/component": "vllm"}
    args, _ = launch.serve_args(spec)
    health = {"httpGet": {"path": "/health", "port": "http"}}
    container: dict[str, Any] = {
        "name": "vllm",
        "image": spec.image,
        "args": ["--model", spec.model, *args],
        "ports": [{"name": "http", "containerPort": spec.port}],
        "env": [{"name": "HF_HOME", "value": "/models"}],
        "resources": {
            "requests": {"memory": f"{spec.memory_request_gib}Gi", "nvidia.com/gpu": spec.gpu_count},
            "limits": {"memory": f"{spec.memory_limit_gib}Gi", "nvidia.com/gpu": spec.gpu_count},
        },
        # vLLM binds its port only after loading and profiling: allow that long before liveness counts.
        "startupProbe": {
            **health,
            "periodSeconds": PROBE_PERIOD_S,
            "failureThreshold": spec.startup_minutes * 60 // PROBE_PERIOD_S,
        },
        "readinessProbe": {
            **health,
            "periodSeconds": PROBE_PERIOD_S,
            "failureThreshold": 3,
            "timeoutSeconds": 5,
        },
        "livenessProbe": {**health, "periodSeconds": 15, "failureThreshold": 4, "timeoutSeconds": 5},
        "volumeMounts": [{"name": "models", "mountPath": "/models"}],
    }
    volumes: list[dict[str, Any]] = [
        {"name": "models", "persistentVolumeClaim": {"claimName": spec.model_pvc}}
    ]
    if spec.gpu_count > 1:
        container["volumeMounts"].append({"name": "dshm", "mountPath": "/dev/shm"})
        volumes.append(
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": f"{spec.shm_size_gib}Gi"}}
        )
    if spec.api_key_secret:
        container["env"].append(
            {
                "name": "VLLM_API_KEY",
                "valueFrom": {"secretKeyRef": {"name": spec.api_key_secret, "key": "api-key"}},
            }
        )
    meta = {"name": spec.name, "namespace": spec.namespace, "labels": labels}
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta,
        "spec": {
            "replicas": spec.replicas,
            "strategy": {"type": "Recreate"},  # a rolling update would need twice the GPUs
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"terminationGracePeriodSeconds": 60, "containers": [container], "volumes": volumes},
            },
        },
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta,
        "spec": {"selector": labels, "ports": [{"name": "http", "port": spec.port, "targetPort": "http"}]},
    }
    return [deployment, service]


def build(values: Mapping[str, str]) -> launch.LaunchSpec:
    """The launch spec without a device list: Kubernetes schedules GPUs by count, so indexes
    (from a preset or a link) never conflict with the parallelism here."""
    return launch.build({**values, "gpu_devices": ""})


def render(spec: launch.LaunchSpec) -> list[ConfigFile]:
    _, notes = launch.serve_args(spec)
    header = "".join(f"# {note}\n" for note in notes)
    text = yaml.safe_dump_all(manifests(spec), sort_keys=False, default_flow_style=False)
    return [ConfigFile(f"{spec.name}-k8s.yaml", header + text, "yaml")]


GENERATOR = launch.generator(
    key="k8s",
    label=gettext_noop("Kubernetes Deployment and Service"),
    description=gettext_noop(
        "GPUs and memory from the sizing, /health probes that allow for loading, /dev/shm for multi-GPU."
    ),
    render=render,
    build=build,
    defaults={"gpu_devices": ""},  # blank: as many as TP x PP, for a deployment archive from here
    sections=(
        launch.MODEL_SECTION,
        launch.gpu_section(devices=False),
        launch.MEMORY_SECTION,
        Section(
            launch.KUBERNETES,
            (
                "name",
                "namespace",
                "replicas",
                "image",
                "model_pvc",
                "api_key_secret",
                "memory_request_gib",
                "memory_limit_gib",
            ),
        ),
        launch.ENGINE_FLAGS_SECTION,
        Section(
            pgettext_lazy("config generator", "Pod"),
            ("port", "host", "shm_size_gib", "startup_minutes"),
            advanced=True,
        ),
    ),
)
