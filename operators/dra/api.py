"""API coordinates of the built-in DRA kinds, named once for every operator."""

from operators.core.resources import ApiResource

GROUP = "resource.k8s.io"
VERSION = "v1"

RESOURCE_CLAIMS = ApiResource(GROUP, VERSION, "resourceclaims")
RESOURCE_CLAIM_TEMPLATES = ApiResource(GROUP, VERSION, "resourceclaimtemplates")
RESOURCE_SLICES = ApiResource(GROUP, VERSION, "resourceslices", namespaced=False)
DEVICE_CLASSES = ApiResource(GROUP, VERSION, "deviceclasses", namespaced=False)
DEVICE_TAINT_RULES = ApiResource(GROUP, VERSION, "devicetaintrules", namespaced=False)
