"""The in-process runner (an operator in a thread of the test process, under its restricted
identity) works like the subprocess one: a pool status request is answered and the operator
stops cleanly with exit status 0."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from devcluster.kube import Kube
from e2e.poolstatus.support import BUILTIN, request_body, wait_done


def test_operator_in_process(
    api: Kube, operator: Callable[..., Any], unique_name: Callable[[str], str]
) -> None:
    name = unique_name("inprocess")
    with operator("poolstatus", mode="inprocess") as op:
        assert op.thread is not None
        assert op.ready()
        api.create(BUILTIN.path(), request_body(BUILTIN, name, "nothing.e2e.dra-operators.test"))
        try:
            status = wait_done(api, BUILTIN, name)
            assert [c["type"] for c in status["status"]["conditions"] if c["status"] == "True"] == [
                "Complete"
            ]
            assert status["status"].get("poolCount", 0) == 0
        finally:
            api.delete(BUILTIN.path(name))
        assert "dra_operators_workqueue_depth" in op.metrics()
