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

from operators.core import wirejson
from operators.core.credentials import default_namespace, locate_credentials
from operators.core.names import is_dns_subdomain, is_label_value, is_qualified_name
from operators.core.settings import ConfigurationError
from operators.dra.durations import duration_seconds
from operators.dra.taints import DeviceTaintSelector

from . import commands, completion, explain, grants, poolview, previewmodel, taintmodel
from .console import Console
from .errors import EXIT_ERROR, EXIT_OK, PluginError
from .pools import PoolsQuery, ask
from .preview import PreviewQuery, preview
from .session import Session

T = TypeVar("T")
DEFAULT_TIMEOUT = "30s"
DRAIN_TIMEOUT = "5m"
OPERATORS_NAMESPACE = "dra-operators"
CHANGES = ("taint", "drain")


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


def _grace(text: str) -> float:
    try:
        seconds = duration_seconds(text if text[-1:].isalpha() else f"{text}s")
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    if seconds < 0:
        raise argparse.ArgumentTypeError(f"--grace must not be negative, not {text}")
    return seconds


def _object_name(text: str) -> str:
    # Every kind explained is named as a DNS subdomain; another name would not be one object's path.
    if not is_dns_subdomain(text):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an object name: lowercase letters, digits, '-' and '.'"
        )
    return text


def _taint_key(text: str) -> str:
    if not is_qualified_name(text):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a taint key: a qualified name such as example.com/maintenance"
        )
    return text


def _taint_value(text: str) -> str:
    # Checked here so that a typo is a usage error before anything is created; the API server
    # would refuse the rule with 422 after a preview or a drain had begun.
    if not is_label_value(text):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a taint value: at most 63 letters, digits, '-', '_' and '.', "
            "beginning and ending with a letter or digit"
        )
    return text


def _name(text: str) -> str:
    try:
        return taintmodel.check_name(text)
    except PluginError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _pool(text: str) -> DeviceTaintSelector:
    driver, sep, pool = text.partition("/")
    if not sep or not driver or not pool:
        raise argparse.ArgumentTypeError(f"expected DRIVER/POOL, not {text!r}")
    return DeviceTaintSelector(driver=driver, pool=pool)


def _connection() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--kubeconfig",
        help="kubeconfig file (default: $KUBECONFIG, else the in-cluster service account, "
        "else ~/.kube/config)",
    )
    common.add_argument("--context", help="kubeconfig context (default: its current context)")
    common.add_argument("-o", "--output", choices=("json", "yaml"), help="print a document instead of tables")
    return common


def _answer_timeout() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--timeout",
        type=_timeout,
        default=_timeout(DEFAULT_TIMEOUT),
        help=f"how long to wait for the operator's answer (default {DEFAULT_TIMEOUT})",
    )
    return common


def _namespaces() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    scope = common.add_mutually_exclusive_group()
    scope.add_argument(
        "-n", "--namespace", help="show (and, for drain, wait for) only the claims and pods of this namespace"
    )
    scope.add_argument(
        "-A",
        "--all-namespaces",
        action="store_true",
        help="every namespace (the default: taints are cluster-wide)",
    )
    return common


def _asking() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "-y", "--yes", action="store_true", help="do not ask; without a terminal this is required"
    )
    return common


def _targeting(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "target",
        nargs="?",
        type=_selector,
        metavar="driver=D[,pool=P][,device=X]",
        help="the devices by driver, pool and device name (any of them), or just a driver name; "
        "with --class or --selector, only those of the class and expressions",
    )
    parser.add_argument(
        "--class", dest="device_class", metavar="CLASS", help="the devices of this DeviceClass"
    )
    parser.add_argument(
        "--selector",
        dest="cel",
        action="append",
        default=[],
        metavar="CEL",
        help="the devices for which this CEL expression is true, as in a DeviceClass "
        "(repeatable: all must be true)",
    )


DRAIN_EPILOG = """\
How pods leave: the NoSchedule taint keeps new claims off the devices; the NoExecute taint then
makes the devicetaint operator evict the pods whose claims use them. A claim's tolerations
decide, for the taint's key (and value):
  - no matching toleration: the pod is evicted at once;
  - a toleration for NoExecute with tolerationSeconds: the pod stays that many seconds after the
    NoExecute taint was added, then it is evicted;
  - a toleration for NoExecute without tolerationSeconds: the pod stays for good. It counts as
    remaining (exit code 4 at --timeout) unless --ignore-tolerating is given.
--grace gives the pods time to finish on their own between the two taints; the drain goes on to
NoExecute as soon as no pod uses the devices. Pods evicted but not yet gone (Terminating) do not
count as remaining. The taints stay after the drain; `kubectl dra untaint --name NAME` removes them.

Exit codes: 0 drained, 1 error, 2 usage (or no terminal to confirm and no --yes), 4 pods remain.
"""


def _parser() -> argparse.ArgumentParser:
    connection, answer, namespaces, asking = _connection(), _answer_timeout(), _namespaces(), _asking()
    common = [connection, answer]
    parser = argparse.ArgumentParser(
        prog="kubectl dra",
        description="Questions about DRA devices, answered by the dra-operators, and device maintenance.",
        epilog="Exit codes: 0 done, 1 error, 2 usage, 3 no operator answered in time, "
        "4 drain: pods remain after --timeout.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    pools = sub.add_parser(
        "pools",
        parents=common,
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
        parents=common,
        help="which devices, claims and pods a DeviceTaintRule would affect (a dry run)",
        description="Create a DeviceTaintRule with effect None, read the devicetaint operator's dry-run "
        "counts, list the devices, claims and pods behind them, and delete the rule again.",
    )
    taint.add_argument(
        "selector", type=_selector, help="driver=D,pool=P,device=X (any of them), or just a driver name"
    )
    taint.add_argument("--effect", choices=("NoExecute", "NoSchedule"), default="NoExecute")
    taint.add_argument(
        "--key",
        default="dra-operators.io/taint-preview",
        type=_taint_key,
        help="the taint key (tolerations match on it)",
    )
    taint.add_argument("--value", default="", type=_taint_value, help="the taint value")
    why = sub.add_parser(
        "explain",
        parents=common,
        help="why a claim or a pod is where it is (reads only)",
        description="Say in plain words why a ResourceClaim or a Pod is where it is: which request "
        "cannot be allocated and why each device is out of reach (in use, tainted, counters), which "
        "binding condition a device waits for, what holds a claim that is being deleted, which "
        "reserved pod is gone; for the binding attacher's DeviceAttachPolicies and DeviceAttachments, "
        "what holds their deletion and the way out when the attacher is gone. Every statement names "
        "the field it is read from.",
    )
    why.add_argument("kind", choices=tuple(explain.KINDS), help="what to explain")
    why.add_argument("name", type=_object_name, help="its name")
    why.add_argument(
        "-n",
        "--namespace",
        help="its namespace (default: the context's namespace, as kubectl's; for policy and "
        "attachment, the operators' namespace dra-operators)",
    )
    grant = sub.add_parser(
        "grant-driver",
        parents=common,
        help="let the binding attacher write a driver's status.devices entries (its RBAC step)",
        description="Create (server-side apply) a ClusterRole and ClusterRoleBinding that allow the "
        "binding attacher to write the status.devices entries of DRIVER (resourceclaims/driver, "
        "verb arbitrary-node:patch). With -o, print them instead, for a repository of manifests.",
    )
    grant.add_argument("driver", help="the driver name of the DeviceAttachPolicy")
    grant.add_argument(
        "-n",
        "--namespace",
        default=OPERATORS_NAMESPACE,
        help=f"the operators' namespace (default {OPERATORS_NAMESPACE})",
    )
    _maintenance(sub, connection, answer, namespaces, asking)
    shell = sub.add_parser(
        "completion",
        help="print a shell completion script",
        description="Print the completion script of kubectl-dra for bash or zsh, "
        "e.g. `source <(kubectl-dra completion bash)` in ~/.bashrc.",
    )
    shell.add_argument("shell", choices=("bash", "zsh"))
    return parser


def _maintenance(
    sub: Any,
    connection: argparse.ArgumentParser,
    answer: argparse.ArgumentParser,
    namespaces: argparse.ArgumentParser,
    asking: argparse.ArgumentParser,
) -> None:
    taint = sub.add_parser(
        "taint",
        parents=[connection, answer, namespaces, asking],
        help="taint devices (a DeviceTaintRule, or a DeviceTaintSelector for a class or CEL)",
        description="Show what the taint would affect (the taint-preview dry run), ask, then create "
        "a DeviceTaintRule for driver/pool/device, or a DeviceTaintSelector (taintselector operator) "
        "for --class or --selector. Tainting the same devices with the same key again changes the "
        "effect of the first taint. `kubectl dra untaint` removes it.",
    )
    _targeting(taint)
    taint.add_argument(
        "--key",
        default=taintmodel.DEFAULT_KEY,
        type=_taint_key,
        help=f"the taint key (default {taintmodel.DEFAULT_KEY})",
    )
    taint.add_argument("--value", default="", type=_taint_value, help="the taint value")
    taint.add_argument(
        "--effect",
        choices=("NoSchedule", "NoExecute", "None"),
        default="NoSchedule",
        help="NoSchedule keeps new claims off, NoExecute also evicts, None only reports (default NoSchedule)",
    )
    taint.add_argument(
        "--name", type=_name, help="the object's name (default: derived from the devices and key)"
    )
    taint.add_argument("--dry-run", action="store_true", help="show the preview and stop")
    taint.add_argument(
        "--wait", action="store_true", help="follow EvictionInProgress until it is False (at most --timeout)"
    )
    untaint = sub.add_parser(
        "untaint",
        parents=[connection, asking],
        help="remove the taints that kubectl dra taint or drain created",
        description="Find the DeviceTaintRules and DeviceTaintSelectors that carry the label "
        f"{taintmodel.CREATED_BY_LABEL}={taintmodel.CREATED_BY} (narrowed by the arguments: all given "
        "must match), list them, ask, and delete them. Without arguments: all of them.",
    )
    _targeting(untaint)
    untaint.add_argument("--key", type=_taint_key, help="only taints with this key")
    untaint.add_argument("--name", type=_name, help="only this taint (the name taint or drain printed)")
    drain = sub.add_parser(
        "drain",
        help="taint a node's or a pool's devices NoSchedule, then NoExecute, and wait for the pods",
        description="The device counterpart of kubectl drain: preview, ask, taint the devices "
        "NoSchedule, wait --grace, taint them NoExecute, and wait until no pod uses them.",
        epilog=DRAIN_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    what = drain.add_subparsers(dest="drained", required=True, metavar="node|pool")
    for kind, metavar, kind_help in (
        ("node", "NODE", "every pool with a ResourceSlice of this node"),
        ("pool", "DRIVER/POOL", "one pool of one driver"),
    ):
        one = what.add_parser(
            kind,
            parents=[connection, namespaces, asking],
            help=kind_help,
            description=f"Drain {kind_help}.",
            epilog=DRAIN_EPILOG,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        one.add_argument("subject", metavar=metavar, type=_pool if kind == "pool" else str)
        one.add_argument(
            "--key",
            default=taintmodel.DEFAULT_KEY,
            type=_taint_key,
            help=f"the taint key (default {taintmodel.DEFAULT_KEY})",
        )
        one.add_argument("--value", default="", type=_taint_value, help="the taint value")
        one.add_argument(
            "--name", type=_name, help="the taints' name (default: drain-<node> or drain-<pool>)"
        )
        one.add_argument(
            "--grace",
            type=_grace,
            default=0.0,
            metavar="SECONDS",
            help="time between the NoSchedule and the NoExecute taint for pods to finish on their own "
            "(default 0; see below for tolerationSeconds)",
        )
        one.add_argument(
            "--timeout",
            type=_timeout,
            default=_timeout(DRAIN_TIMEOUT),
            help=f"how long to wait after NoExecute for the pods to go (default {DRAIN_TIMEOUT})",
        )
        one.add_argument(
            "--ignore-tolerating",
            action="store_true",
            help="pods that tolerate the NoExecute taint forever may stay: do not wait for them",
        )
        one.add_argument("--dry-run", action="store_true", help="show the preview and stop")


async def _grant(session: Session, documents: list[dict[str, Any]]) -> None:
    for document in documents:
        what = f"{document['kind'].lower()}/{document['metadata']['name']}"
        await session.call(
            f"applying {what}",
            session.client.apply(grants.object_path(document), document, grants.FIELD_MANAGER),
        )
        print(f"{what} applied")


def _default_namespace(args: argparse.Namespace) -> str:
    try:
        return default_namespace(locate_credentials(args.kubeconfig, context=args.context), args.context)
    except ConfigurationError as err:
        raise PluginError(str(err)) from err


async def _with_session(args: argparse.Namespace, work: Callable[[Session], Awaitable[T]]) -> T:
    session = await Session.connect(args.kubeconfig, args.context)
    try:
        await session.check_server_version()
        return await work(session)
    finally:
        await session.close()


def _emit(document: dict[str, Any], output: str) -> None:
    if output == "json":
        sys.stdout.write(json.dumps(document, indent=2) + "\n")
    else:
        sys.stdout.write(yaml.safe_dump(document, sort_keys=False))


def _maintain(args: argparse.Namespace) -> None:
    console = Console(bool(args.output))
    namespace = getattr(args, "namespace", None)
    error: PluginError | None = None
    try:
        if args.command == "taint":
            target = taintmodel.make_target(args.target, args.device_class, args.cel)
            order = commands.TaintOrder(
                target,
                args.name or taintmodel.default_name(target, args.key),
                args.key,
                args.value,
                args.effect,
                args.timeout,
                namespace,
                args.yes,
                args.dry_run,
                args.wait,
            )
            document = asyncio.run(_with_session(args, lambda s: commands.taint(s, order, console)))
        elif args.command == "untaint":
            given = args.target or args.device_class or args.cel
            wanted = taintmodel.Filter(
                args.name,
                taintmodel.make_target(args.target, args.device_class, args.cel) if given else None,
                args.key,
            )
            document = asyncio.run(
                _with_session(args, lambda s: commands.untaint(s, wanted, args.yes, console))
            )
        else:
            drain = commands.DrainOrder(
                args.drained,
                args.subject,
                args.name,
                args.key,
                args.value,
                args.grace,
                args.timeout,
                args.ignore_tolerating,
                namespace,
                args.yes,
                args.dry_run,
            )
            document, error = asyncio.run(_with_session(args, lambda s: commands.drain(s, drain, console)))
    finally:
        console.close()
    if args.output:
        _emit(document, args.output)
    if error is not None:
        raise error


def _run(args: argparse.Namespace) -> None:
    if args.command == "completion":
        sys.stdout.write(completion.script(_parser(), args.shell))
        return
    if args.command in ("taint", "untaint", "drain"):
        _maintain(args)
        return
    if args.command == "pools":
        query = PoolsQuery(tuple(args.driver), args.pool, args.limit, args.api, args.timeout)
        found = asyncio.run(_with_session(args, lambda s: ask(s, query)))
        if args.output:
            _emit(poolview.document(found.api_version, found.answers, found.taints), args.output)
        elif not found.answers and args.pool:
            print(f"No driver publishes a pool named {args.pool}.")
        elif not found.answers:
            print("No ResourceSlices: no DRA driver publishes devices in this cluster.")
        else:
            sys.stdout.write(poolview.render(found.answers, found.taints, found.rules_unread))
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
        if args.kind in ("policy", "attachment"):
            namespace = args.namespace or OPERATORS_NAMESPACE
        else:
            namespace = args.namespace or _default_namespace(args)
        question = explain.ExplainQuery(args.kind, namespace, args.name)
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
    wirejson.read_what_the_server_reads()
    try:
        _run(args)
    except PluginError as err:
        print(f"error: {err}", file=sys.stderr)
        return err.code
    except KeyboardInterrupt:
        placed = " (taints already placed stay: kubectl dra untaint)" if args.command in CHANGES else ""
        print(f"interrupted; temporary objects were deleted{placed}", file=sys.stderr)
        return EXIT_ERROR
    return EXIT_OK
