"""Lite's executors: each task a local child process, directly or under one pooled agent.

Owns spawning and following child processes (process groups, parent-death, piped
output). Implements ``leoflow.domain.execution.Executor``; builds task environments
with ``leoflow.agent.environment``. Never imports the scheduler, the API, the store or
``kubernetes_asyncio`` (the Kubernetes executor lives in ``leoflow.kube``).
"""
