"""Asset URIs: one canonical spelling per asset, and no credentials ever stored."""

from __future__ import annotations

import pytest

from leoflow.domain.assets.uri import MAX_URI_CHARS, AssetUriError, normalize_uri, normalize_uris


@pytest.mark.parametrize(
    ("written", "canonical"),
    [
        ("orders", "orders"),  # a plain name is kept as written
        ("Orders.Daily", "Orders.Daily"),
        ("duckdb://warehouse/main.orders", "duckdb://warehouse/main.orders"),
        ("DuckDB://WareHouse/main.Orders", "duckdb://warehouse/main.Orders"),  # path keeps case
        ("S3://My-Bucket/Prefix/", "s3://my-bucket/Prefix/"),
        ("postgres://DB.example.com:5432/db/s.t", "postgres://db.example.com:5432/db/s.t"),
        ("file:///data/x.csv", "file:///data/x.csv"),
        ("s3://b/k?z=1&a=2", "s3://b/k?a=2&z=1"),  # query sorted
        ("s3://b/k#part", "s3://b/k"),  # the fragment is no part of the asset
    ],
)
def test_uris_are_normalised_as_airflow_and_openlineage_do(written: str, canonical: str) -> None:
    assert normalize_uri(written) == canonical


@pytest.mark.parametrize(
    "uri",
    [
        "postgres://user:hunter2@db/app/public.orders",
        "s3://AKIAKEY:secret@bucket/key",
        "postgres://user@db/app/public.orders",  # a user alone is a credential too
        "postgres://db/app?password=hunter2",
        "s3://bucket/key?X-Amz-Signature=abc",
        "https://host/path?access_token=abc",
        "https://host/path?sig=abc",
    ],
)
def test_credentials_in_a_uri_are_refused_and_never_echoed(uri: str) -> None:
    with pytest.raises(AssetUriError, match="must not contain credentials") as info:
        normalize_uri(uri)
    for secret in ("hunter2", "secret", "abc"):
        if secret in uri:
            assert secret not in str(info.value)


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("ord ers", "no spaces"),
        ("orders\x07", "control"),
        ("ördres", "ASCII"),
        ("1s3://bucket/key", "malformed scheme"),
        ("://bucket", "malformed scheme"),
        ("s3://", "no host and no path"),
        ("postgres://db:99999/x", "port"),
        ("postgres://db:http/x", "port"),
        ("leoflow://x/y", "reserved"),
        ("AIRFLOW://x/y", "reserved"),
        ("x" * (MAX_URI_CHARS + 1), "at most"),
        (42, "a string"),
        (None, "a string"),
    ],
)
def test_malformed_uris_are_refused_saying_why(value: object, fragment: str) -> None:
    with pytest.raises(AssetUriError, match=fragment):
        normalize_uri(value)


def test_two_spellings_of_one_asset_are_one_entry_in_the_order_given() -> None:
    assert normalize_uris(["S3://B/k", "orders", "s3://b/k"]) == ("s3://b/k", "orders")


@pytest.mark.parametrize(
    "uri", ["dbt:///main.orders", "S3://B/k?b=&a=1", "file:///x", "orders", "x://h:80/p"]
)
def test_normalising_twice_changes_nothing(uri: str) -> None:
    once = normalize_uri(uri)
    assert normalize_uri(once) == once
