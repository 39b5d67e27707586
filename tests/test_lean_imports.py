import subprocess
import sys

from operators.core.lean_imports import reexports


def test_reexports_reads_both_import_forms() -> None:
    source = (
        '"""doc"""\n'
        "from kubernetes_asyncio.client.models.v1_pod import V1Pod\n"
        "import kubernetes_asyncio.config as config\n"
        "__version__ = '1'\n"
    )
    assert reexports(source) == {
        "V1Pod": ("kubernetes_asyncio.client.models.v1_pod", "V1Pod"),
        "config": ("kubernetes_asyncio.config", None),
    }


def test_an_operator_process_loads_only_the_client_parts_it_uses() -> None:
    # A fresh interpreter: this test process may have imported the client eagerly already.
    probe = (
        "import sys, operators, kopf, operators.core.runtime\n"
        "from kubernetes_asyncio import client, config\n"
        "from kubernetes_asyncio.leaderelection.resourcelock.leaselock import LeaseLock\n"
        "assert client.V1Lease.__name__ == 'V1Lease'\n"
        "assert client.Configuration.__module__ == 'kubernetes_asyncio.client.configuration'\n"
        "assert callable(config.load_kube_config)\n"
        "models = [m for m in sys.modules if m.startswith('kubernetes_asyncio.client.models.')]\n"
        "print(len(models))\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert int(result.stdout) < 10, result.stdout
