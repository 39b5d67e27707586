"""API coordinates of the built-in DRA kinds served as ``v1``, named once for every operator.

DeviceTaintRules are not among them: 1.35 and 1.36 serve them under other versions, so every
operator reaches them through the version discovery finds (:mod:`.taintrules`)."""

from operators.core.resources import ApiResource

GROUP = "resource.k8s.io"
VERSION = "v1"

RESOURCE_CLAIMS = ApiResource(GROUP, VERSION, "resourceclaims")
RESOURCE_CLAIM_TEMPLATES = ApiResource(GROUP, VERSION, "resourceclaimtemplates")
RESOURCE_SLICES = ApiResource(GROUP, VERSION, "resourceslices", namespaced=False)
DEVICE_CLASSES = ApiResource(GROUP, VERSION, "deviceclasses", namespaced=False)
