"""The pure core: DAG models, the state machine, admission, trigger rules, schedules,
run progress, credentials and the dbt manifest -> task graph translation.

Stdlib and pydantic only, tested without a loop, a database, a file or a network.
Never imports I/O: no asyncio, SQLAlchemy, grpc, ``kubernetes_asyncio``, FastAPI, httpx,
yaml, pathlib, os or subprocess, and no other leoflow package (reading DAG files is
``leoflow.dagfile``'s job). Enforced by the domain-pure contract in ``.importlinter``.
"""
