"""Built-in ``Noop`` action (spec §10.6): reports devices ready without attaching anything.

Meant for demos and for drivers that need binding conditions but have nothing to attach.
"""

from __future__ import annotations

import asyncio

from .base import AttachRequest, AttachResult, Outcome

DESCRIPTION = "no-op action: devices are reported ready without any attachment"


class NoopAction:
    probe_enabled = False

    def __init__(self, delay_seconds: float = 0.0) -> None:
        self.delay_seconds = delay_seconds

    async def attach(self, request: AttachRequest) -> AttachResult:
        if self.delay_seconds > 0:
            await asyncio.sleep(self.delay_seconds)
        return AttachResult(Outcome.SUCCEEDED, data={"action": "noop"})

    async def detach(self, request: AttachRequest) -> AttachResult:
        return AttachResult(Outcome.SUCCEEDED, data={"action": "noop"})
