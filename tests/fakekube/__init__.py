"""A fake kube-apiserver and a simulated kubelet for Leoflow's integration tests.

Kubernetes cannot run in the test environment; :class:`FakeApiServer` speaks the
real REST + watch protocol over HTTP on 127.0.0.1 so the real ``kubernetes_asyncio``
client is exercised on the wire, and :class:`FakeKubelet` moves pods through their
phases (optionally running their commands as local processes). Their answers are
kept honest by the real apiserver transcripts in ``transcripts/``.
"""

from .faults import RequestInfo
from .kubelet import FakeKubelet, Outcome
from .server import DEFAULT_USER, FakeApiServer

__all__ = ["DEFAULT_USER", "FakeApiServer", "FakeKubelet", "Outcome", "RequestInfo"]
