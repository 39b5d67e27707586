"""``python -m demo.maintenance [--record]``: the ``kubectl dra`` device-maintenance session of
``docs/kubectl-dra.md``.

The commands are a :class:`~demo.scenarios.Scenario` played by the same :class:`~demo.player.Player`
as the demo folders, on the same cluster (``$KUBECONFIG``, else the local control plane), with
the manifests in ``docs/kubectl-dra/``. ``--record`` writes the run into that page's block with
:data:`BEGIN`; ``tests/test_kubectl_dra_docs.py`` checks that the block shows exactly these
commands, and ``e2e/product/test_kubectl_dra_maintenance.py`` plays them and checks the outcome.
It is not one of ``make demo``'s stories: it documents the plugin, not an operator's feature.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from demo import cleanup, transcripts
from demo.player import Player, transcript
from demo.scenarios import Scenario, Step
from demo.walkthrough import _operators, _setup, _target
from devcluster.constants import REPO_ROOT
from devcluster.kube import Kube

PAGE = REPO_ROOT / "docs" / "kubectl-dra.md"
BEGIN = (
    "<!-- transcript: kubectl dra maintenance, recorded by `python -m demo.maintenance --record`; "
    "do not edit by hand -->"
)
DRIVER = "gpu.maintenance.demo.example.com"
NODE = "maintenance-node"
UNTAINT = f"kubectl dra untaint driver={DRIVER} --yes"

MAINTENANCE = Scenario(
    name="kubectl-dra",
    title="Device maintenance with kubectl dra taint, drain and untaint",
    operators=("devicetaint", "taintselector"),
    namespace="demo-maintenance",
    home=REPO_ROOT / "docs",
    steps=(
        Step(
            "A node with four GPUs (the fake driver publishes them).",
            "python -m demo.fakedriver apply docs/kubectl-dra",
        ),
        Step(
            "Two trainers and a monitor, one GPU each; only the monitor tolerates the maintenance taint.",
            "kubectl apply -f docs/kubectl-dra/2-workloads.yaml",
        ),
        Step(
            "The scheduler gives each its GPU (gpu-0, gpu-1, gpu-2) and binds it to the fake node.",
            "kubectl wait --for=condition=PodScheduled pod --all -n demo-maintenance --timeout=60s",
        ),
        Step(
            "Take the free gpu-3 out of service: NoSchedule keeps new claims off it. The preview comes "
            "first; --yes answers the question (without a terminal, nothing is done without it).",
            f"kubectl dra taint driver={DRIVER},device=gpu-3 --name gpu-3-repair --yes",
        ),
        Step(
            "By class and CEL, a DeviceTaintSelector: NoExecute evicts trainer-1, and --wait follows "
            "the eviction to its end.",
            f"kubectl dra taint driver={DRIVER} --class maintenance-gpu "
            f"--selector 'device.attributes[\"{DRIVER}\"].index == 1' --name flaky-gpu "
            "--effect NoExecute --yes --wait",
        ),
        Step(
            "Drain the whole pool: NoSchedule, then NoExecute; trainer-0 goes, the monitor stays.",
            f"kubectl dra drain pool {DRIVER}/{NODE} --ignore-tolerating --yes",
        ),
        Step(
            "Without a kubelet the evicted pods stay Terminating.",
            "kubectl get pods -n demo-maintenance",
        ),
        Step("Maintenance is over: remove every taint kubectl dra made on the driver's devices.", UNTAINT),
    ),
)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m demo.maintenance", description=__doc__.split("\n\n")[0])
    parser.add_argument("--record", action="store_true", help="write the run into docs/kubectl-dra.md")
    args = parser.parse_args(argv)
    target = _target()
    api = Kube(target.kubeconfig)
    player = Player(target.kubectl, target.kubeconfig, echo=print)
    try:
        _setup(player)
        with _operators(list(MAINTENANCE.operators), target):
            player.run(UNTAINT)
            cleanup.clean(api, MAINTENANCE)
            played = player.play(MAINTENANCE)
            if args.record:
                transcripts.write(PAGE, transcript(played), BEGIN)
            cleanup.clean(api, MAINTENANCE, wait=False)
        return 0
    finally:
        player.close()
        api.close()


if __name__ == "__main__":
    sys.exit(main())
