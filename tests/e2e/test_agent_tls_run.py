"""`leoflow run` with the agent endpoint on TLS: the warm agent verifies it with the CA."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.conftest import Leoflow
from tests.support.certs import make_ca, make_server_cert

DAG = """
dag_id: over_tls
tasks:
  hello: {command: "echo hello over tls"}
"""


def test_a_run_whose_agents_dial_over_tls(
    leoflow: Leoflow, env: dict[str, str], tmp_path: Path
) -> None:
    ca = make_ca(tmp_path / "certs", "ca")
    server = make_server_cert(tmp_path / "certs", ca, "endpoint")
    dag = tmp_path / "dag.yaml"
    dag.write_text(DAG)
    env.update(
        LEOFLOW_AGENT_TLS_CERT_FILE=str(server.cert),
        LEOFLOW_AGENT_TLS_KEY_FILE=str(server.key),
        LEOFLOW_AGENT_TLS_CA_FILE=str(ca.cert),
    )
    done = leoflow("run", str(dag), "--executor", "agent")
    assert done.returncode == 0, done.stderr + done.stdout
    assert "over_tls: success" in done.stdout
    logs = leoflow("logs", "over_tls", done.stdout.split("run ")[-1].split()[0], "hello")
    assert "hello over tls" in logs.stdout, logs.stdout + logs.stderr

    # The same endpoint, and agents that trust another CA: nothing runs.
    other = make_ca(tmp_path / "certs", "other")
    env.update(LEOFLOW_AGENT_TLS_CA_FILE=str(other.cert), LEOFLOW_AGENT_CONNECT_TIMEOUT="1")
    refused = leoflow("run", str(dag), "--executor", "agent", timeout=120)
    assert refused.returncode == 1, refused.stderr + refused.stdout
    assert "CERTIFICATE_VERIFY_FAILED" in refused.stderr, refused.stderr
    assert "hello  failed" in refused.stdout
