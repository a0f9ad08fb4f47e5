"""How the kube client reaches its apiserver: the configuration (in-cluster or a
kubeconfig) and the ``ApiClient`` that sends Leoflow's JSON bodies as they are and
reads the proxy and netrc settings once."""

from __future__ import annotations

import contextlib
import os
from typing import Any

import aiohttp
import aiohttp.helpers
from kubernetes_asyncio import client as k8s
from kubernetes_asyncio import config as k8s_config
from yarl import URL


class JsonApiClient(k8s.ApiClient):
    """An ``ApiClient`` that sends our bodies as they are.

    Every body and header map Leoflow passes is JSON already (``JsonObj``: str, int,
    float, bool, None, lists and dicts of them; times are formatted before they get
    here), where the generated client walks it recursively for model objects and
    datetimes: in ``bench_pro_scale.py`` that walk was ~40% of a pod create's
    client-side CPU. What is not a dict still takes the generated path; a value that is
    not JSON fails ``json.dumps`` loudly instead of being converted.
    """

    def __init__(self, configuration: k8s.Configuration) -> None:
        super().__init__(configuration=configuration)
        _read_environment_once(self.rest_client, configuration)

    def sanitize_for_serialization(self, obj: object) -> object:
        if type(obj) is dict:
            return obj
        return super().sanitize_for_serialization(obj)


def _read_environment_once(rest: Any, configuration: k8s.Configuration) -> None:
    """Take the proxy and netrc settings from the environment now, not per request.

    ``kubernetes_asyncio`` opens its session with ``trust_env=True``, and aiohttp then
    makes every request look up ``HTTP(S)_PROXY``/``NO_PROXY`` and ``~/.netrc`` in a
    worker thread, two thread hops each: on a busy 2-core scheduler each hop waited for
    the GIL behind the event loop (``benchmarks/bench_pro_scale.py``: ~8% of the
    scheduler's CPU and a share of every pod create's latency). Every request of a
    client goes to the one apiserver, so the answers are the same each time: asked
    once here, and the session no longer asks. An explicit ``configuration.proxy``
    wins, as it did.
    """
    old = rest.pool_manager
    url = URL(configuration.host or "")
    if not rest.proxy:
        with contextlib.suppress(LookupError):
            proxy, proxy_auth = aiohttp.helpers.get_env_proxy_for_url(url)
            rest.proxy = str(proxy)
            if proxy_auth is not None:
                rest.proxy_headers = {
                    **(rest.proxy_headers or {}),
                    "Proxy-Authorization": proxy_auth.encode(),
                }
    auth = None
    netrc = aiohttp.helpers.netrc_from_env()
    if netrc is not None and url.host is not None:
        with contextlib.suppress(LookupError):
            auth = aiohttp.helpers.basicauth_from_netrc(netrc, url.host)
    rest.pool_manager = aiohttp.ClientSession(
        connector=old.connector,
        auth=auth,
        trust_env=False,
        read_bufsize=2**21,  # as kubernetes_asyncio's: large watch events
    )
    old.detach()  # the connector is the new session's now


def _default_kubeconfig() -> str:
    return os.path.expanduser("~/.kube/config")


async def load_configuration() -> k8s.Configuration:
    """In-cluster config if ``KUBERNETES_SERVICE_HOST`` is set, else the kubeconfig."""
    configuration = k8s.Configuration()
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        k8s_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        return configuration
    path = os.environ.get("KUBECONFIG") or _default_kubeconfig()
    first = path.split(os.pathsep)[0]
    await k8s_config.load_kube_config(config_file=first, client_configuration=configuration)
    return configuration
