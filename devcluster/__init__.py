"""The devcluster: a local Kubernetes cluster built from Go modules (``python -m devcluster``), and
the small API client (``devcluster.kube``). ``demo/`` and ``e2e/`` share it; it imports neither."""
