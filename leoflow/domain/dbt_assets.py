"""The assets a dbt node declares: the relation it builds, and the relations it reads.

One rule names every relation, from the manifest alone (no connection, no profile):

    <adapter_type>://<database>/<schema>.<identifier>

``adapter_type`` is the manifest's ``metadata.adapter_type`` (``duckdb``, ``postgres``,
``snowflake``...; ``dbt`` when the manifest does not say), ``identifier`` is the node's
``alias`` (a source's ``identifier``), else its name. A node without a database (some
adapters have none) is ``<adapter_type>:///<schema>.<identifier>``. Each part is
percent-encoded where it is not a plain identifier, and the whole is normalised like
any asset URI (so the database, as the URI's host, is lower-case). The dbt shop project
built into DuckDB file ``shop.duckdb`` thus has ``duckdb://shop/main.stg_orders``: a
DAG scheduled on that URI runs after the model is rebuilt.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from leoflow.domain.assets.uri import AssetUriError, normalize_uri, quote_part
from leoflow.domain.dbt_graph import Graph


def relation_uri(node: Mapping[str, Any], adapter: str) -> str | None:
    """The node's relation as an asset URI; None when the manifest names none usable."""
    kind = node.get("resource_type")
    key = "identifier" if kind == "source" else "alias"
    identifier = node.get(key) or node.get("name")
    if not identifier:
        return None
    database, schema = node.get("database") or "", node.get("schema") or ""
    name = f"{_part(schema)}.{_part(identifier)}" if schema else _part(identifier)
    try:
        return normalize_uri(f"{adapter}://{_part(database)}/{name}")
    except AssetUriError:
        return None  # a relation no URI can name is no asset; the task still runs


def _part(value: object) -> str:
    return quote_part(str(value))


def adapter_of(manifest: Mapping[str, Any]) -> str:
    adapter = str((manifest.get("metadata") or {}).get("adapter_type") or "dbt").lower()
    return adapter if adapter.isascii() and adapter.isalnum() else "dbt"


def node_assets(graph: Graph, adapter: str, uid: str, reads: Iterable[str]) -> dict[str, Any]:
    """``produces``/``consumes`` for the task of ``uid``: its own relation, and the
    relations it reads (sources and the models, seeds and snapshots below it)."""
    out: dict[str, Any] = {}
    made = relation_uri(graph.nodes[uid], adapter)
    if made is not None:
        out["produces"] = [made]
    read = {relation_uri(graph.nodes[up], adapter) for up in reads}
    read.discard(None)
    if read:
        out["consumes"] = sorted(str(uri) for uri in read)
    return out
