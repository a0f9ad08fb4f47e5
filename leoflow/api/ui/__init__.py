"""The web UI: server-rendered pages, their live updates (server-sent events), logs
and actions, mounted on the API app at ``/`` and ``/ui``.

It reads through the API's own functions and the store; it never imports the
scheduler, never reaches Kubernetes, and the API's routes never import it (only
``api.app`` mounts it).
"""
