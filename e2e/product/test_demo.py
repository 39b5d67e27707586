"""The demo folders are the documentation, and these tests keep them honest.

Each test plays one folder of ``demo/`` with the same :class:`demo.player.Player` and the same
:mod:`demo.scenarios` as ``python -m demo``: the numbered manifests in order, the fake driver,
and every ``kubectl wait`` of the README, which fails the test where the story stops. The
operators run under their own ServiceAccounts with the shipped RBAC, only the ones a scenario
needs (module-scoped, started on first use). Then the test checks what the folder's README says
under "The outcome", reading the objects from the API. ``kubectl dra`` runs as a real kubectl
plugin: ``kubectl dra ...`` finding ``kubectl-dra`` on ``$PATH``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from demo import cleanup
from demo.player import Player
from demo.scenarios import SCENARIOS, Scenario
from demo.walkthrough import crd_names
from devcluster.kube import Kube
from e2e import harness
from e2e.product.scenarios import STORIES
from operators.kubectl_dra.grants import grant_name

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def player(cluster: harness.Cluster) -> Iterator[Player]:
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "--field-manager=e2e-demo", "-k", "crds/")
    cluster.kubectl("wait", "--for=condition=Established", "--timeout=30s", *crd_names())
    played = Player(cluster.kubectl_path, cluster.kubeconfig)
    yield played
    played.close()


DEMO_DRIVER = "gpu.fabric.example.com"
"""The binding-conditions demo's driver (demo/binding-conditions/1-driver.yaml)."""


def _grant(cluster: harness.Cluster, driver: str) -> None:
    done = cluster.kubectl_dra("grant-driver", driver)
    assert done.returncode == 0, done.stderr


def _revoke(cluster: harness.Cluster, driver: str) -> None:
    name = grant_name(driver)
    cluster.kubectl("delete", "--ignore-not-found", f"clusterrole/{name}", f"clusterrolebinding/{name}")


@pytest.fixture(scope="module")
def operators(
    cluster: harness.Cluster, operator_identity: Callable[[str], str]
) -> Iterator[Callable[[str], harness.RunningOperator]]:
    """``operators(name)`` starts the operator once for the module, under its ServiceAccount."""
    running: dict[str, harness.RunningOperator] = {}
    with contextlib.ExitStack() as stack:

        def get(name: str) -> harness.RunningOperator:
            if name not in running:
                extra: tuple[str, ...] = ()
                if name == "bindingattacher":
                    # The manifests grant no driver: the demo's is granted as a user grants theirs.
                    stack.callback(_revoke, cluster, DEMO_DRIVER)
                    _grant(cluster, DEMO_DRIVER)
                if name == "bindingattacher" and cluster.binding_timeout:
                    extra = ("--binding-timeout", cluster.binding_timeout)
                running[name] = stack.enter_context(
                    harness.operator_running(
                        name, operator_identity(name), cluster.workdir, "subprocess", extra
                    )
                )
            return running[name]

        yield get
        crashed = [f"{n}:\n{op.log()[-3000:]}" for n, op in running.items() if not op.alive()]
        # Each operator takes ~5 s to shut down; one after the other that would be 20 s.
        with ThreadPoolExecutor() as pool:
            list(pool.map(lambda op: op.stop(), running.values()))
        assert not crashed, "operators exited on their own during the demo tests: " + "\n".join(crashed)


@pytest.fixture
def scenario(
    request: pytest.FixtureRequest,
    api: Kube,
    operators: Callable[[str], harness.RunningOperator],
) -> Iterator[Scenario]:
    """The scenario named by the test's parameter, its operators running, cleaned before and after."""
    chosen = SCENARIOS[request.param]
    for name in chosen.operators:
        operators(name)
    cleanup.clean(api, chosen)
    yield chosen
    cleanup.clean(api, chosen, wait=False)


@pytest.mark.parametrize("scenario", list(STORIES), indirect=True)
def test_story(api: Kube, player: Player, scenario: Scenario) -> None:
    STORIES[scenario.name](api, player, scenario)
