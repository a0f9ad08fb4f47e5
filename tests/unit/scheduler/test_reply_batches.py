"""The endpoint's reply batches stay under the agent's message limit."""

from __future__ import annotations

from leoflow.protocol.agent_v1 import pb
from leoflow.scheduler.agent_channel import _BATCH_BYTES, _REPLIES_PER_BATCH, _batch_end


def _start_reply(size: int) -> pb.ItemReply:
    return pb.ItemReply(id=1, start=pb.StartResponse(inputs={"up": "x" * size}))


def test_a_batch_is_cut_by_size_and_by_count() -> None:
    big = [_start_reply(400 * 1024) for _ in range(10)]
    end = _batch_end(big)
    assert end == 2
    assert sum(r.ByteSize() for r in big[:end]) <= _BATCH_BYTES
    small = [pb.ItemReply(id=i) for i in range(600)]
    assert _batch_end(small) == _REPLIES_PER_BATCH
    assert _batch_end(small[:3]) == 3
    # One reply over the size alone still goes (the agent's limit is 4 MiB, not 1).
    assert _batch_end([_start_reply(2 * 1024 * 1024), _start_reply(1)]) == 1
