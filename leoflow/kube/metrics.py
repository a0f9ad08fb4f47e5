"""Prometheus metrics of the Kubernetes adapter."""

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
CALL_RETRIES = Counter(
    "leoflow_kube_call_retries",
    "apiserver calls tried again because the apiserver did not answer usefully, by call "
    "and why (unreachable: no answer; throttled: 429; server_error: 5xx)",
    ["call", "why"],
)
LAUNCHES_WAITING = Gauge(
    "leoflow_kube_launches_waiting",
    "Queued tries whose pod create waits for the apiserver to come back",
)
APISERVER_UNREACHABLE = Gauge(
    "leoflow_kube_apiserver_unreachable",
    "1 while the executor's last apiserver call got no useful answer",
)
WATCH_SILENT = Counter(
    "leoflow_kube_watch_silent",
    "Pod watches given up because nothing (not even a bookmark) arrived in time",
)
WARM_PODS = Gauge("leoflow_warm_pods", "Warm task pods the leader knows, by DAG", ["dag_id"])
WARM_POD_RETIREMENTS = Counter(
    "leoflow_warm_pod_retirements", "Warm pods told to retire, by why", ["why"]
)
