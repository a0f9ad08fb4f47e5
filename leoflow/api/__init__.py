"""The HTTP API (``/api/v1``), its request guard and the web UI it mounts (``ui``).

It talks to the store only; it never imports the scheduler, and never reaches
Kubernetes, directly or indirectly (import-linter contracts).
"""
