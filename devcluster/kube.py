"""A synchronous face of the project's API client, for tests and tools.

Tests are plain synchronous functions; the operators' async :class:`KubeClient` runs on a
private event loop in a daemon thread, and every call waits for its result with a time limit.
Built only from an explicit kubeconfig path, never from ``$KUBECONFIG``.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, TypeVar

from operators.core.client import ApiError, KubeClient

T = TypeVar("T")
CALL_TIMEOUT = 90.0

__all__ = ["ApiError", "Kube", "WaitTimeout", "wait_for"]


class Kube:
    def __init__(self, kubeconfig: str, qps: float = 0, burst: int = 100) -> None:
        self.kubeconfig = kubeconfig
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="kube-client", daemon=True)
        self._thread.start()
        self.client: KubeClient = self._run(KubeClient.from_kubeconfig(kubeconfig, qps=qps, burst=burst))

    def _run(self, coro: Coroutine[Any, Any, T], timeout: float = CALL_TIMEOUT) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def close(self) -> None:
        self._run(self.client.close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()

    def get(self, path: str, **params: str) -> Any:
        return self._run(self.client.get(path, **params))

    def get_or_none(self, path: str) -> Any:
        try:
            return self.get(path)
        except ApiError as err:
            if err.not_found:
                return None
            raise

    def list(self, path: str, **params: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = self.get(path, **params).get("items", [])
        return items

    def create(self, path: str, body: Mapping[str, Any] | str) -> Any:
        """Create ``body``, an object or its JSON text (sent as it is)."""
        if isinstance(body, str):
            return self._run(self.client.request("POST", path, body=body))
        return self._run(self.client.create(path, body))

    def replace(self, path: str, body: Mapping[str, Any]) -> Any:
        return self._run(self.client.replace(path, body))

    def apply(self, path: str, body: Mapping[str, Any], field_manager: str = "e2e") -> Any:
        return self._run(self.client.apply(path, body, field_manager))

    def patch(
        self, path: str, body: Mapping[str, Any], content_type: str = "application/merge-patch+json"
    ) -> Any:
        return self._run(self.client.patch(path, body, content_type=content_type))

    def delete(self, path: str, uid: str | None = None, missing_ok: bool = True, **params: str) -> Any:
        body: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if uid is not None:
            body["preconditions"] = {"uid": uid}
        # kube-apiserver reads DeleteOptions from the body when there is one and then ignores the query,
        # so a grace period must travel in the body (a bound pod would otherwise linger: no kubelet).
        if "gracePeriodSeconds" in params:
            body["gracePeriodSeconds"] = int(params.pop("gracePeriodSeconds"))
        try:
            return self._run(self.client.request("DELETE", path, params=params, body=body))
        except ApiError as err:
            if err.not_found and missing_ok:
                return None
            raise

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        return self._run(self.client.request(method, path, **kwargs))


class WaitTimeout(AssertionError):
    pass


def wait_for(condition: Callable[[], T], timeout: float, what: str, interval: float = 0.2) -> T:
    """Poll ``condition`` until it returns a truthy value; fail naming ``what`` and the last value."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            last = condition()
        except ApiError as err:
            last = err
        if last and not isinstance(last, Exception):
            return last  # type: ignore[no-any-return]
        if time.monotonic() >= deadline:
            raise WaitTimeout(
                f"timed out after {timeout:.0f}s waiting for {what}; last observed: {last!r:.2000}"
            )
        time.sleep(interval)
