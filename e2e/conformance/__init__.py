"""Upstream's DRA e2e suite (k8s.io/kubernetes test/e2e/dra), built here and run unmodified."""
