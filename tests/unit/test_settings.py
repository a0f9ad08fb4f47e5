"""Settings: defaults, precedence (env > file > default), and errors naming the setting."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pydantic import ValidationError

from leoflow.settings import PASSTHROUGH_FIELDS, Settings, SettingsError, load_settings


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No LEOFLOW_* from the developer's shell, and a HOME of our own."""
    for name in list(os.environ):
        if name.startswith("LEOFLOW_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


def config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "leoflow-settings.yaml"
    path.write_text(text)
    return path


def settings_error(config_file: Path | None = None) -> str:
    with pytest.raises(SettingsError) as info:
        load_settings(config_file)
    return str(info.value)


# --- defaults


def test_defaults(tmp_path: Path) -> None:
    s = load_settings()
    assert s.home == tmp_path / "home" / ".leoflow"
    assert s.database_url is None
    assert s.parallelism == 32
    assert s.default_pool_slots == 128
    assert s.pools == {}
    assert s.executor == "agent"
    assert s.log_format == "text"
    assert s.catchup is False
    assert s.task_pod_passthrough == frozenset()
    assert s.image_pull_secrets == ()
    assert s.task_pod_security.run_as_non_root is True
    assert s.task_pod_security.fs_group == 65532
    assert s.leader_election.lease_duration == 15.0


def test_resolved_database_url_defaults_to_sqlite_under_home(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("LEOFLOW_HOME", str(tmp_path / "lf"))
    s = load_settings()
    assert s.home == tmp_path / "lf"
    assert s.resolved_database_url == f"sqlite+aiosqlite:///{tmp_path}/lf/leoflow.db"
    assert s.resolved_secrets_dir == tmp_path / "lf" / "secrets"
    assert s.logs_dir == tmp_path / "lf" / "logs"


def test_database_url_and_secrets_dir_when_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEOFLOW_DATABASE_URL", "postgresql+asyncpg://u@db/leoflow")
    monkeypatch.setenv("LEOFLOW_SECRETS_DIR", "/run/secrets/leoflow")
    s = load_settings()
    assert s.resolved_database_url == "postgresql+asyncpg://u@db/leoflow"
    assert s.resolved_secrets_dir == Path("/run/secrets/leoflow")


# --- precedence


def test_env_beats_file_beats_default(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    path = config(tmp_path, "parallelism: 3\ndefault_pool_slots: 9\n")
    from_file = load_settings(path)
    assert (from_file.parallelism, from_file.default_pool_slots, from_file.kube_qps) == (3, 9, 20.0)
    monkeypatch.setenv("LEOFLOW_PARALLELISM", "5")
    both = load_settings(path)
    assert (both.parallelism, both.default_pool_slots) == (5, 9)


def test_explicit_overrides_beat_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEOFLOW_PARALLELISM", "5")
    assert load_settings(None, parallelism=7).parallelism == 7


def test_nested_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEOFLOW_TASK_POD_SECURITY__RUN_AS_NON_ROOT", "false")
    s = load_settings()
    assert s.task_pod_security.run_as_non_root is False
    assert s.task_pod_security.fs_group == 65532


def test_nested_env_merges_with_nested_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = config(tmp_path, "task_pod_security:\n  fs_group: 7\n  run_as_non_root: true\n")
    monkeypatch.setenv("LEOFLOW_TASK_POD_SECURITY__RUN_AS_NON_ROOT", "false")
    s = load_settings(path)
    assert s.task_pod_security.run_as_non_root is False  # env wins
    assert s.task_pod_security.fs_group == 7  # the file's, not lost


def test_env_mapping_as_json(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEOFLOW_POOLS", '{"warehouse": 4, "api": 2}')
    assert load_settings().pools == {"warehouse": 4, "api": 2}


# --- comma lists


def test_passthrough_comma_list(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEOFLOW_TASK_POD_PASSTHROUGH", "tolerations,node_selector")
    assert load_settings().task_pod_passthrough == {"tolerations", "node_selector"}


def test_passthrough_comma_list_tolerates_spaces_and_empty_items(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LEOFLOW_TASK_POD_PASSTHROUGH", " tolerations , ,ephemeral_storage,")
    assert load_settings().task_pod_passthrough == {"tolerations", "ephemeral_storage"}
    monkeypatch.setenv("LEOFLOW_TASK_POD_PASSTHROUGH", "")
    assert load_settings().task_pod_passthrough == frozenset()


def test_passthrough_every_known_field(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEOFLOW_TASK_POD_PASSTHROUGH", ",".join(PASSTHROUGH_FIELDS))
    assert load_settings().task_pod_passthrough == set(PASSTHROUGH_FIELDS)


def test_passthrough_unknown_field_names_setting_and_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEOFLOW_TASK_POD_PASSTHROUGH", "tolerations,host_network")
    message = settings_error()
    assert "setting 'task_pod_passthrough' (env LEOFLOW_TASK_POD_PASSTHROUGH)" in message
    assert "host_network" in message
    assert "tolerations" in message.split("allowed:")[1]


def test_passthrough_list_in_file(tmp_path: Path) -> None:
    path = config(tmp_path, "task_pod_passthrough: [affinity, resource_claims]\n")
    assert load_settings(path).task_pod_passthrough == {"affinity", "resource_claims"}


@pytest.mark.parametrize("value", ["null", "5", "{a: b}", "[[tolerations]]"])
def test_passthrough_wrong_type_in_file_is_a_settings_error(tmp_path: Path, value: str) -> None:
    path = config(tmp_path, f"task_pod_passthrough: {value}\n")
    message = settings_error(path)
    assert "setting 'task_pod_passthrough'" in message
    assert str(path) in message


def test_image_pull_secrets_comma_list(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEOFLOW_IMAGE_PULL_SECRETS", "regcred, other")
    assert load_settings().image_pull_secrets == ("regcred", "other")


# --- bad values


@pytest.mark.parametrize(
    ("env", "value", "setting"),
    [
        ("LEOFLOW_PARALLELISM", "many", "parallelism"),
        ("LEOFLOW_PARALLELISM", "0", "parallelism"),
        ("LEOFLOW_DEFAULT_POOL_SLOTS", "-1", "default_pool_slots"),
        ("LEOFLOW_EXECUTOR", "nomad", "executor"),
        ("LEOFLOW_LOG_FORMAT", "xml", "log_format"),
        ("LEOFLOW_HEARTBEAT_TIMEOUT", "soon", "heartbeat_timeout"),
        ("LEOFLOW_TASK_POD_SECURITY__FS_GROUP", "root", "task_pod_security.fs_group"),
        ("LEOFLOW_LEADER_ELECTION__LEASE_DURATION", "-1", "leader_election.lease_duration"),
    ],
)
def test_bad_value_names_the_setting(
    monkeypatch: pytest.MonkeyPatch, env: str, value: str, setting: str
) -> None:
    monkeypatch.setenv(env, value)
    message = settings_error()
    assert message.startswith("invalid settings:")
    assert f"setting {setting!r} (env {env})" in message


def test_every_bad_setting_is_listed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEOFLOW_PARALLELISM", "0")
    monkeypatch.setenv("LEOFLOW_KUBE_QPS", "fast")
    message = settings_error()
    assert "'parallelism'" in message and "'kube_qps'" in message


def test_bad_value_in_file_names_setting_and_file(tmp_path: Path) -> None:
    path = config(tmp_path, "parallelism: -2\n")
    message = settings_error(path)
    assert f"(file {path})" in message
    assert "setting 'parallelism' (env LEOFLOW_PARALLELISM)" in message


def test_unknown_setting_in_file(tmp_path: Path) -> None:
    path = config(tmp_path, "paralellism: 4\n")
    message = settings_error(path)
    assert "setting 'paralellism'" in message
    assert str(path) in message


# --- the settings file itself


@pytest.mark.parametrize("text", ["- a\n- b\n", "just text\n", "42\n"])
def test_settings_file_not_a_mapping(tmp_path: Path, text: str) -> None:
    path = config(tmp_path, text)
    assert settings_error(path) == f"{path}: expected a mapping of setting names to values"


def test_settings_file_malformed_yaml(tmp_path: Path) -> None:
    path = config(tmp_path, "parallelism: [\n")
    assert settings_error(path).startswith(f"{path}: cannot read settings file")


def test_settings_file_missing(tmp_path: Path) -> None:
    path = tmp_path / "nope.yaml"
    assert settings_error(path).startswith(f"{path}: cannot read settings file")


def test_empty_settings_file_is_defaults(tmp_path: Path) -> None:
    assert load_settings(config(tmp_path, "")).parallelism == 32


def test_settings_are_frozen() -> None:
    s = load_settings()
    with pytest.raises(ValidationError):
        s.parallelism = 1  # type: ignore[misc]
    assert isinstance(s, Settings)


def test_task_user_must_exist() -> None:
    with pytest.raises(SettingsError, match=r"task_user.*no user 'no-such-user-here'"):
        load_settings(task_user="no-such-user-here")
    assert load_settings(task_user="nobody").task_user == "nobody"


def test_task_uids_is_a_range_and_excludes_task_user(monkeypatch: pytest.MonkeyPatch) -> None:
    for bad in ("61184", "a-b", "0-10", "20-10", "1-4294967295", "-5"):
        with pytest.raises(SettingsError, match=r"task_uids"):
            load_settings(task_uids=bad)
    with pytest.raises(SettingsError, match=r"set one"):
        load_settings(task_uids="61184-61439", task_user="nobody")
    monkeypatch.setenv("LEOFLOW_TASK_UIDS", "61184-61439")
    if os.geteuid() == 0:
        assert load_settings().task_uids == "61184-61439"
    else:  # only root can switch a task's uid
        with pytest.raises(SettingsError, match=r"needs Lite to run as root"):
            load_settings()


# --- retention


def test_retention_is_off_by_default_and_takes_a_duration(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    assert load_settings().retention is None
    monkeypatch.setenv("LEOFLOW_RETENTION", "30d")
    assert load_settings().retention == 30 * 86400
    monkeypatch.setenv("LEOFLOW_RETENTION", "off")
    assert load_settings().retention is None
    monkeypatch.delenv("LEOFLOW_RETENTION")
    assert load_settings(config(tmp_path, "retention: 3600\n")).retention == 3600


@pytest.mark.parametrize("value", ["soon", "0s", "-5"])
def test_a_bad_retention_names_the_setting(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("LEOFLOW_RETENTION", value)
    message = settings_error()
    assert "setting 'retention' (env LEOFLOW_RETENTION)" in message
    assert "duration" in message


@pytest.mark.parametrize(
    ("name", "value", "words"),
    [
        ("LEOFLOW_SCHEDULER_POLL_INTERVAL", "inf", "scheduler_poll_interval"),
        ("LEOFLOW_HEARTBEAT_TIMEOUT", "nan", "heartbeat_timeout"),
        ("LEOFLOW_PARALLELISM", "1" + "0" * 30, "parallelism"),
        ("LEOFLOW_DEFAULT_POOL_SLOTS", "2147483648", "default_pool_slots"),
        ("LEOFLOW_POOLS", '{"big": 99999999999}', "pools.big"),
        ("LEOFLOW_RETENTION", "9" * 400 + "d", "retention"),
    ],
)
def test_a_number_beyond_the_store_or_the_timers_is_a_settings_error(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, words: str
) -> None:
    monkeypatch.setenv(name, value)
    assert words in settings_error()


# --- lineage


def test_lineage_is_off_by_default_and_read_from_file_and_env(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    assert load_settings().lineage.transport == "none"
    path = config(tmp_path, "lineage:\n  transport: http\n  url: https://marquez:5000\n")
    monkeypatch.setenv("LEOFLOW_LINEAGE__API_KEY_ENV", "OL_KEY")
    lineage = load_settings(path).lineage
    assert (lineage.transport, lineage.url, lineage.api_key_env) == (
        "http", "https://marquez:5000", "OL_KEY",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("lineage: {transport: http}", "lineage.url: transport http needs"),
        ("lineage: {transport: http, url: 'marquez:5000'}", "http:// or https://"),
        ("lineage: {transport: file}", "lineage.file: transport file needs"),
        ("lineage: {transport: kafka}", "lineage.transport"),
        ("lineage: {transport: console, attempts: 0}", "lineage.attempts"),
        ("lineage: {transport: console, api_key_env: A, api_key_secret: b}", "not both"),
    ],
)
def test_bad_lineage_settings_name_the_field(tmp_path: Path, text: str, expected: str) -> None:
    assert expected in settings_error(config(tmp_path, text + "\n"))
