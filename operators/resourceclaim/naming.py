"""``generateName`` of generated claims (spec section 7.2).

kube-apiserver truncates an over-long ``generateName`` from the end, which would cut away
the pod claim entry name of a pod with a long name. Truncating both parts in proportion to
their length keeps a recognisable piece of each.

Unlike upstream, the shortened form never leaves the pod part ending in a dot or empty: a pod
name such as ``<52 characters>.worker`` would otherwise give ``<52 characters>.-gp``, and a
one-character pod name with a long entry name ``-<entry>``, both of which kube-apiserver
refuses (a DNS label may neither be empty nor start with a hyphen), so the pod would never get
its claim. Every name upstream's form makes valid is unchanged.
"""

from __future__ import annotations

from .constants import MAX_GENERATE_NAME_BASE


def claim_generate_name(pod_name: str, entry_name: str) -> str:
    """``<pod>-<entry>-``, or both parts shortened proportionally when that exceeds 57.

    The shortened form has no trailing hyphen, as upstream; the result stays below the
    limit because both floor divisions round down.
    """
    base = f"{pod_name}-{entry_name}-"
    if len(base) <= MAX_GENERATE_NAME_BASE:
        return base
    pod_part = pod_name[: len(pod_name) * MAX_GENERATE_NAME_BASE // len(base)]
    entry_part = entry_name[: len(entry_name) * MAX_GENERATE_NAME_BASE // len(base)]
    # Pod names have no two dots in a row and start with a letter or digit, so one strip each
    # is enough to keep every label of the name valid.
    return f"{pod_part.removesuffix('.')}-{entry_part}".lstrip("-")
