"""The three PATCH flavours the apiserver accepts, as far as tests need them.

- ``application/merge-patch+json`` — RFC 7386: maps merge, ``null`` deletes, lists replace.
- ``application/strategic-merge-patch+json`` — what ``kubernetes_asyncio`` sends for a
  dict body. Treated as a merge patch, except that lists with a known merge key
  (containers and statuses by ``name``, conditions by ``type``) merge element-wise,
  which is what a kubelet status update relies on. ``$patch``/``$retainKeys``
  directives are not supported.
- ``application/json-patch+json`` — RFC 6902 add/replace/remove/test.
"""

from __future__ import annotations

import copy
from typing import Any

from .status import ApiError, status_body

JsonObj = dict[str, Any]

MERGE_KEYS: dict[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "containerStatuses": "name",
    "initContainerStatuses": "name",
    "ephemeralContainerStatuses": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "conditions": "type",
    "ports": "containerPort",
}


def merge_patch(target: Any, patch: Any, strategic: bool = False) -> Any:
    """Apply an RFC 7386 merge patch (with merge-key list merging when ``strategic``)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result: JsonObj = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        elif (
            strategic
            and key in MERGE_KEYS
            and isinstance(value, list)
            and isinstance(result.get(key), list)
        ):
            result[key] = _merge_list(result[key], value, MERGE_KEYS[key])
        else:
            result[key] = merge_patch(result.get(key), value, strategic)
    return result


def _merge_list(current: list[Any], patch: list[Any], merge_key: str) -> list[Any]:
    merged = copy.deepcopy(current)
    for item in patch:
        if not isinstance(item, dict) or merge_key not in item:
            merged.append(copy.deepcopy(item))
            continue
        for i, existing in enumerate(merged):
            if isinstance(existing, dict) and existing.get(merge_key) == item[merge_key]:
                merged[i] = merge_patch(existing, item, strategic=True)
                break
        else:
            merged.append(copy.deepcopy(item))
    return merged


def _unprocessable(message: str) -> ApiError:
    return ApiError(status_body(422, "Invalid", message))


def _walk(doc: Any, pointer: str) -> tuple[Any, str]:
    parts = [p.replace("~1", "/").replace("~0", "~") for p in pointer.split("/")[1:]]
    if not parts:
        raise _unprocessable("json patch: empty path")
    node = doc
    for part in parts[:-1]:
        node = node[int(part)] if isinstance(node, list) else node[part]
    return node, parts[-1]


def json_patch(doc: JsonObj, ops: list[JsonObj]) -> JsonObj:
    """Apply RFC 6902 operations (add, replace, remove, test)."""
    result = copy.deepcopy(doc)
    for op in ops:
        try:
            parent, last = _walk(result, op["path"])
            kind = op["op"]
            if kind in ("add", "replace"):
                if isinstance(parent, list):
                    index = len(parent) if last == "-" else int(last)
                    if kind == "add":
                        parent.insert(index, copy.deepcopy(op["value"]))
                    else:
                        parent[index] = copy.deepcopy(op["value"])
                else:
                    if kind == "replace" and last not in parent:
                        raise KeyError(last)
                    parent[last] = copy.deepcopy(op["value"])
            elif kind == "remove":
                del parent[int(last) if isinstance(parent, list) else last]
            elif kind == "test":
                current = parent[int(last)] if isinstance(parent, list) else parent[last]
                if current != op["value"]:
                    raise _unprocessable(f"json patch: test failed at {op['path']}")
            else:
                raise _unprocessable(f"json patch: unsupported op {kind!r}")
        except (KeyError, IndexError, ValueError, TypeError) as exc:
            raise _unprocessable(f"json patch: cannot apply {op}: {exc}") from exc
    return result


def apply_patch(doc: JsonObj, body: Any, content_type: str) -> JsonObj:
    """Dispatch on the request's Content-Type as the apiserver does (415 otherwise)."""
    if content_type == "application/json-patch+json":
        if not isinstance(body, list):
            raise _unprocessable("json patch body must be a list")
        return json_patch(doc, body)
    if content_type in ("application/merge-patch+json", "application/strategic-merge-patch+json"):
        strategic = content_type == "application/strategic-merge-patch+json"
        patched = merge_patch(doc, body, strategic)
        assert isinstance(patched, dict)
        return patched
    raise ApiError(
        status_body(
            415,
            "UnsupportedMediaType",
            f"the body of the request was in an unknown format - accepted media types "
            f"include: application/json-patch+json, application/merge-patch+json, "
            f"application/strategic-merge-patch+json (got {content_type!r})",
        )
    )
