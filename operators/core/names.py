"""The name formats of Kubernetes' API validation (apimachinery), written once for every operator
and for ``kubectl dra``: what the API server would refuse is refused here first, with our message."""

from __future__ import annotations

import re

DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
DNS_LABEL_MAX_CHARS = 63
DNS_SUBDOMAIN_MAX_CHARS = 253
LABEL_VALUE_MAX_CHARS = 63
# A qualified name's name part and a non-empty label value: apimachinery builds both from one pattern.
_QUALIFIED_NAME_PART = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_NOT_IN_LABEL_VALUE = re.compile(r"[^-A-Za-z0-9_.]")


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


def is_label_value(value: str) -> bool:
    """A label's value, and so a taint's (``DeviceTaint.value``): empty, or alphanumerics, '-', '_' and
    '.' that begin and end alphanumeric."""
    return not value or (
        len(value) <= LABEL_VALUE_MAX_CHARS and _QUALIFIED_NAME_PART.fullmatch(value) is not None
    )


def label_value_of(text: str) -> str:
    """``text`` made a label value: each character a label value cannot hold becomes '-', the first 63
    characters are kept, and what is not alphanumeric is cut from both ends.

    So that a text of another format (a condition reason such as ``Vendor:Timeout`` may hold ':' and
    ',' and end in '_') can be shown where only a label value is accepted. The same text always gives
    the same value, and a label value gives itself."""
    return _NOT_IN_LABEL_VALUE.sub("-", text)[:LABEL_VALUE_MAX_CHARS].strip("-_.")
