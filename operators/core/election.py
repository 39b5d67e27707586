"""Leader election: kubernetes-asyncio's ``LeaderElection`` with client-go's renew deadline.

The library decides as client-go does whether a Lease has expired: by the local time at which
the record last changed, never by the holder's ``renewTime``, so clocks that differ between nodes
do not let a standby take a live Lease. What it lacks is what bounds the leader: it compares its
renew deadline with the wall clock only between two attempts, and its requests carry no timeout,
so one request that is never answered (a connection to a hung API server, packets dropped on the
way) keeps it leading long after a standby has taken the Lease. client-go runs each renewal under
a context that ends at the renew deadline (``renew`` in tools/leaderelection/leaderelection.go).
"""

from __future__ import annotations

import asyncio

from kubernetes_asyncio.leaderelection.leaderelection import LeaderElection


class Elector(LeaderElection):
    async def renew_loop(self) -> None:
        """Renew every retry period; return, and so stop leading, once no attempt has succeeded
        for the renew deadline, by the monotonic clock and whatever the requests are doing."""
        config = self.election_config
        while True:
            try:
                async with asyncio.timeout(config.renew_deadline):
                    while True:
                        if await self.try_acquire_or_renew():
                            break
                        await asyncio.sleep(config.retry_period)
            except TimeoutError:
                return
            await asyncio.sleep(config.retry_period)
