"""Kubernetes: the apiserver client, the task pod, the pod cache, the executor, Lease election.

The only package that imports ``kubernetes_asyncio`` (and talks to an apiserver);
every call it makes is declared once in ``calls`` for the RBAC check. Never imports
the scheduler or the API, which reach it only through the executor and leadership
interfaces in ``leoflow.domain``.
"""
