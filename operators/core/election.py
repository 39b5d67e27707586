"""Leader election: kubernetes-asyncio's ``LeaderElection``, bounded and retried as client-go's.

The library decides as client-go does whether a Lease has expired: by the local time at which
the record last changed, never by the holder's ``renewTime``, so clocks that differ between nodes
do not let a standby take a live Lease. What it lacks is what bounds the leader: it compares its
renew deadline with the wall clock only between two attempts, and its requests carry no timeout,
so one request that is never answered (a connection to a hung API server, packets dropped on the
way) keeps it leading long after a standby has taken the Lease. client-go runs each renewal under
a context that ends at the renew deadline (``renew`` in tools/leaderelection/leaderelection.go).

Nor does the library survive a request that fails without an API error: a dropped connection,
or an answer it cannot read (API Priority and Fairness refuses in plain text), ends its election
at once, and the leader with it, where client-go counts one failed attempt and tries again.
"""

from __future__ import annotations

import asyncio
import logging

import aiohttp
from kubernetes_asyncio.leaderelection.leaderelection import LeaderElection

log = logging.getLogger(__name__)


class Elector(LeaderElection):
    async def try_acquire_or_renew(self) -> bool:
        """One attempt; False when it failed, however it failed. It gets no longer than the renew
        deadline: a standby's unanswered request would otherwise keep it from ever leading."""
        lock = self.election_config.lock
        try:
            async with asyncio.timeout(self.election_config.renew_deadline):
                return await super().try_acquire_or_renew()
        except (aiohttp.ClientError, OSError) as err:  # TimeoutError included
            log.warning(
                "could not reach the Lease %s/%s: %s",
                lock.namespace,
                lock.name,
                str(err) or type(err).__name__,
            )
        except Exception:
            log.exception("could not read or write the Lease %s/%s", lock.namespace, lock.name)
        return False

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
