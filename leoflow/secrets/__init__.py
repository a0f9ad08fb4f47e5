"""Secret backends: where ResolveSecret's values come from.

Owns reading secret values by name (a directory of files today). Never imports the
scheduler, the API, the store, the executors or ``kubernetes_asyncio``: the agent
service asks a backend, and the backend knows nothing of who asked.
"""

from leoflow.secrets.backend import SecretBackend
from leoflow.secrets.directory import DirectorySecrets, valid_secret_name

__all__ = ["DirectorySecrets", "SecretBackend", "valid_secret_name"]
