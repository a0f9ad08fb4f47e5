"""Anchor names and labels stay valid Kubernetes for any DAG id, and tell DAGs apart."""

from __future__ import annotations

import re

from leoflow.kube.dag_anchor import ANCHOR_SELECTOR, anchor_manifest, anchor_name, owner_reference

DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
IDS = ["sales", "Sales", "a.b-c_d", "x" * 300, "données/été", "sales ", "-x-"]


def test_names_and_labels_are_valid_and_distinct() -> None:
    names = {anchor_name(dag_id) for dag_id in IDS}
    assert len(names) == len(IDS)
    for dag_id in IDS:
        cm = anchor_manifest(dag_id, "tasks", ["b", "a", "b"])
        meta = cm["metadata"]
        assert DNS1123_LABEL.match(meta["name"]) and len(meta["name"]) <= 63, meta["name"]
        for value in meta["labels"].values():
            assert LABEL_VALUE.match(value) and len(value) <= 63, value
        assert cm["data"] == {"dag_id": dag_id, "shapes": "a\nb"}
        # The start-up sweep finds it by these labels.
        for requirement in ANCHOR_SELECTOR.split(","):
            key, _, wanted = requirement.partition("=")
            assert meta["labels"][key] == wanted


def test_owner_reference_does_not_block_the_owners_deletion() -> None:
    assert owner_reference("leoflow-dag-1", "u") == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "leoflow-dag-1",
        "uid": "u",
        "blockOwnerDeletion": False,
    }
