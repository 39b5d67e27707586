"""The binding attacher's own kinds as the rest of the project sees them.

The attacher (operators/bindingattacher) owns DeviceAttachPolicies and their DeviceAttachment
records; ``kubectl dra explain`` reads them to say what holds a deletion. The names are defined
here once, so that both read the same finalizers, labels and Lease.
"""

from operators.core import PROJECT_GROUP
from operators.core.resources import ApiResource

VERSION = "v1alpha1"
POLICIES = ApiResource(PROJECT_GROUP, VERSION, "deviceattachpolicies", namespaced=False)
RECORDS = ApiResource(PROJECT_GROUP, VERSION, "deviceattachments")

POLICY_FINALIZER = "dra-operators.io/attachments"
"""On a DeviceAttachPolicy until the devices of its records are detached."""
RECORD_FINALIZER = "dra-operators.io/detach"
"""On a DeviceAttachment until its device is detached."""
LABEL_POLICY = "dra-operators.io/policy"
"""On each DeviceAttachment: the policy that attached its device."""

LEASE = "dra-operators-bindingattacher"
"""The leader-election Lease, in the operator's namespace: held and renewed while it runs."""
