"""The HTTP API (FastAPI) and, beside it in ``ui``, the web UI.

Owns the routes, their request/response bodies, auth, the request guard and serving.
It reads and acts through the store and the domain; it never imports the scheduler
(they meet through the store), nor ``leoflow.kube``, ``leoflow.executor`` or
``kubernetes_asyncio``: the API role holds no apiserver credential.
"""
