"""A Kubernetes object as Leoflow handles it: its JSON, as a dict.

The apiserver's objects are read and written as JSON dicts (no kubernetes_asyncio
models), so one alias names that shape for every module of this package.
"""

from __future__ import annotations

from typing import Any

JsonObj = dict[str, Any]
