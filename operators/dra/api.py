"""API coordinates of the built-in DRA kinds, named once for every operator."""

GROUP = "resource.k8s.io"
VERSION = "v1"
