"""The ``docker`` executor: each Lite task in its own container, run from the very
pod the Kubernetes executor would create (``translate``), over the Docker Engine API."""
