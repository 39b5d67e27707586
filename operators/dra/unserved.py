"""What a user is told when the cluster does not serve an API a tool needs: the cause, and the
remedy on each supported Kubernetes version, in one text every operator and command shares.

DeviceTaintRules (``resource.k8s.io``): 1.37 serves ``v1`` by default. 1.36 serves ``v1beta2``
only with ``--runtime-config`` (a beta API, off by default), and kube-scheduler honours the rules
only with the ``DRADeviceTaintRules`` gate (beta, off). 1.35 serves ``v1alpha3`` only with
``--runtime-config``, and kube-scheduler needs the alpha gates ``DRADeviceTaints`` and
``DRADeviceTaintRules``. kube-apiserver serves the API whatever the gates say; the taintselector
and devicetaint operators need only the API.
"""

from __future__ import annotations

from .taintrules import VERSIONS


def _alternatives(versions: tuple[str, ...]) -> str:
    return versions[0] if len(versions) == 1 else f"{', '.join(versions[:-1])} or {versions[-1]}"


DEVICE_TAINT_RULES_UNSERVED = (
    f"this cluster serves no DeviceTaintRule API (resource.k8s.io {_alternatives(VERSIONS)}): "
    "Kubernetes 1.37 serves v1 by default; on 1.36 start kube-apiserver with "
    "--runtime-config=resource.k8s.io/v1beta2=true and enable the DRADeviceTaintRules feature gate "
    "(kube-scheduler honours the rules only with it); on 1.35 use "
    "--runtime-config=resource.k8s.io/v1alpha3=true and the DRADeviceTaints and DRADeviceTaintRules "
    "feature gates"
)
"""Lower-case and without a final full stop, to follow a colon or end an error line."""
