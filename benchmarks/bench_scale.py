"""Lite at scale: one wide fan-out DAG, and many runs of a small DAG, in one process.

    python benchmarks/bench_scale.py [--fanout 100,1000,10000] [--runs 1000] [--reps 5]
        [--executor agent] [--parallelism N]

Each case runs in a fresh child process (so its peak RSS is its own) that opens the
Lite runtime (``open_runtime`` — store, scheduler, executor, agent endpoint; the same
wiring ``leoflow run`` uses, minus the terminal progress), registers the DAG,
triggers the runs and waits until every one is terminal. Tasks are ``true``.

- ``fanout_N``: one run of a DAG of N independent tasks (max_active_tasks N).
- ``runs_R_x10``: R runs of a 10-task DAG (max_active_runs R), triggered at once.

Reported per case, median over ``reps`` children: wall seconds from trigger to the
last run terminal, ``ms_per_task``, the control-plane process's CPU time per task
(``cpu_ms_per_task``: user+sys of the scheduler process only, not the agent or the
tasks), and peak RSS of that process; ``agent_cpu_ms_per_task`` is the rest: the
agent's CPU over its life and its commands' (``true``'s own spawn, exec and exit is
~0.9 ms a task here); ``agent_own_cpu_ms_per_task`` the agent's alone (from /proc,
when the last run ended). The fan-out sizes make the per-task cost
curve. ``--profile FILE`` runs the largest fan-out once under cProfile instead.

``--user`` measures as a user runs it instead: whole ``leoflow run DAG`` processes
(start-up, loading the file, the run, the final table), a fan-out of ``true`` tasks
per size in ``--user-sizes``, in these cases, interleaved rep by rep so the
machine's load hits all alike:

- ``unlimited``: max_active_tasks N and parallelism N (the cases above);
- ``parallelism_32``: max_active_tasks N at the default parallelism (32);
- ``max_32`` / ``max_8``: the DAG's max_active_tasks 32 / 8, default parallelism.

Per case: the median wall seconds of the process, ms per task, the CPU of the
whole process tree (Lite, the agent and the tasks) per task, the peak RSS of its
largest process, and the median of each rep's ratio to ``unlimited``.

And the floor, in each rep: a bare Python loop that posix_spawns the same number of
``true`` 32 at a time and waits for each, plus a process that only imports the stack
(uvloop, grpc, SQLAlchemy, PyYAML, protobuf, pydantic). No orchestrator that starts a
process per task on this machine can go under it; ``wall_ratio_to_floor`` and
``over_floor_ms_per_task`` say what Leoflow adds to it, whatever the machine's speed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def fanout_yaml(n: int, max_active: int | None = None) -> str:
    tasks = "\n".join(f'  t{i:05d}:\n    command: ["true"]' for i in range(n))
    return f"dag_id: fanout\nmax_active_tasks: {max_active or n}\ntasks:\n{tasks}\n"


def small_yaml(runs: int) -> str:
    lines = []
    for i in range(10):
        lines.append(f'  t{i}:\n    command: ["true"]')
        if i >= 2:  # a small diamond-ish shape: two roots, the rest fan in/out
            lines.append(f"    depends_on: [t{i % 2}]")
    return f"dag_id: small\nmax_active_runs: {runs}\ntasks:\n" + "\n".join(lines) + "\n"


async def _drive(dag_file: Path, runs: int, executor: str) -> dict[str, Any]:
    from leoflow.dagfile.loader import LoadOptions, load_dag_file
    from leoflow.domain.states import RUN_TERMINAL
    from leoflow.runtime.assembly import open_runtime
    from leoflow.runtime.dagfolder import record_dag
    from leoflow.settings import load_settings

    settings = load_settings()
    loaded = load_dag_file(dag_file, LoadOptions())
    runtime = await open_runtime(settings, executor, solo=True)
    try:
        dag_id = loaded.spec.dag_id
        await record_dag(runtime.store, loaded)  # trigger() learns it from the store
        del loaded  # as leoflow run's run_dag does
        await runtime.scheduler.start()
        cpu0 = time.process_time()
        t0 = time.perf_counter()
        rows = [await runtime.scheduler.trigger(dag_id) for _ in range(runs)]
        finals = [await runtime.scheduler.wait_run(row.pk) for row in rows]
        wall = time.perf_counter() - t0
        cpu = time.process_time() - cpu0
        agent_own = _own_cpu_s(getattr(runtime.executor, "_process", None))
    finally:
        await runtime.close()
    states = sorted({f.state.value for f in finals})
    assert all(f.state in RUN_TERMINAL for f in finals)
    return {"wall_s": wall, "cpu_s": cpu, "states": states, "agent_own_cpu_s": agent_own}


def _own_cpu_s(process: Any) -> float | None:
    """A live child's own CPU time so far (user + system, not its children's: for the
    pool agent, without the commands it ran), from /proc; None where there is none."""
    try:
        with open(f"/proc/{process.pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except (AttributeError, OSError, IndexError):
        return None
    # After the command's ")": state is field 3, utime and stime are fields 14 and 15.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def child(
    kind: str, n: int, executor: str, parallelism: int, profile: str | None, loop: str
) -> None:
    # The product's loop (uvloop, as every `leoflow` command runs), or stock asyncio.
    from leoflow.commands.common import run_async

    run = run_async if loop == "uvloop" else asyncio.run
    with tempfile.TemporaryDirectory(prefix="leoflow-scale-") as tmp:
        home = Path(tmp)
        os.environ["LEOFLOW_HOME"] = str(home / "home")
        if parallelism:
            os.environ["LEOFLOW_PARALLELISM"] = str(parallelism)
        dag = home / "dag.yaml"
        if kind == "fanout":
            dag.write_text(fanout_yaml(n))
            runs, tasks = 1, n
        else:
            dag.write_text(small_yaml(n))
            runs, tasks = n, 10 * n
        if profile:
            import cProfile

            prof = cProfile.Profile()
            prof.enable()
            out = run(_drive(dag, runs, executor))
            prof.disable()
            prof.dump_stats(profile)
        else:
            out = run(_drive(dag, runs, executor))
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)  # the agent and its tasks
    out["agent_cpu_s"] = kids.ru_utime + kids.ru_stime
    print(json.dumps({**out, "tasks": tasks, "runs": runs, "peak_rss_mb": rss_mb}))


def run_child(kind: str, n: int, args: argparse.Namespace, profile: str | None = None) -> Any:
    cmd = [sys.executable, __file__, "--child", f"{kind}:{n}", "--executor", args.executor]
    cmd += ["--parallelism", str(args.parallelism), "--loop", args.loop]
    if profile:
        cmd += ["--profile", profile]
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEOFLOW_")}
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{kind}:{n} failed:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def summarize(name: str, outs: list[dict[str, Any]]) -> dict[str, Any]:
    tasks = outs[0]["tasks"]
    wall = statistics.median(o["wall_s"] for o in outs)
    cpu = statistics.median(o["cpu_s"] for o in outs)
    return {
        "case": name,
        "tasks": tasks,
        "runs": outs[0]["runs"],
        "reps": len(outs),
        "wall_s": round(wall, 3),
        "wall_s_min_max": [
            round(min(o["wall_s"] for o in outs), 3),
            round(max(o["wall_s"] for o in outs), 3),
        ],
        "ms_per_task": round(wall / tasks * 1000, 3),
        "cpu_s": round(cpu, 3),
        "cpu_ms_per_task": round(cpu / tasks * 1000, 3),
        "peak_rss_mb": round(statistics.median(o["peak_rss_mb"] for o in outs), 1),
        # The agent, its commands and the child's other children, whole lifetime.
        "agent_cpu_ms_per_task": round(
            statistics.median(o["agent_cpu_s"] for o in outs) / tasks * 1000, 3
        ),
        # The pool agent's own CPU until the last run ended, without its commands.
        "agent_own_cpu_ms_per_task": (
            None
            if any(o["agent_own_cpu_s"] is None for o in outs)
            else round(statistics.median(o["agent_own_cpu_s"] for o in outs) / tasks * 1000, 3)
        ),
        "states": sorted({s for o in outs for s in o["states"]}),
    }


USER_CASES = {
    # name: (max_active_tasks, parallelism); None: the fan-out's size, 0: the default
    "unlimited": (None, None),
    "parallelism_32": (None, 0),
    "max_32": (32, 0),
    "max_8": (8, 0),
}


def user_run(dag: Path, home: Path, parallelism: int) -> dict[str, float]:
    """One whole ``leoflow run`` process: wall time, its tree's CPU, its peak RSS."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEOFLOW_")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # an installed Leoflow has its .pyc files
    env["LEOFLOW_HOME"] = str(home)
    if parallelism:
        env["LEOFLOW_PARALLELISM"] = str(parallelism)
    cmd = [sys.executable, "-m", "leoflow", "run", str(dag), "--executor", "agent"]
    started = time.perf_counter()
    proc = subprocess.Popen(
        cmd, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"leoflow run {dag} failed:\n{err.decode()[-3000:]}")
    return {
        "wall_s": wall,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "peak_rss_mb": usage.ru_maxrss / 1024,
    }


# The least any orchestrator that starts each task as a process pays here: a bare
# loop that posix_spawns ``true`` with N at a time and waits for each (no pipes, no
# store, no agent), and the imports of the stack Lite is built on.
_SPAWN_FLOOR = """
import os, sys
n, at_once = int(sys.argv[1]), int(sys.argv[2])
started = running = 0
for _ in range(n):
    while running < at_once and started < n:
        os.posix_spawn("/bin/true", ["true"], os.environ)
        started += 1
        running += 1
    os.wait()
    running -= 1
"""
_IMPORT_FLOOR = "import uvloop, grpc, sqlalchemy, yaml, google.protobuf, pydantic"


def floor_run(code: str, *argv: str) -> float:
    """Wall seconds of one ``python -c code argv...`` process."""
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", code, *argv], check=True)
    return time.perf_counter() - started


def user_cases(args: argparse.Namespace) -> None:
    sizes = [int(s) for s in args.user_sizes.split(",") if s]
    cases = [c for c in args.user_cases.split(",") if c]
    unknown = [c for c in cases if c not in USER_CASES]
    if unknown:
        raise SystemExit(f"--user-cases: unknown {unknown}; expected some of {list(USER_CASES)}")
    load_before = os.getloadavg()
    results = []
    with tempfile.TemporaryDirectory(prefix="leoflow-scale-user-") as tmp:
        root = Path(tmp)
        for n in sizes:
            outs: dict[str, list[dict[str, float]]] = {c: [] for c in cases}
            dags = {}
            for case in cases:
                max_active = USER_CASES[case][0] or n
                dags[case] = root / f"fanout-{n}-{case}.yaml"
                dags[case].write_text(fanout_yaml(n, max_active))
            floors: list[float] = []
            for rep in range(args.reps):
                floors.append(floor_run(_SPAWN_FLOOR, str(n), "32") + floor_run(_IMPORT_FLOOR))
                for case in cases:  # interleaved: each rep runs every case once
                    parallelism = USER_CASES[case][1]
                    home = root / f"home-{n}-{case}-{rep}"
                    outs[case].append(
                        user_run(dags[case], home, n if parallelism is None else parallelism)
                    )
            for case in cases:
                runs = outs[case]
                row: dict[str, Any] = {
                    "case": f"{case}_{n}",
                    "tasks": n,
                    "reps": len(runs),
                    "wall_s": round(statistics.median(r["wall_s"] for r in runs), 3),
                    "wall_s_all": [round(r["wall_s"], 3) for r in runs],
                    "ms_per_task": round(
                        statistics.median(r["wall_s"] for r in runs) / n * 1000, 3
                    ),
                    "cpu_ms_per_task": round(
                        statistics.median(r["cpu_s"] for r in runs) / n * 1000, 3
                    ),
                    "peak_rss_mb": round(max(r["peak_rss_mb"] for r in runs), 1),
                }
                # Over the floors (the bare spawns of ``true`` 32 at a time, and the
                # stack's imports, in the same rep): what Leoflow itself costs a task.
                row["floor_s"] = round(statistics.median(floors), 3)
                row["wall_ratio_to_floor"] = round(
                    statistics.median(r["wall_s"] / f for r, f in zip(runs, floors, strict=True)),
                    3,
                )
                row["over_floor_ms_per_task"] = round(
                    statistics.median(
                        (r["wall_s"] - f) / n * 1000 for r, f in zip(runs, floors, strict=True)
                    ),
                    3,
                )
                if "unlimited" in outs and case != "unlimited":
                    ratios = [
                        a["wall_s"] / b["wall_s"]
                        for a, b in zip(runs, outs["unlimited"], strict=True)
                    ]
                    row["wall_ratio_to_unlimited"] = round(statistics.median(ratios), 3)
                results.append(row)
    curve = {r["tasks"]: r["ms_per_task"] for r in results if r["case"].startswith("max_32_")}
    print(
        json.dumps(
            {
                "benchmark": "scale_user",
                "python": platform.python_version(),
                "what": "whole `leoflow run` processes, agent executor, interleaved per rep",
                "load_average_before": load_before,
                "load_average_after": os.getloadavg(),
                "statistic": "median over reps; ratios: median of each rep's ratio",
                "results": results,
                "max_32_ms_per_task_curve": curve,
                "targets": {"max_32_10000_s": 10, "rss_mb": 150, "ratio_to_unlimited": 1.2},
            },
            indent=2,
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fanout", default="100,1000,10000")
    parser.add_argument("--runs", default="1000", help="R for R runs x 10 tasks ('' skips)")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--executor", default="agent", choices=("agent", "subprocess"))
    parser.add_argument("--parallelism", type=int, default=0, help="0: the settings default")
    parser.add_argument(
        "--loop",
        choices=("uvloop", "asyncio"),
        default="uvloop",
        help="Lite's event loop: uvloop as `leoflow run` has it, or stock asyncio",
    )
    parser.add_argument("--profile", default=None, help="cProfile the largest fan-out")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--user", action="store_true", help="whole `leoflow run` cases")
    parser.add_argument("--user-sizes", default="100,1000,10000")
    parser.add_argument("--user-cases", default=",".join(USER_CASES))
    args = parser.parse_args()
    if args.user:
        user_cases(args)
        return
    if args.child:
        kind, n = args.child.split(":")
        child(kind, int(n), args.executor, args.parallelism, args.profile, args.loop)
        return
    fanouts = [int(s) for s in args.fanout.split(",") if s]
    if args.profile:
        print(json.dumps(run_child("fanout", max(fanouts), args, args.profile)))
        return
    results = []
    for n in fanouts:
        results.append(
            summarize(f"fanout_{n}", [run_child("fanout", n, args) for _ in range(args.reps)])
        )
    for r in [int(s) for s in args.runs.split(",") if s]:
        results.append(
            summarize(f"runs_{r}_x10", [run_child("runs", r, args) for _ in range(args.reps)])
        )
    fan = [r for r in results if r["case"].startswith("fanout_")]
    print(
        json.dumps(
            {
                "benchmark": "scale",
                "python": platform.python_version(),
                "executor": args.executor,
                "parallelism": args.parallelism,
                "loop": args.loop,
                "load_average": os.getloadavg(),
                "statistic": "median over reps, each a fresh process",
                "results": results,
                "fanout_ms_per_task_curve": {r["tasks"]: r["ms_per_task"] for r in fan},
                "fanout_cpu_ms_per_task_curve": {r["tasks"]: r["cpu_ms_per_task"] for r in fan},
                "targets": {
                    "fanout_10000_s": 10,
                    "fanout_10000_rss_mb": 150,
                    "runs_1000_x10_s": 15,
                    "cpu_ms_per_task": 0.5,
                },
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
