"""The environment's settings (leoflow.settings_env): the rules pydantic-settings applied."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from leoflow.settings import SettingsError, load_settings


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in list(os.environ):
        if name.upper().startswith("LEOFLOW_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


def test_names_are_case_insensitive(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("leoflow_Parallelism", "3")
    assert load_settings().parallelism == 3


def test_a_variable_naming_no_setting_is_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEOFLOW_NO_SUCH_SETTING", "1")
    monkeypatch.setenv("LEOFLOW_AGENT_PARENT_PID", "42")  # the agent's, not a setting
    assert load_settings().parallelism == 32


def test_malformed_json_names_the_setting_and_its_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LEOFLOW_POOLS", "warehouse=4")
    with pytest.raises(SettingsError) as info:
        load_settings()
    assert "'pools'" in str(info.value) and "LEOFLOW_POOLS" in str(info.value)
    assert "expected JSON" in str(info.value)


def test_a_nested_variable_beats_the_json_of_its_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEOFLOW_LEADER_ELECTION", '{"lease_name": "a", "retry_period": 3}')
    monkeypatch.setenv("LEOFLOW_LEADER_ELECTION__LEASE_NAME", "b")
    election = load_settings().leader_election
    assert (election.lease_name, election.retry_period) == ("b", 3.0)


def test_a_nested_mapping_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEOFLOW_POOLS__WAREHOUSE", "4")
    assert load_settings().pools == {"warehouse": 4}


def test_a_bad_nested_value_names_the_nested_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEOFLOW_LEADER_ELECTION__RETRY_PERIOD", "soon")
    with pytest.raises(SettingsError) as info:
        load_settings()
    assert "LEOFLOW_LEADER_ELECTION__RETRY_PERIOD" in str(info.value)


def test_a_comma_list_is_not_read_as_json(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEOFLOW_API_ALLOWED_HOSTS", "a.example, b.example")
    assert load_settings().api_allowed_hosts == ("a.example", "b.example")


def test_an_optional_path_is_a_string_not_json(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEOFLOW_SECRETS_DIR", "[not json]")
    assert load_settings().secrets_dir == Path("[not json]")
