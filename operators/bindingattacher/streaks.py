"""Claims that keep failing on the same device (the livelock the default policy used to allow).

When an attach fails, kube-scheduler deallocates the claim and schedules it again; nothing
stops it from picking the same device, so without a taint (``onFailure.taintDevice``) the
pod can fail on one device forever while others are free. Each failed round is a new
attachment identity (a new allocation), so the ledger cannot see the repetition; this memory
does. It is bounded and in memory only: after a restart the count starts again, which only
delays the report by a few rounds.
"""

from __future__ import annotations

from collections import OrderedDict

from .identity import DeviceKey

REPORT_EVERY = 3
"""A streak is reported at this many failed rounds and again at each multiple of it."""
MEMORY = 4096


class FailureStreaks:
    def __init__(self, report_every: int = REPORT_EVERY, limit: int = MEMORY) -> None:
        self.report_every = report_every
        self.limit = limit
        self._counts: OrderedDict[tuple[str, DeviceKey], int] = OrderedDict()

    def failed(self, claim_uid: str, device: DeviceKey) -> int | None:
        """Count one failed round; the streak's length when it is due to be reported."""
        key = (claim_uid, device)
        count = self._counts.pop(key, 0) + 1
        self._counts[key] = count
        while len(self._counts) > self.limit:
            self._counts.popitem(last=False)
        return count if count % self.report_every == 0 else None

    def succeeded(self, claim_uid: str, device: DeviceKey) -> None:
        self._counts.pop((claim_uid, device), None)

    def __len__(self) -> int:
        return len(self._counts)
