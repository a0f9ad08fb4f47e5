"""A fork-to-exec while other threads are inside grpc: with grpc's fork handlers on,
about a third of such children died (SIGSEGV/SIGABRT) before their exec, which is how
a ``pg_ctl stop`` run from a thread of a process serving the agent endpoint crashed.
Importing ``leoflow`` turns those handlers off before grpc is imported."""

from __future__ import annotations

import os
import subprocess
import sys

SCRIPT = """
import asyncio, os, subprocess, sys
import leoflow  # before grpc, as every Leoflow entry point imports it
import grpc
from grpc import aio

async def echo(request, context):
    return request

async def main():
    server = aio.server()
    port = server.add_insecure_port("127.0.0.1:0")
    handlers = {"Echo": grpc.unary_unary_rpc_method_handler(echo)}
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("e.E", handlers)])
    await server.start()
    channel = aio.insecure_channel(f"127.0.0.1:{port}")
    call = channel.unary_unary("/e.E/Echo")
    done = asyncio.Event()

    async def hammer():
        while not done.is_set():
            await call(b"x")

    callers = [asyncio.create_task(hammer()) for _ in range(8)]

    def forks():
        # user= makes subprocess fork() rather than vfork(), so atfork handlers run.
        codes = [subprocess.run(["/bin/true"], user=os.getuid()).returncode
                 for _ in range(150)]
        return [code for code in codes if code != 0]

    died = await asyncio.to_thread(forks)
    done.set()
    await asyncio.gather(*callers)
    await channel.close()
    await server.stop(None)
    print("died", died)

asyncio.run(main())
"""


def test_forks_beside_busy_grpc_threads_all_reach_exec() -> None:
    env = {k: v for k, v in os.environ.items() if k != "GRPC_ENABLE_FORK_SUPPORT"}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert "died []" in done.stdout, done.stdout + done.stderr
