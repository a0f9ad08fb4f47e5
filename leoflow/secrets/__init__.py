"""Secret backends: where ResolveSecret's values come from."""

from leoflow.secrets.backend import SecretBackend
from leoflow.secrets.directory import DirectorySecrets, valid_secret_name

__all__ = ["DirectorySecrets", "SecretBackend", "valid_secret_name"]
