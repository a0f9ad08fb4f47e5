"""Agent protocol benchmarks; prints one JSON document.

    .venv/bin/python benchmarks/bench_agent.py [--seconds 5] [--out FILE]

Figures:
- heartbeat unary RPCs/s against one endpoint process pinned to one core
  (``os.sched_setaffinity``), with and without uvloop; the load comes from client
  processes pinned to the other core(s), and the endpoint's CPU use is reported
  so a client-bound figure shows as such;
- log ingest MB/s over Logs client streams, 1 stream and 50 concurrent streams
  (256 KiB chunks, as the agent sends them);
- agent process start to its first RPC arriving at the endpoint (median of runs);
- Lite's pool agent: 200 ``true`` tasks 8 at a time and a 50-task chain, next to
  the same commands spawned directly, whole-batch wall time.

The endpoint runs over a minimal in-memory backend (the scheduler serves
``session()`` from memory too), so these are the endpoint's and agent's own costs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

KEY = b"bench-signing-key-0123456789abcdef"


# -- a minimal in-memory backend -------------------------------------------------------


class MemoryBackend:
    def __init__(self, n_tasks: int = 0, argv: list[str] | None = None) -> None:
        from leoflow.scheduler.agent_endpoint import TaskSession

        self.sessions = {
            i: TaskSession(i, 1, "bench", "run", f"t{i}", ()) for i in range(1, n_tasks + 1)
        }
        self.tickets: dict[str, int] = {}
        self.argv = argv or ["true"]
        self.log_bytes = 0
        self.first_rpc_at: float | None = None
        self.done: dict[int, asyncio.Future[int]] = {}

    def ticket_for(self, ti_pk: int) -> str:
        from leoflow.domain.credentials import issue_ticket

        plain, digest = issue_ticket()
        self.tickets[digest] = ti_pk
        return plain

    async def consume_ticket(self, ticket_hash: str, now: float) -> Any:
        from leoflow.scheduler.agent_endpoint import TicketUse

        if self.first_rpc_at is None:
            self.first_rpc_at = time.perf_counter()
        ti_pk = self.tickets.pop(ticket_hash, None)
        return TicketUse("unknown", None, None) if ti_pk is None else TicketUse("ok", ti_pk, 1)

    async def session(self, ti_pk: int, try_number: int) -> Any:
        return self.sessions.get(ti_pk)

    async def start(self, s: Any, *, executor_ref: str) -> Any:
        from leoflow.scheduler.agent_endpoint import StartSpec

        return StartSpec(self.argv, {}, "", None)

    async def heartbeat(self, s: Any) -> bool:
        return False

    async def append_log(self, s: Any, data: bytes) -> None:
        self.log_bytes += len(data)

    async def log_size(self, s: Any) -> int:
        return 0

    async def complete(self, s: Any, outcome: Any) -> None:
        fut = self.done.get(s.ti_pk)
        if fut is not None and not fut.done():
            fut.set_result(outcome.exit_code)

    async def resolve_secret(self, s: Any, name: str) -> str | None:
        return None


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# -- heartbeat throughput ----------------------------------------------------------------


def _endpoint_process(cpu: int, use_uvloop: bool, n_tasks: int, ready: Any, stop: Any) -> None:
    os.sched_setaffinity(0, {cpu})  # before grpc starts any thread: they all inherit it
    if use_uvloop:
        import uvloop

        uvloop.install()

    from leoflow.scheduler.agent_endpoint import AgentEndpoint

    async def main() -> None:
        backend = MemoryBackend(n_tasks)
        endpoint = AgentEndpoint(backend, KEY)
        address = await endpoint.start("127.0.0.1:0")
        batch_server, batch_address = await _batch_server(backend)
        ready.send((address, batch_address))
        await asyncio.get_running_loop().run_in_executor(None, stop.recv)
        await endpoint.stop(0)
        await batch_server.stop(0)

    asyncio.run(main())


async def _batch_server(backend: Any) -> tuple[Any, str]:
    """The batching alternative: one unary call carrying many tasks' messages,
    answered by the same per-message code the Channel uses."""
    import grpc

    from leoflow.protocol.agent_v1 import pb
    from leoflow.scheduler.agent_ops import AgentOps

    ops = AgentOps(backend, KEY, session_ttl=86400, heartbeat=5.0)

    async def batch(raw: bytes, context: Any) -> bytes:
        replies = []
        for item in pb.AgentBatch.FromString(raw).items:
            reply = pb.ItemReply(id=item.id)
            reply.heartbeat.CopyFrom(await ops.heartbeat(item.session_token))
            replies.append(reply)
        return pb.ReplyBatch(replies=replies).SerializeToString()  # type: ignore[no-any-return]

    server = grpc.aio.server()
    handler = grpc.unary_unary_rpc_method_handler(batch)
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler("bench.Batch", {"Batch": handler}),)
    )
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return server, f"127.0.0.1:{port}"


def _tokens(ti_pks: list[int]) -> list[str]:
    from leoflow.domain.credentials import new_claims, sign_session

    return [sign_session(new_claims(i, 1, now=time.time(), ttl=86400), KEY) for i in ti_pks]


def _channel_client(
    cpus: set[int], address: str, ti_pks: list[int], seconds: float, per_message: int, out: Any
) -> None:
    """Heartbeats over one Channel stream, ``per_message`` items per AgentBatch, with
    enough batches in flight to keep the endpoint busy."""
    os.sched_setaffinity(0, cpus)
    import uvloop

    uvloop.install()
    import grpc

    from leoflow.protocol.agent_v1 import method_path, pb

    async def main() -> int:
        tokens = _tokens(ti_pks)
        async with grpc.aio.insecure_channel(address) as channel:
            call = channel.stream_stream(
                method_path("Channel"),
                request_serializer=lambda m: m.SerializeToString(),
                response_deserializer=pb.ReplyBatch.FromString,
            )(metadata=(("x-leoflow-agent", f"bench-{os.getpid()}"),))
            window = asyncio.Semaphore(max(2, 64 // per_message))
            ids = iter(range(1, 1 << 62))
            ok = 0
            outstanding = 0
            deadline = time.perf_counter() + seconds

            async def read() -> None:
                nonlocal ok, outstanding
                async for batch in call:
                    for reply in batch.replies:
                        ok += reply.code == 0
                        outstanding -= 1
                        if outstanding % per_message == 0:
                            window.release()

            reader = asyncio.create_task(read())
            n = 0
            while time.perf_counter() < deadline:
                await window.acquire()
                items = []
                for _ in range(per_message):
                    items.append(
                        pb.AgentItem(
                            id=next(ids),
                            session_token=tokens[n % len(tokens)],
                            heartbeat=pb.HeartbeatRequest(),
                        )
                    )
                    n += 1
                outstanding += per_message
                await call.write(pb.AgentBatch(items=items))
            await call.done_writing()
            await reader
            return ok

    out.send(asyncio.run(main()))


def _batch_client(
    cpus: set[int], address: str, ti_pks: list[int], seconds: float, per_call: int, out: Any
) -> None:
    """Heartbeats as unary calls each carrying ``per_call`` of them (a few in flight)."""
    os.sched_setaffinity(0, cpus)
    import uvloop

    uvloop.install()
    import grpc

    from leoflow.protocol.agent_v1 import pb

    async def main() -> int:
        tokens = _tokens(ti_pks)
        async with grpc.aio.insecure_channel(address) as channel:
            call = channel.unary_unary(
                "/bench.Batch/Batch",
                request_serializer=lambda m: m.SerializeToString(),
                response_deserializer=pb.ReplyBatch.FromString,
            )
            request = pb.AgentBatch(
                items=[
                    pb.AgentItem(id=i, session_token=tokens[i % len(tokens)], heartbeat={})
                    for i in range(per_call)
                ]
            )
            ok = 0
            deadline = time.perf_counter() + seconds

            async def worker() -> None:
                nonlocal ok
                while time.perf_counter() < deadline:
                    reply = await call(request)
                    ok += sum(r.code == 0 for r in reply.replies)

            await asyncio.gather(*(worker() for _ in range(max(2, 64 // per_call))))
            return ok

    out.send(asyncio.run(main()))


def _heartbeat_client(
    cpus: set[int], address: str, ti_pks: list[int], seconds: float, concurrency: int, out: Any
) -> None:
    os.sched_setaffinity(0, cpus)
    import uvloop

    uvloop.install()
    import grpc

    from leoflow.domain.credentials import new_claims, sign_session
    from leoflow.protocol.agent_v1 import method_path, pb

    async def main() -> int:
        async with grpc.aio.insecure_channel(address) as channel:
            call = channel.unary_unary(
                method_path("Heartbeat"),
                request_serializer=lambda m: m.SerializeToString(),
                response_deserializer=pb.HeartbeatResponse.FromString,
                _registered_method=True,
            )
            request = pb.HeartbeatRequest()
            tokens = [
                (
                    (
                        "authorization",
                        "Bearer " + sign_session(new_claims(i, 1, now=time.time(), ttl=86400), KEY),
                    ),
                )
                for i in ti_pks
            ]
            await call(request, metadata=tokens[0])  # warm the connection
            count = 0
            deadline = time.perf_counter() + seconds

            async def worker(n: int) -> None:
                nonlocal count
                md = tokens[n % len(tokens)]
                while time.perf_counter() < deadline:
                    await call(request, metadata=md)
                    count += 1

            await asyncio.gather(*(worker(n) for n in range(concurrency)))
            return count

    out.send(asyncio.run(main()))


def bench_heartbeats(use_uvloop: bool, seconds: float, mode: str = "unary") -> dict[str, Any]:
    """``mode``: unary (one call a heartbeat), stream (one Channel item a message),
    stream_batched (100 items a Channel message), batch (100 a unary call)."""
    cpus = sorted(os.sched_getaffinity(0))
    server_cpu, client_cpus = cpus[0], set(cpus[1:]) or {cpus[0]}
    n_clients = max(1, len(client_cpus))
    ctx = mp.get_context("spawn")
    ready_r, ready_w = ctx.Pipe(False)
    stop_r, stop_w = ctx.Pipe(False)
    server = ctx.Process(
        target=_endpoint_process, args=(server_cpu, use_uvloop, 1000, ready_w, stop_r)
    )
    server.start()
    address, batch_address = ready_r.recv()
    assert server.pid is not None
    clients = []
    pipes = []
    for c in range(n_clients):
        r, w = ctx.Pipe(False)
        ti_pks = list(range(1 + c * 100, 101 + c * 100))  # 100 task instances per client
        target: Any
        if mode == "unary":
            target, args = _heartbeat_client, (client_cpus, address, ti_pks, seconds, 64, w)
        elif mode in ("stream", "stream_batched"):
            per = 1 if mode == "stream" else 100
            target, args = _channel_client, (client_cpus, address, ti_pks, seconds, per, w)
        else:
            target, args = _batch_client, (client_cpus, batch_address, ti_pks, seconds, 100, w)
        clients.append(ctx.Process(target=target, args=args))
        pipes.append(r)
    time.sleep(0.5)
    cpu0, t0 = _cpu_seconds(server.pid), time.perf_counter()
    for p in clients:
        p.start()
    total = sum(r.recv() for r in pipes)
    elapsed = time.perf_counter() - t0
    cpu1 = _cpu_seconds(server.pid)
    for p in clients:
        p.join()
    stop_w.send(None)
    server.join(10)
    # Client start-up is inside `elapsed`; rate over the measured window only.
    return {
        "mode": mode,
        "heartbeats": total,
        "heartbeats_per_s": round(total / seconds),
        "endpoint_cpu_utilisation": round((cpu1 - cpu0) / elapsed, 2),
        "endpoint_cpu": server_cpu,
        "client_cpus": sorted(client_cpus),
    }


def bench_heartbeat_modes(seconds: float, repeat: int) -> dict[str, Any]:
    """Each transport ``repeat`` times, interleaved so load drift hits all alike."""
    modes = ("unary", "stream", "stream_batched", "batch")
    runs: dict[str, list[dict[str, Any]]] = {m: [] for m in modes}
    for _ in range(repeat):
        for mode in modes:
            runs[mode].append(bench_heartbeats(True, seconds, mode))
    result: dict[str, Any] = {}
    for mode, samples in runs.items():
        rates = sorted(r["heartbeats_per_s"] for r in samples)
        result[mode] = {
            "heartbeats_per_s_median": statistics.median(rates),
            "heartbeats_per_s_runs": rates,
            "endpoint_cpu_utilisation_median": statistics.median(
                r["endpoint_cpu_utilisation"] for r in samples
            ),
        }
    result["note"] = (
        "endpoint pinned to one core (uvloop), 100 tasks per client process on the other; "
        "stream_batched = what the agent sends when 100 tasks beat in one interval"
    )
    return result


# -- log ingest --------------------------------------------------------------------------


async def bench_logs(streams: int, mb_per_stream: int) -> dict[str, Any]:
    import grpc

    from leoflow.domain.credentials import new_claims, sign_session
    from leoflow.protocol.agent_v1 import method_path, pb
    from leoflow.scheduler.agent_endpoint import AgentEndpoint

    backend = MemoryBackend(streams)
    endpoint = AgentEndpoint(backend, KEY)
    address = await endpoint.start("127.0.0.1:0")
    chunk = pb.LogChunk(stream=pb.LogChunk.STDOUT, data=os.urandom(256 * 1024))
    n_chunks = mb_per_stream * 4

    async def one(i: int) -> None:
        token = sign_session(new_claims(i, 1, now=time.time(), ttl=86400), KEY)
        async with grpc.aio.insecure_channel(address) as channel:  # one agent, one channel
            logs = channel.stream_unary(
                method_path("Logs"),
                request_serializer=lambda m: m.SerializeToString(),
                response_deserializer=pb.LogsAck.FromString,
            )
            call = logs(metadata=(("authorization", f"Bearer {token}"),))
            for _ in range(n_chunks):
                await call.write(chunk)
            await call.done_writing()
            await call

    t0 = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(1, streams + 1)))
    elapsed = time.perf_counter() - t0
    await endpoint.stop(0)
    assert backend.log_bytes == streams * n_chunks * 256 * 1024
    mb = backend.log_bytes / 1e6
    return {
        "streams": streams,
        "mb": round(mb, 1),
        "seconds": round(elapsed, 3),
        "mb_per_s": round(mb / elapsed, 1),
        "note": "endpoint and senders share this process and loop",
    }


# -- agent start to first RPC ----------------------------------------------------------


async def bench_agent_start(runs: int) -> dict[str, Any]:
    from leoflow.scheduler.agent_endpoint import AgentEndpoint

    samples = []
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEOFLOW_")}
    env["PYTHONPATH"] = str(REPO)
    for _ in range(runs):
        backend = MemoryBackend(0)
        endpoint = AgentEndpoint(backend, KEY)
        address = await endpoint.start("127.0.0.1:0")
        env.update(LEOFLOW_AGENT_ENDPOINT=address, LEOFLOW_AGENT_TICKET="bench-unknown")
        t0 = time.perf_counter()
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "leoflow.agent",
            env=env,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        await proc.wait()
        assert backend.first_rpc_at is not None
        samples.append(backend.first_rpc_at - t0)
        await endpoint.stop(0)
    ms = sorted(s * 1000 for s in samples)
    return {
        "runs": runs,
        "median_ms": round(statistics.median(ms), 1),
        "min_ms": round(ms[0], 1),
        "max_ms": round(ms[-1], 1),
    }


# -- Lite's pool agent -------------------------------------------------------------------


async def bench_pool(n_tasks: int, parallel: int) -> dict[str, Any]:
    from leoflow.scheduler.agent_endpoint import AgentEndpoint

    backend = MemoryBackend(n_tasks)
    endpoint = AgentEndpoint(backend, KEY)
    address = await endpoint.start("127.0.0.1:0")
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEOFLOW_")}
    env.update(PYTHONPATH=str(REPO), LEOFLOW_AGENT_ENDPOINT=address)
    agent = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "leoflow.agent",
        "--pool",
        env=env,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.DEVNULL,
    )
    assert agent.stdin is not None
    stdin = agent.stdin
    loop = asyncio.get_running_loop()
    await asyncio.sleep(0.5)  # the warm pool is up before the first task, as in Lite

    async def via_agent(i: int) -> None:
        backend.done[i] = loop.create_future()
        op = {"op": "run", "key": f"{i}:1", "ticket": backend.ticket_for(i)}
        stdin.write(json.dumps(op).encode() + b"\n")
        assert await backend.done[i] == 0

    async def direct(i: int) -> None:
        proc = await asyncio.create_subprocess_exec("true")
        assert await proc.wait() == 0

    async def batch(run_one: Any, ids: list[int], width: int) -> float:
        sem = asyncio.Semaphore(width)

        async def guarded(i: int) -> None:
            async with sem:
                await run_one(i)

        t0 = time.perf_counter()
        await asyncio.gather(*(guarded(i) for i in ids))
        return time.perf_counter() - t0

    result: dict[str, Any] = {}
    fan = list(range(1, n_tasks + 1))
    result["fanout_tasks"] = n_tasks
    result["fanout_parallel"] = parallel
    result["fanout_agent_s"] = round(await batch(via_agent, fan, parallel), 3)
    result["fanout_direct_s"] = round(await batch(direct, fan, parallel), 3)
    chain = list(range(1, 51))
    backend.sessions.update({i: backend.sessions[i] for i in chain})
    result["chain_tasks"] = 50
    result["chain_agent_s"] = round(await batch(via_agent, chain, 1), 3)
    result["chain_direct_s"] = round(await batch(direct, chain, 1), 3)
    result["agent_overhead_per_chained_task_ms"] = round(
        (result["chain_agent_s"] - result["chain_direct_s"]) / 50 * 1000, 2
    )
    stdin.close()
    await agent.wait()
    await endpoint.stop(0)
    result["note"] = (
        "endpoint + in-memory backend in the bench process; no store, no "
        "scheduler loop: the agent path's own cost"
    )
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--out")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--only", choices=("heartbeats", "pool"), help="one section: transports, or the pool"
    )
    args = parser.parse_args()
    import grpc

    if args.only:
        section = (
            bench_heartbeat_modes(args.seconds, args.repeat)
            if args.only == "heartbeats"
            else asyncio.run(bench_pool(200, 8))
        )
        text = json.dumps({"grpcio": grpc.__version__, args.only: section}, indent=2)
        print(text)
        if args.out:
            Path(args.out).write_text(text + "\n")
        return

    result: dict[str, Any] = {
        "python": sys.version.split()[0],
        "grpcio": grpc.__version__,
        "cpus": len(os.sched_getaffinity(0)),
        "heartbeat_default_loop": bench_heartbeats(False, args.seconds),
        "heartbeat_transports": bench_heartbeat_modes(args.seconds, args.repeat),
        "logs_1_stream": asyncio.run(bench_logs(1, 200)),
        "logs_50_streams": asyncio.run(bench_logs(50, 8)),
        "agent_start_to_first_rpc": asyncio.run(bench_agent_start(10)),
        "pool": asyncio.run(bench_pool(200, 8)),
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
