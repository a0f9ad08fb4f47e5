"""Pools: list with occupancy, create, resize, delete.

A pool lives in the store; ``settings.pools`` and ``default_pool`` (sized by
``default_pool_slots``) exist without a row until resized here. The scheduler
re-reads pools from the store, so a change here reaches admission on its next poll.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Path, Response

from leoflow.api.auth import Admin, Viewer
from leoflow.api.context import ApiContext, Ctx
from leoflow.api.lookup import spec_of
from leoflow.api.schemas import POOL_NAME_PATTERN, ErrorOut, PoolIn, PoolList, PoolOut, PoolPatch
from leoflow.domain.dag import DEFAULT_POOL
from leoflow.domain.states import TASK_HOLDS_SLOTS, TaskState

router = APIRouter(prefix="/api/v1/pools", tags=["pools"])

PoolName = Annotated[str, Path(pattern=POOL_NAME_PATTERN)]
_ERRORS: dict[int | str, dict[str, Any]] = {404: {"model": ErrorOut}, 409: {"model": ErrorOut}}

Source = Literal["store", "settings", "default"]


async def _pools(ctx: ApiContext) -> dict[str, tuple[int, str, Source]]:
    found: dict[str, tuple[int, str, Source]] = {
        DEFAULT_POOL: (ctx.settings.default_pool_slots, "", "default")
    }
    for name, slots in ctx.settings.pools.items():
        found[name] = (slots, "", "settings")
    for row in await ctx.store.list_pools():
        found[row.name] = (row.slots, row.description, "store")
    return found


async def _occupancy(ctx: ApiContext) -> dict[str, tuple[int, int, int]]:
    """(slots held, queued count, running count) by pool."""
    out: dict[str, tuple[int, int, int]] = {}
    for ti in await ctx.store.list_task_instances(states=TASK_HOLDS_SLOTS):
        slots, queued, running = out.get(ti.pool, (0, 0, 0))
        out[ti.pool] = (
            slots + ti.pool_slots,
            queued + (ti.state is TaskState.QUEUED),
            running + (ti.state is TaskState.RUNNING),
        )
    return out


def _pool_out(
    name: str,
    pools: dict[str, tuple[int, str, Source]],
    occupancy: dict[str, tuple[int, int, int]],
) -> PoolOut:
    slots, description, source = pools[name]
    held, queued, running = occupancy.get(name, (0, 0, 0))
    return PoolOut(
        name=name,
        slots=slots,
        description=description,
        occupied=held,
        queued=queued,
        running=running,
        source=source,
    )


async def _one(ctx: ApiContext, name: str) -> PoolOut:
    pools = await _pools(ctx)
    if name not in pools:
        raise HTTPException(404, f"no pool {name!r}")
    return _pool_out(name, pools, await _occupancy(ctx))


@router.get("", response_model=PoolList)
async def list_pools(ctx: Ctx, who: Viewer) -> PoolList:
    pools = await _pools(ctx)
    occupancy = await _occupancy(ctx)
    out = [_pool_out(name, pools, occupancy) for name in sorted(pools)]
    return PoolList(pools=out)


@router.get("/{name}", response_model=PoolOut, responses=_ERRORS)
async def get_pool(name: PoolName, ctx: Ctx, who: Viewer) -> PoolOut:
    return await _one(ctx, name)


@router.post("", status_code=201, response_model=PoolOut, responses=_ERRORS)
async def create_pool(body: PoolIn, ctx: Ctx, who: Admin) -> PoolOut:
    pools = await _pools(ctx)
    if body.name in pools:
        raise HTTPException(
            409, f"pool {body.name!r} exists ({pools[body.name][2]}): resize it with PATCH"
        )
    await ctx.store.upsert_pool(body.name, body.slots, body.description)
    ctx.changed()
    return await _one(ctx, body.name)


@router.patch("/{name}", response_model=PoolOut, responses=_ERRORS)
async def resize_pool(name: PoolName, body: PoolPatch, ctx: Ctx, who: Admin) -> PoolOut:
    pools = await _pools(ctx)
    if name not in pools:
        raise HTTPException(404, f"no pool {name!r}")
    slots, description, _ = pools[name]
    await ctx.store.upsert_pool(
        name,
        slots if body.slots is None else body.slots,
        description if body.description is None else body.description,
    )
    ctx.changed()
    return await _one(ctx, name)


@router.delete("/{name}", status_code=204, response_class=Response, responses=_ERRORS)
async def delete_pool(name: PoolName, ctx: Ctx, who: Admin) -> Response:
    if name == DEFAULT_POOL:
        raise HTTPException(409, f"{DEFAULT_POOL} cannot be deleted; resize it instead")
    pools = await _pools(ctx)
    if name not in pools:
        raise HTTPException(404, f"no pool {name!r}")
    if pools[name][2] == "settings":
        raise HTTPException(
            409, f"pool {name!r} comes from the settings (LEOFLOW_POOLS); remove it there"
        )
    users = sorted(
        dag.dag_id
        for dag in await ctx.store.list_dags()
        if dag.active and (spec := spec_of(dag)) is not None and name in spec.used_pools()
    )
    if users:
        raise HTTPException(409, f"pool {name!r} is used by DAG(s) {', '.join(users)}")
    await ctx.store.delete_pool(name)
    ctx.changed()
    return Response(status_code=204)
