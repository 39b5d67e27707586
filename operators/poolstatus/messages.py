"""The exact texts the operator writes: ``validationError`` values and condition messages.

Every ``validationError`` starts with one of the stable prefixes of spec section 8, or one
of the two this project adds for quantities too far apart to compute exactly (docs/spec-notes.md),
so that scripts can match on them; the rest of each text is fixed too, because users compare it.
Names inside texts are quoted like Go's ``%q`` so that the same pool reads the same way
whether upstream or this operator wrote it.

The API bounds ``validationError`` at 256 bytes and condition messages at 1024 bytes
(our own limit, well below the API's); both are cut on a UTF-8 character boundary so the
result is still valid text (the core's ``truncate_utf8``, without a marker: the texts are compared).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

from operators.core.texts import truncate_utf8
from operators.dra.quantity import MAX_EXACT_DIGITS

PREFIX_POOL_INCOMPLETE = "PoolIncomplete:"
PREFIX_PARTITION_TYPE_MISSING = "PartitionTypeMissing:"
PREFIX_PARTITION_COST_MISMATCH = "PartitionCostMismatch:"
PREFIX_PARTITION_SUMMARY_OVER_CAP = "PartitionSummaryOverCap:"
PREFIX_SHAREABLE_SUMMARY_OVER_CAP = "ShareableSummaryOverCap:"
PREFIX_PARTITION_COUNTER_OUT_OF_RANGE = "PartitionCounterOutOfRange:"
PREFIX_SHAREABLE_CAPACITY_OUT_OF_RANGE = "ShareableCapacityOutOfRange:"
VALIDATION_PREFIXES = (
    PREFIX_POOL_INCOMPLETE,
    PREFIX_PARTITION_TYPE_MISSING,
    PREFIX_PARTITION_COST_MISMATCH,
    PREFIX_PARTITION_SUMMARY_OVER_CAP,
    PREFIX_SHAREABLE_SUMMARY_OVER_CAP,
    PREFIX_PARTITION_COUNTER_OUT_OF_RANGE,
    PREFIX_SHAREABLE_CAPACITY_OUT_OF_RANGE,
)

REQUEST_KIND = "ResourcePoolStatusRequest"
REASON_STATUS_FIELDS_DROPPED = "StatusFieldsDropped"
"""The Warning Event on a request whose status came back without fields that were written."""

MAX_VALIDATION_ERROR_BYTES = 256
MAX_CONDITION_MESSAGE_BYTES = 1024
# Status lists are capped at 32 entries by the API; exceeding it is reported, not truncated.
MAX_SUMMARY_ENTRIES = 32

_GO_SHORT_ESCAPES = {
    "\a": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\v": "\\v",
    "\\": "\\\\",
    '"': '\\"',
}


def _go_printable(char: str) -> bool:
    # Go's unicode.IsPrint: categories L, M, N, P, S plus the ASCII space.
    return char == " " or unicodedata.category(char)[0] in "LMNPS"


def go_quote(text: str) -> str:
    """Quote ``text`` exactly as Go's ``strconv.Quote`` (and so ``%q``) does."""
    parts = ['"']
    for char in text:
        code = ord(char)
        if char in _GO_SHORT_ESCAPES:
            parts.append(_GO_SHORT_ESCAPES[char])
        elif code < 0x20 or code == 0x7F:
            parts.append(f"\\x{code:02x}")
        elif _go_printable(char):
            parts.append(char)
        elif code < 0x10000:
            parts.append(f"\\u{code:04x}")
        else:
            parts.append(f"\\U{code:08x}")
    parts.append('"')
    return "".join(parts)


def validation_error(text: str) -> str:
    return truncate_utf8(text, MAX_VALIDATION_ERROR_BYTES)


def prefix_of(validation_error_text: str) -> str:
    """The machine-readable prefix of a validationError, e.g. ``PoolIncomplete:``."""
    for prefix in VALIDATION_PREFIXES:
        if validation_error_text.startswith(prefix):
            return prefix
    return validation_error_text.split(" ", 1)[0]


def pool_incomplete(driver: str, pool: str, observed: int, expected: int, generation: int) -> str:
    return validation_error(
        f"{PREFIX_POOL_INCOMPLETE} pool {driver}/{pool} is incomplete: "
        f"observed {observed}/{expected} slices at generation {generation}"
    )


def partitions_without_counters(driver: str, pool: str) -> str:
    # Wording kept from upstream even when the attribute came from the request.
    return validation_error(
        f"{PREFIX_PARTITION_TYPE_MISSING} pool {driver}/{pool} declares partitionTypeAttribute "
        "but publishes no sharedCounters"
    )


def partition_type_missing(driver: str, pool: str, device: str, attribute: str) -> str:
    return validation_error(
        f"{PREFIX_PARTITION_TYPE_MISSING} device {go_quote(device)} in pool {driver}/{pool} "
        f"does not carry partition type attribute {go_quote(attribute)}"
    )


def partition_cost_mismatch(driver: str, pool: str, partition_type: str) -> str:
    return validation_error(
        f"{PREFIX_PARTITION_COST_MISMATCH} devices of partition type {go_quote(partition_type)} "
        f"in pool {driver}/{pool} consume different counters"
    )


def partition_counter_out_of_range(driver: str, pool: str, counter_set: str, counter: str) -> str:
    what = f"counter {go_quote(counter)} of counter set {go_quote(counter_set)}"
    return _out_of_range(PREFIX_PARTITION_COUNTER_OUT_OF_RANGE, what, driver, pool, "computed")


def shareable_capacity_out_of_range(driver: str, pool: str, capacity: str) -> str:
    what = f"capacity {go_quote(capacity)}"
    return _out_of_range(PREFIX_SHAREABLE_CAPACITY_OUT_OF_RANGE, what, driver, pool, "summed")


def _out_of_range(prefix: str, what: str, driver: str, pool: str, done: str) -> str:
    return validation_error(
        f"{prefix} {what} in pool {driver}/{pool} cannot be {done} exactly: "
        f"its quantities are more than {MAX_EXACT_DIGITS} digits apart"
    )


def partition_summary_over_cap(driver: str, pool: str, count: int) -> str:
    return _summary_over_cap(PREFIX_PARTITION_SUMMARY_OVER_CAP, driver, pool, count, "partition types")


def shareable_summary_over_cap(driver: str, pool: str, count: int) -> str:
    return _summary_over_cap(
        PREFIX_SHAREABLE_SUMMARY_OVER_CAP, driver, pool, count, "shareable capacity keys"
    )


def _summary_over_cap(prefix: str, driver: str, pool: str, count: int, entries: str) -> str:
    return validation_error(
        f"{prefix} pool {driver}/{pool} has {count} {entries}, exceeding the maximum of {MAX_SUMMARY_ENTRIES}"
    )


def complete_message(listed: int, incomplete: int) -> str:
    # "pools" stays plural even for one pool, as upstream writes it.
    if incomplete > 0:
        return f"Calculated status for {listed} pools ({incomplete} incomplete)"
    return f"Calculated status for {listed} pools"


def list_failed_message(kind: str, error: str) -> str:
    """``kind`` is ResourceSlices, DeviceTaintRules or ResourceClaims."""
    return condition_message(f"Failed to list {kind}: {error}")


def write_failed_message(error: str) -> str:
    return condition_message(f"Failed to write status: {error}")


def status_too_large_message(size: int, limit: int) -> str:
    return write_failed_message(
        f"status is {size} bytes, above the limit of {limit} bytes; lower spec.limit or set spec.poolName"
    )


def status_fields_dropped_message(api_version: str, fields: Sequence[str], built_in: bool) -> str:
    """The Event (and log line) when the server kept less of the status than was written:
    which fields, and the likely cause and remedy on the request's API (:func:`writes.dropped_fields`)."""
    shown = ", ".join(f"status.{field}" for field in fields)
    if built_in:
        cause = (
            f"this cluster's {api_version} has no such fields, as Kubernetes 1.36's, whose PoolStatus "
            "lacks partitionSummary and shareableSummary (1.37 keeps both, whatever its feature gates)"
        )
        remedy = (
            "the counts were written; for the summaries use Kubernetes 1.37, or requests of the "
            "project's CRD (dra-operators.io/v1alpha1), which keeps them"
        )
    else:
        cause = (
            "the installed CustomResourceDefinition resourcepoolstatusrequests.dra-operators.io prunes "
            "them: it is older than this operator"
        )
        remedy = "apply crds/resourcepoolstatusrequests.dra-operators.io.yaml of this release again"
    return condition_message(f"The API server dropped {shown} from the status written: {cause}; {remedy}.")


def condition_message(text: str) -> str:
    return truncate_utf8(text, MAX_CONDITION_MESSAGE_BYTES)
