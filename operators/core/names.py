"""The name formats of Kubernetes' API validation (apimachinery), written once for every operator
and for ``kubectl dra``: what the API server would refuse is refused here first, with our message."""

from __future__ import annotations

import re

DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
DNS_LABEL_MAX_CHARS = 63
DNS_SUBDOMAIN_MAX_CHARS = 253
_QUALIFIED_NAME_PART = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")


def is_dns_label(value: str) -> bool:
    return len(value) <= DNS_LABEL_MAX_CHARS and DNS_LABEL.fullmatch(value) is not None


def is_dns_subdomain(value: str, max_chars: int = DNS_SUBDOMAIN_MAX_CHARS) -> bool:
    return len(value) <= max_chars and DNS_SUBDOMAIN.fullmatch(value) is not None


def is_qualified_name(value: str) -> bool:
    """``[prefix/]name``, as label keys and condition types are: a DNS subdomain before the slash."""
    prefix, slash, name = value.rpartition("/")
    if slash and not (prefix and is_dns_subdomain(prefix)):
        return False
    return 0 < len(name) <= DNS_LABEL_MAX_CHARS and _QUALIFIED_NAME_PART.fullmatch(name) is not None
