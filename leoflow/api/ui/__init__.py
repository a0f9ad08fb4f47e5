"""The web UI: pages, live regions, static assets and sessions, served beside the API.

Reads and acts through the API's own functions and store context. Never imports the
scheduler, ``leoflow.kube``, ``leoflow.executor`` or ``kubernetes_asyncio``; the API's
routes never import this package (only the app mounts it).
"""
