"""Run an HTTP client (raw httpx, or the leoflow CLI) as another local user.

``python -m tests.support.as_user UID GID probe BASE`` or ``... UID GID COMMAND...``.
It starts as root, imports everything its path needs (by one call against a port
nobody listens on), then becomes the user for good (setgroups, setgid, setuid) before
it connects: this interpreter may live where that user cannot read (pyenv under
/root), so it could not be started as that user. Probe prints the status codes of a
GET of the DAGs, a POST of a DAG and a trigger.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys

import httpx

from leoflow.commands import main as leoflow

_DAG = "dag_id: stolen\ntasks:\n  grab: {command: 'id'}\n"


def probe(base: str) -> list[int]:
    return [
        httpx.get(base + "/api/v1/dags").status_code,
        httpx.post(
            base + "/api/v1/dags", content=_DAG, headers={"Content-Type": "application/yaml"}
        ).status_code,
        httpx.post(base + "/api/v1/dags/stolen/runs", json={}).status_code,
    ]


def run(argv: list[str]) -> int:
    uid, gid, rest = int(argv[0]), int(argv[1]), argv[2:]
    dead = ["--server", "http://127.0.0.1:9"]
    warm = ["runs"] if rest[0] == "probe" else rest[: rest.index("--server")]
    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
        leoflow.main([*warm, *dead])
        with contextlib.suppress(httpx.HTTPError):
            probe("http://127.0.0.1:9")
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)
    assert os.getuid() == os.geteuid() == uid
    if rest[0] == "probe":
        print(" ".join(map(str, probe(rest[1]))))
        return 0
    return leoflow.main(rest)


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
