"""``kubectl dra``: the command line (a kubectl plugin by krew's naming: an executable
``kubectl-dra`` on ``$PATH`` makes ``kubectl dra ...`` run it).

kubectl passes no global flags to plugins (``kubectl --kubeconfig x dra`` is refused), so every
subcommand takes ``--kubeconfig`` and ``--context`` itself; without them the credentials are found
as the operators find them (:func:`operators.core.credentials.locate_credentials`: ``$KUBECONFIG``,
the in-cluster service account, ``~/.kube/config``). Exit codes: see :mod:`.errors`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import yaml

from operators.dra.durations import duration_seconds
from operators.dra.taints import DeviceTaintSelector

from . import explain, grants, poolview, previewmodel
from .errors import EXIT_ERROR, EXIT_OK, PluginError
from .pools import PoolsQuery, ask
from .preview import PreviewQuery, preview
from .session import Session

T = TypeVar("T")
DEFAULT_TIMEOUT = "30s"


def _timeout(text: str) -> float:
    try:
        seconds = duration_seconds(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"--timeout must be positive, not {text}")
    return seconds


def _limit(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--limit needs a whole number, not {text!r}") from None
    if not 1 <= value <= 1000:
        raise argparse.ArgumentTypeError(f"--limit must be between 1 and 1000, not {value}")
    return value


def _selector(text: str) -> DeviceTaintSelector:
    try:
        return previewmodel.parse_selector(text)
    except PluginError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--kubeconfig",
        help="kubeconfig file (default: $KUBECONFIG, else the in-cluster service account, "
        "else ~/.kube/config)",
    )
    common.add_argument("--context", help="kubeconfig context (default: its current context)")
    common.add_argument("-o", "--output", choices=("json", "yaml"), help="print a document instead of tables")
    common.add_argument(
        "--timeout",
        type=_timeout,
        default=_timeout(DEFAULT_TIMEOUT),
        help=f"how long to wait for the operator's answer (default {DEFAULT_TIMEOUT})",
    )
    parser = argparse.ArgumentParser(
        prog="kubectl dra",
        description="Questions about DRA devices, answered by the dra-operators.",
        epilog="Exit codes: 0 done, 1 error, 2 usage, 3 no operator answered in time.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    pools = sub.add_parser(
        "pools",
        parents=[common],
        help="devices per pool: total, allocated, available, partitions, shared capacity",
        description="Ask the poolstatus operator about every pool of a driver (default: every driver "
        "that publishes ResourceSlices) through a temporary ResourcePoolStatusRequest.",
    )
    pools.add_argument("--driver", action="append", default=[], help="a driver name (repeatable)")
    pools.add_argument("--pool", help="only this pool")
    pools.add_argument(
        "--limit", type=_limit, help="at most this many pools per driver (1-1000; server default 100)"
    )
    pools.add_argument(
        "--api",
        choices=("auto", "crd", "builtin"),
        default="auto",
        help="request API: the project CRD dra-operators.io/v1alpha1 or the built-in "
        "resource.k8s.io/v1alpha3 (default auto: the CRD when installed)",
    )
    taint = sub.add_parser(
        "taint-preview",
        parents=[common],
        help="which devices, claims and pods a DeviceTaintRule would affect (a dry run)",
        description="Create a DeviceTaintRule with effect None, read the devicetaint operator's dry-run "
        "counts, list the devices, claims and pods behind them, and delete the rule again.",
    )
    taint.add_argument(
        "selector", type=_selector, help="driver=D,pool=P,device=X (any of them), or just a driver name"
    )
    taint.add_argument("--effect", choices=("NoExecute", "NoSchedule"), default="NoExecute")
    taint.add_argument(
        "--key", default="dra-operators.io/taint-preview", help="the taint key (tolerations match on it)"
    )
    taint.add_argument("--value", default="", help="the taint value")
    why = sub.add_parser(
        "explain",
        parents=[common],
        help="why a claim or a pod is where it is (reads only)",
        description="Say in plain words why a ResourceClaim or a Pod is where it is: which request "
        "cannot be allocated and why each device is out of reach (in use, tainted, counters), which "
        "binding condition a device waits for, what holds a claim that is being deleted, which "
        "reserved pod is gone. Every statement names the field it is read from.",
    )
    why.add_argument("kind", choices=("claim", "pod"), help="what to explain")
    why.add_argument("name", help="its name")
    why.add_argument("-n", "--namespace", default="default", help="its namespace (default: default)")
    grant = sub.add_parser(
        "grant-driver",
        parents=[common],
        help="let the binding attacher write a driver's status.devices entries (its RBAC step)",
        description="Create (server-side apply) a ClusterRole and ClusterRoleBinding that allow the "
        "binding attacher to write the status.devices entries of DRIVER (resourceclaims/driver, "
        "verb arbitrary-node:patch). With -o, print them instead, for a repository of manifests.",
    )
    grant.add_argument("driver", help="the driver name of the DeviceAttachPolicy")
    grant.add_argument(
        "-n", "--namespace", default="dra-operators", help="the operators' namespace (default dra-operators)"
    )
    return parser


async def _grant(session: Session, documents: list[dict[str, Any]]) -> None:
    for document in documents:
        what = f"{document['kind'].lower()}/{document['metadata']['name']}"
        await session.call(
            f"applying {what}",
            session.client.apply(grants.object_path(document), document, grants.FIELD_MANAGER),
        )
        print(f"{what} applied")


async def _with_session(args: argparse.Namespace, work: Callable[[Session], Awaitable[T]]) -> T:
    session = await Session.connect(args.kubeconfig, args.context)
    try:
        return await work(session)
    finally:
        await session.close()


def _emit(document: dict[str, Any], output: str) -> None:
    if output == "json":
        sys.stdout.write(json.dumps(document, indent=2) + "\n")
    else:
        sys.stdout.write(yaml.safe_dump(document, sort_keys=False))


def _run(args: argparse.Namespace) -> None:
    if args.command == "pools":
        query = PoolsQuery(tuple(args.driver), args.pool, args.limit, args.api, args.timeout)
        api_version, answers = asyncio.run(_with_session(args, lambda s: ask(s, query)))
        if args.output:
            _emit(poolview.document(api_version, answers), args.output)
        elif not answers and args.pool:
            print(f"No driver publishes a pool named {args.pool}.")
        elif not answers:
            print("No ResourceSlices: no DRA driver publishes devices in this cluster.")
        else:
            sys.stdout.write(poolview.render(answers))
        return
    if args.command == "grant-driver":
        documents = grants.driver_grant(args.driver, args.namespace)
        if args.output == "json":
            _emit({"apiVersion": "v1", "kind": "List", "items": documents}, "json")
        elif args.output:
            sys.stdout.write(yaml.safe_dump_all(documents, sort_keys=False))
        else:
            asyncio.run(_with_session(args, lambda s: _grant(s, documents)))
        return
    if args.command == "explain":
        question = explain.ExplainQuery(args.kind, args.namespace, args.name)
        findings = asyncio.run(_with_session(args, lambda s: explain.explain(s, question)))
        if args.output:
            _emit(explain.document(question, findings), args.output)
        else:
            sys.stdout.write(explain.render(question, findings))
        return
    request = PreviewQuery(args.selector, args.key, args.value, args.effect, args.timeout)
    result = asyncio.run(_with_session(args, lambda s: preview(s, request)))
    if args.output:
        _emit(previewmodel.document(result), args.output)
    else:
        sys.stdout.write(previewmodel.render(result))


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        _run(args)
    except PluginError as err:
        print(f"error: {err}", file=sys.stderr)
        return err.code
    except KeyboardInterrupt:
        print("interrupted; temporary objects were deleted", file=sys.stderr)
        return EXIT_ERROR
    return EXIT_OK
