"""A secret printed by a real command through the real agent, in the encodings a
masker that looks for literal forms misses — wrapped base64 (the ``base64`` CLI at 76
columns, openssl's 64, CRLF), encoded twice, URL-encoded by other encoders and in
lower case, shell-quoted, hex a byte at a time — and cut across the agent's pipe
reads: the stored log shows ``***`` and no piece of any of them."""

from __future__ import annotations

import base64
import json
import sys
import urllib.parse
from typing import Any

from leoflow.domain.states import RunState
from tests.integration.scheduler.test_task_isolation import runtime

__all__ = ["runtime"]  # the fixture: Lite's runtime on a private home

PY = json.dumps(sys.executable)
# A space, / + & ' ! ~ ( ) (URL encoders differ on each), a quote and a backslash
# (JSON, shell), non-ASCII (\u00e9: %C3%A9, \u00e9).
SECRET = "K3y\"&\\/p a+ss'w\u00e9!~(x)"

PRINT = r"""
import base64, json, os, shlex, subprocess, sys, urllib.parse as up
v = os.environ['LEOFLOW_SECRET_API_KEY']; b = v.encode()
def say(tag, s):
    print(tag, s, flush=True)
def wrap(s, width, brk='\n'):
    return ''.join(s[i:i + width] + brk for i in range(0, len(s), width))
def lower(s):  # the escapes' hex digits in lower case, the rest as it is
    import re
    return re.sub('%[0-9A-F]{2}', lambda m: m.group().lower(), s)
def cut_writes(tag, s):  # two writes flushed apart, cut at every place
    for cut in range(1, len(s)):
        sys.stdout.write(tag + ' ' + s[:cut]); sys.stdout.flush()
        sys.stdout.write(s[cut:] + '\n'); sys.stdout.flush()
# 1. base64 wrapped at a column, the value inside a longer stream at each alignment
for before in (40, 41, 42):
    blob = bytes(range(1, before + 1)) + b + b'\x02' * 30
    sys.stdout.write('b64-76:\n' + base64.encodebytes(blob).decode()); sys.stdout.flush()
    sys.stdout.write('b64-64:\n' + wrap(base64.b64encode(blob).decode(), 64, '\r\n'))
    sys.stdout.flush()
    subprocess.run(['base64'], input=b'y' * before + b, check=True)  # the CLI itself
sys.stdout.write('b64-76:\n'); sys.stdout.flush()
cut_writes('b64-cut', wrap(base64.b64encode(b'z' * 70 + b).decode(), 76).rstrip())
# 2. encoded twice
say('twice', up.quote(up.quote(v, safe=''), safe=''))
say('twice', up.quote_plus(up.quote_plus(v)))
say('twice', base64.b64encode(up.quote(v).encode()).decode())
say('twice', up.quote(json.dumps(v)))
say('twice', up.quote(base64.b64encode(b).decode(), safe=''))
say('twice', base64.b64encode(base64.b64encode(b)).decode())
say('twice', base64.b64encode(json.dumps(v).encode()).decode())
jwt = base64.urlsafe_b64encode(json.dumps({'sub': 'me', 'pw': v}).encode()).decode()
say('jwt', 'eyJhbGciOiJub25lIn0.' + jwt.rstrip('=') + '.')
# 3. percent-encoding in lower and mixed case, other encoders' safe sets, + for space
say('pct', lower(up.quote(v, safe='')))
say('pct', lower(up.quote_plus(v)))
say('pct', ''.join(c.lower() if i % 3 else c for i, c in enumerate(up.quote(v, safe=''))))
say('pct', up.quote(v, safe="!*'()~"))  # encodeURIComponent
say('pct', up.quote(v, safe="/:@!$&'()*+,;="))  # encodeURI
cut_writes('pct-cut', lower(up.quote_plus(v)))
# 4. siblings: shell quoting, hex a byte at a time, escapes in upper case, CRLF
say('sh', shlex.quote(v))
subprocess.run(['bash', '-c', 'printf "sh %q\\n" "$1"; echo "sh ${1@Q}"', '_', v], check=True)
say('hex', ' '.join('%02x' % c for c in b))
say('hex', ':'.join('%02X' % c for c in b))
say('json', json.dumps(v).replace('\\u00e9', '\\u00E9'))
say('json', json.dumps({'url': up.quote(v)}).replace('/', '\\/'))
say('more', base64.b32encode(b).decode())
say('more', base64.b64encode(b).hex())  # base64 | xxd -p
say('more', ascii(v))
say('more', v.replace('&', '&amp;').replace("'", '&#39;').replace('"', '&#34;'))  # Jinja
sys.stdout.write('more '); sys.stdout.flush()
subprocess.run(['base32'], input=b, check=True)  # coreutils, wrapped at 76
sys.stdout.write('crlf ' + v + '\r\n' + 'crlf ' + v[:9] + '\r\n' + v[9:] + '\r\n')
sys.stdout.flush()
"""

DAG = f"""
dag_id: encodings
tasks:
  leak:
    secrets: [api_key]
    command: [{PY}, "-c", {json.dumps(PRINT)}]
"""


def _secret_chars(encoded: bytes, start: int, size: int) -> bytes:
    """The base64 characters made of bytes [start, start + size) of the input alone."""
    return encoded[-(-8 * start // 6) : 8 * (start + size) // 6]


def _tells() -> set[bytes]:
    """Pieces of the secret's encodings that show it (written out here on purpose,
    not the masker's): 8 characters every 3 of each."""
    raw = SECRET.encode()
    whole = [raw, raw.hex().encode(), base64.b64encode(raw), json.dumps(SECRET).encode()]
    whole += [base64.b32encode(raw), base64.b64encode(raw).hex().encode(), ascii(SECRET).encode()]
    for start in (40, 41, 42, 70):
        stream = b"\x00" * start + raw
        whole.append(_secret_chars(base64.b64encode(stream), start, len(raw)))
    return {w[i : i + 8] for w in whole for i in range(0, len(w) - 7, 3)}


async def test_a_secret_in_encodings_a_literal_masker_misses_is_masked(runtime: Any) -> None:
    rt = await runtime(DAG)
    (rt.settings.resolved_secrets_dir / "api_key").write_text(SECRET)
    row = await rt.scheduler.trigger("encodings")
    final = await rt.scheduler.wait_run(row.pk)
    (ti,) = await rt.store.list_task_instances(run_pk=row.pk)
    log = await rt.store.read_log(ti.pk, 1)
    assert final.state is RunState.SUCCESS, log.decode(errors="replace")
    flat = log.replace(b"\r", b"").replace(b"\n", b"")
    leaked = sorted(t for t in _tells() if t in flat)
    assert leaked == [], log.decode(errors="replace")
    lines = log.splitlines()
    # Each printed form became the mask, the words around it kept.
    counts = ((b"twice", 7), (b"pct", 5), (b"sh", 3), (b"hex", 2), (b"json", 2), (b"more", 5))
    for tag, count in counts:
        masked = [line for line in lines if line.startswith(tag + b" ") and b"***" in line]
        assert len(masked) == count, (tag, lines)
    # Cut across two writes at every place: masked whole each time.
    assert log.count(b"pct-cut ***\n") == len(urllib.parse.quote_plus(SECRET)) - 1
    assert b"crlf ***\r\n" in log and b"jwt eyJhbGciOiJub25lIn0." in log
