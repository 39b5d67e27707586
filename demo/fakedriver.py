"""``python -m demo.fakedriver apply|delete <folder>``: the stand-in for a DRA driver.

A real DRA driver publishes ResourceSlices for the devices on its nodes, and a kubelet registers
each Node. The demos have neither, so this helper plays both from a folder's ``*-driver.yaml``:

* a Node is created in one POST together with its status (capacity and a Ready condition),
  because ``kubectl apply`` never writes a Node's status and the scheduler places nothing on a
  node without one. An existing Node is left as it is;
* ResourceSlices and DeviceClasses are server-side applied (field manager ``dra-demo-driver``),
  so applying twice is harmless.

``delete`` removes the same objects, Nodes last. The output imitates kubectl's.

Fake nodes stay Ready only where nothing expects a kubelet heartbeat: the embedded control plane
runs without the node-lifecycle controller. Elsewhere they turn NotReady after about 40 s.
"""

from __future__ import annotations

import argparse
import copy
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import yaml

from operators.kubectl_dra.kubeconfig import NoKubeconfig, resolve

FIELD_MANAGER = "dra-demo-driver"
# kind -> (API path of the collection, kubectl's name of the resource); all cluster-scoped.
KINDS: dict[str, tuple[str, str]] = {
    "Node": ("/api/v1/nodes", "node"),
    "ResourceSlice": ("/apis/resource.k8s.io/v1/resourceslices", "resourceslice.resource.k8s.io"),
    "DeviceClass": ("/apis/resource.k8s.io/v1/deviceclasses", "deviceclass.resource.k8s.io"),
}
DELETE_ORDER = ("DeviceClass", "ResourceSlice", "Node")


class Api(Protocol):
    def get_or_none(self, path: str) -> Any: ...
    def create(self, path: str, body: Any) -> Any: ...
    def apply(self, path: str, body: Any, field_manager: str = ...) -> Any: ...
    def delete(self, path: str, uid: str | None = None, missing_ok: bool = True, **params: str) -> Any: ...


class DriverFileError(Exception):
    pass


def driver_file(target: Path) -> Path:
    """The driver manifest of a demo folder (its one ``*-driver.yaml``), or ``target`` itself."""
    if target.is_file():
        return target
    if not target.is_dir():
        raise DriverFileError(f"{target}: no such folder or file")
    found = sorted(target.glob("*-driver.yaml"))
    if len(found) != 1:
        raise DriverFileError(f"{target}: expected exactly one *-driver.yaml, found {len(found)}")
    return found[0]


def load(path: Path) -> list[dict[str, Any]]:
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    for doc in docs:
        if doc.get("kind") not in KINDS:
            raise DriverFileError(
                f"{path}: a fake driver publishes only {', '.join(KINDS)}, not {doc.get('kind')!r}"
            )
        if not doc.get("metadata", {}).get("name"):
            raise DriverFileError(f"{path}: a {doc['kind']} without metadata.name")
    return docs


def node_with_times(node: dict[str, Any], now: datetime) -> dict[str, Any]:
    """The Node as a kubelet would post it: every condition carries heartbeat and transition times."""
    body = copy.deepcopy(node)
    stamp = now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    for condition in body.get("status", {}).get("conditions", []):
        condition.setdefault("lastHeartbeatTime", stamp)
        condition.setdefault("lastTransitionTime", stamp)
    return body


def apply(api: Api, docs: Sequence[dict[str, Any]], say: Callable[[str], None] = print) -> None:
    for doc in docs:
        collection, resource = KINDS[doc["kind"]]
        name = doc["metadata"]["name"]
        if doc["kind"] == "Node":
            if api.get_or_none(f"{collection}/{name}") is not None:
                say(f"{resource}/{name} unchanged")
                continue
            api.create(collection, node_with_times(doc, datetime.now(UTC)))
            say(f"{resource}/{name} created")
        else:
            api.apply(f"{collection}/{name}", doc, field_manager=FIELD_MANAGER)
            say(f"{resource}/{name} serverside-applied")


def delete(api: Api, docs: Sequence[dict[str, Any]], say: Callable[[str], None] = print) -> None:
    for kind in DELETE_ORDER:
        collection, resource = KINDS[kind]
        for doc in docs:
            if doc["kind"] != kind:
                continue
            name = doc["metadata"]["name"]
            if api.delete(f"{collection}/{name}") is not None:
                say(f'{resource} "{name}" deleted')


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m demo.fakedriver",
        description="Publish (apply) or withdraw (delete) the fake Nodes and devices of a demo folder.",
    )
    parser.add_argument("action", choices=("apply", "delete"))
    parser.add_argument("target", type=Path, help="a demo folder (uses its *-driver.yaml) or a manifest")
    parser.add_argument("--kubeconfig", help="default: $KUBECONFIG, then ~/.kube/config")
    args = parser.parse_args(argv)
    try:
        docs = load(driver_file(args.target))
        kubeconfig = resolve(args.kubeconfig)
    except (DriverFileError, NoKubeconfig, OSError, yaml.YAMLError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    from devcluster.kube import ApiError, Kube

    try:
        api = Kube(kubeconfig)
    except Exception as err:  # the loader raises many types for a broken kubeconfig
        print(f"error: cannot use kubeconfig {kubeconfig}: {err}", file=sys.stderr)
        return 1
    try:
        (apply if args.action == "apply" else delete)(api, docs)
    except ApiError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    finally:
        api.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
