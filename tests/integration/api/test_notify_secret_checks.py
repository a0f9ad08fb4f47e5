"""A notify: webhook secret that does not exist: a load error in Lite's folder (the
other DAGs keep loading, the file loads once the secret exists) and a 422 from the
in-process API's apply; Pro's split API does not check (it cannot see the secrets)."""

from __future__ import annotations

from pathlib import Path

import httpx

from leoflow.api.app import create_app
from leoflow.api.server import check_secrets_in_process
from leoflow.dagfile.loader import LoadOptions
from leoflow.runtime.dagfolder import DagFolderWatcher
from leoflow.secrets import DirectorySecrets
from leoflow.store import Store
from tests.integration.api.conftest import auth_header, make_auth, make_settings

BAD = """\
dag_id: alerting
tasks:
  t:
    command: echo t
    notify:
      - {events: [failure], webhook_secret: slack_url, format: slack}
"""
GOOD = """\
dag_id: quiet
tasks:
  t: {command: echo t}
"""


async def test_the_folder_reports_the_missing_secret_and_keeps_the_other_dags(
    store: Store, tmp_path: Path
) -> None:
    folder, secrets_dir = tmp_path / "dags", tmp_path / "secrets"
    folder.mkdir()
    secrets_dir.mkdir()
    (folder / "alerting.yaml").write_text(BAD)
    (folder / "quiet.yaml").write_text(GOOD)
    secrets = DirectorySecrets(secrets_dir)
    said: list[str] = []
    watcher = DagFolderWatcher(
        folder,
        LoadOptions(secrets_where=secrets.describe()),
        said.append,
        secret_names=secrets.names,
    )
    assert await watcher.refresh(store)
    assert sorted(watcher.good) == ["quiet"]
    errors = dict(await store.list_dag_errors())
    error = errors[str(folder / "alerting.yaml")]
    assert (
        f"{folder / 'alerting.yaml'}:6: tasks.t.notify.0.webhook_secret: webhook secret "
        f"'slack_url' does not exist in the secrets directory {secrets_dir} "
        "(LEOFLOW_SECRETS_DIR)"
    ) in error
    assert any("other DAGs keep running" in line for line in said)
    assert {d.dag_id for d in await store.list_dags()} == {"quiet"}

    # The secret appears: the file loads on the next pass, untouched.
    (secrets_dir / "slack_url").write_text("http://127.0.0.1:9/hook")
    assert await watcher.refresh(store)
    assert sorted(watcher.good) == ["alerting", "quiet"]
    assert dict(await store.list_dag_errors()) == {}


async def test_apply_in_lite_refuses_a_missing_webhook_secret_with_422(
    store: Store, tmp_path: Path
) -> None:
    settings = make_settings(tmp_path, secrets_dir=tmp_path / "secrets")
    app = create_app(store, settings, auth=make_auth())
    check_secrets_in_process(app, settings)
    transport = httpx.ASGITransport(app=app)
    headers = {**auth_header("admin"), "Content-Type": "application/yaml"}
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
        refused = await client.post("/api/v1/dags?name=alerting.yaml", content=BAD, headers=headers)
        assert refused.status_code == 422, refused.text
        detail = refused.json()["detail"]
        assert "nothing was stored" in detail["message"]
        [problem] = detail["problems"]
        assert problem["field"] == "tasks.t.notify.0.webhook_secret"
        assert problem["line"] == 6
        assert "'slack_url' does not exist in the secrets directory" in problem["message"]
        assert await store.get_dag("alerting") is None

        (tmp_path / "secrets").mkdir()
        (tmp_path / "secrets" / "slack_url").write_text("http://127.0.0.1:9/hook")
        applied = await client.post("/api/v1/dags?name=alerting.yaml", content=BAD, headers=headers)
        assert applied.status_code == 201, applied.text


async def test_the_split_api_does_not_check_secrets_it_cannot_see(
    store: Store, tmp_path: Path
) -> None:
    app = create_app(store, make_settings(tmp_path), auth=make_auth())  # as `leoflow api`
    transport = httpx.ASGITransport(app=app)
    headers = {**auth_header("admin"), "Content-Type": "application/yaml"}
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
        applied = await client.post("/api/v1/dags?name=alerting.yaml", content=BAD, headers=headers)
    assert applied.status_code == 201, applied.text
