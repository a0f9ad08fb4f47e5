"""Prometheus metrics of the Kubernetes adapter (DESIGN §10)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge

REQUESTS = Counter(
    "leoflow_kube_requests",
    "apiserver requests by verb, resource and HTTP status (0: no answer)",
    ["verb", "resource", "code"],
)
WATCH_RESTARTS = Counter(
    "leoflow_kube_watch_restarts",
    "Pod watch restarts by reason (timeout, dropped, gone, error)",
    ["reason"],
)
CACHE_SYNCED = Gauge("leoflow_pod_cache_synced", "1 while the pod cache is synced")
CACHE_PODS = Gauge("leoflow_pod_cache_pods", "Task pods in the pod cache")
