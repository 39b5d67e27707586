"""Command line: ``dra-operators run <operator> [options]`` (also ``python -m operators``).

Each operator package provides ``operators.<name>.operator.DEFINITION``; the options of
``run <name> --help`` come from that operator's settings model.

A configuration error (an unknown operator or flag, a bad value, no usable credentials, a port
in use) is one line, ``dra-operators: error: ...``, and exit code 2: it is what a user at a shell
or a Deployment's log shows, so a traceback would only hide the sentence that says what to fix.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import sys
import typing
from collections.abc import Sequence
from datetime import UTC, datetime

from . import OPERATOR_NAMES, __version__
from .core import settings as settings_mod
from .core.runtime import OperatorDefinition
from .core.settings import ConfigurationError

EXIT_CONFIGURATION = 2

DESCRIPTIONS = {
    "resourceclaim": "ResourceClaims from templates, reservations, deallocation and cleanup",
    "devicetaint": "evicts pods from devices with NoExecute taints; DeviceTaintRule status",
    "poolstatus": "answers ResourcePoolStatusRequests (built-in API or the project CRD)",
    "bindingattacher": "prepares devices with binding conditions and reports readiness",
    "taintselector": "taints devices chosen by DeviceClass or CEL through generated DeviceTaintRules",
    "devicehealth": "taints devices their driver or the kubelet reports unhealthy, within maxUnavailable",
}


class NotImplementedOperator(Exception):
    pass


def load_definition(name: str) -> OperatorDefinition:
    try:
        module = importlib.import_module(f"operators.{name}.operator")
    except ModuleNotFoundError as err:
        if err.name and err.name.startswith(f"operators.{name}"):
            raise NotImplementedOperator(name) from err
        raise
    definition: OperatorDefinition = module.DEFINITION
    return definition


def options_markdown() -> str:
    """The options reference: the common options, then each implemented operator's own."""
    parts = [
        "### Common options (every operator)",
        "",
        settings_mod.markdown_table(settings_mod.OperatorSettings),
    ]
    for name in OPERATOR_NAMES:
        try:
            model = load_definition(name).settings_class
        except NotImplementedOperator:
            continue
        if set(model.model_fields) - set(settings_mod.OperatorSettings.model_fields):
            parts += ["", f"### `{name}`", "", settings_mod.markdown_table(model, only_own=True)]
    return "\n".join(parts)


class _Parser(argparse.ArgumentParser):
    """argparse's errors as one line (it prints the usage first); ``--help`` still shows the usage."""

    def error(self, message: str) -> typing.NoReturn:
        self.exit(EXIT_CONFIGURATION, f"dra-operators: error: {message} (see '{self.prog} --help')\n")


def _fail(message: str) -> int:
    print(f"dra-operators: error: {message}", file=sys.stderr)
    return EXIT_CONFIGURATION


def _top_parser() -> argparse.ArgumentParser:
    listing = "\n".join(f"  {name:<16} {DESCRIPTIONS[name]}" for name in OPERATOR_NAMES)
    parser = _Parser(
        prog="dra-operators",
        description="Kubernetes DRA controllers as out-of-tree operators.",
        epilog=f"operators:\n{listing}\n\n'dra-operators run NAME --help' lists the options of one operator.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    run = sub.add_parser("run", help="run one operator against the current cluster", add_help=False)
    run.add_argument("name", metavar="OPERATOR", nargs="?", help=", ".join(OPERATOR_NAMES))
    run.add_argument("-h", "--help", action="store_true")
    sub.add_parser("list", help="list the operators")
    sub.add_parser("options", help="print every operator's options as Markdown (docs/reference.md)")
    return parser


def _run_parser(name: str, definition: OperatorDefinition) -> argparse.ArgumentParser:
    parser = _Parser(prog=f"dra-operators run {name}", description=DESCRIPTIONS[name])
    settings_mod.add_arguments(parser, definition.settings_class)
    return parser


def parse_settings(
    name: str, argv: Sequence[str], definition: OperatorDefinition | None = None
) -> settings_mod.OperatorSettings:
    """The settings ``dra-operators run <name> <argv>`` runs with (flags, then environment)."""
    definition = definition or load_definition(name)
    options = _run_parser(name, definition).parse_args(list(argv))
    return settings_mod.load(definition.settings_class, options)


def main(argv: Sequence[str] | None = None) -> int:
    args, rest = _top_parser().parse_known_args(argv)
    if args.command == "list":
        for name in OPERATOR_NAMES:
            print(f"{name:<16} {DESCRIPTIONS[name]}")
        return 0
    if args.command == "options":
        print(options_markdown())
        return 0
    if args.command != "run":
        _top_parser().print_help()
        return 2
    if args.name is None:
        if args.help:
            _top_parser().print_help()
            return 0
        return _fail("name an operator: " + ", ".join(OPERATOR_NAMES))
    if args.name not in OPERATOR_NAMES:
        return _fail(f"unknown operator {args.name!r}; choose one of: {', '.join(OPERATOR_NAMES)}")
    try:
        definition = load_definition(args.name)
    except NotImplementedOperator:
        print(f"dra-operators: the {args.name} operator is not implemented yet", file=sys.stderr)
        return 3
    if args.help:
        _run_parser(args.name, definition).print_help()
        return 0
    try:
        settings = parse_settings(args.name, rest, definition)
    except ConfigurationError as err:
        return _fail(f"invalid settings: {err}")
    from .core import gc_tuning, wirejson
    from .core.eventloop import new_event_loop
    from .core.runtime import LEASE_LOST, run

    gc_tuning.tune()
    wirejson.read_what_the_server_reads()
    first = True
    started = datetime.now(UTC)
    try:
        while True:
            with asyncio.Runner(loop_factory=new_event_loop) as runner:
                code = runner.run(run(definition, settings, configure_logging=first, started=started))
            if code != LEASE_LOST:
                return code
            first = False
    except ConfigurationError as err:
        return _fail(str(err))


if __name__ == "__main__":
    sys.exit(main())
