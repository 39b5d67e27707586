"""``kubectl dra completion bash|zsh``: shell completion generated from the argparse parser, so a
new subcommand or option completes without touching this module.

The script completes the ``kubectl-dra`` executable (and ``kubectl dra`` where kubectl hands
plugin completion to it); zsh loads the same script through ``bashcompinit``. Pure: text out.
"""

from __future__ import annotations

import argparse
import shlex
from dataclasses import dataclass, field

FILE_OPTIONS = ("--kubeconfig",)


@dataclass
class Node:
    """One command (``""``, ``"drain"``, ``"drain pool"``): what may follow it."""

    path: str
    commands: list[str] = field(default_factory=list)
    options: list[str] = field(default_factory=list)
    choices: dict[str, list[str]] = field(default_factory=dict)


def tree(parser: argparse.ArgumentParser, path: str = "") -> list[Node]:
    node = Node(path)
    nodes = [node]
    for action in parser._actions:  # argparse has no public API to walk a parser
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                node.commands.append(name)
                nodes += tree(sub, f"{path} {name}".strip())
            continue
        if not action.option_strings:
            if action.choices:
                node.commands += [str(c) for c in action.choices]
            continue
        node.options += [
            o for o in action.option_strings if o.startswith("--") or len(action.option_strings) == 1
        ]
        if action.choices:
            for option in action.option_strings:
                node.choices[option] = [str(c) for c in action.choices]
    return nodes


def _words(values: list[str]) -> str:
    return shlex.quote(" ".join(values))


def bash(parser: argparse.ArgumentParser, function: str = "_kubectl_dra") -> str:
    nodes = tree(parser)
    descend = [
        f'            "{n.path.rsplit(" ", 1)[0] if " " in n.path else ""}/{n.path.rsplit(" ", 1)[-1]}") '
        f'path="{n.path}" ;;'
        for n in nodes
        if n.path
    ]
    per_path = []
    for n in nodes:
        cases = [
            f'                {option}) COMPREPLY=($(compgen -W {_words(values)} -- "$cur")); return ;;'
            for option, values in n.choices.items()
        ]
        cases += [
            f'                {option}) COMPREPLY=($(compgen -f -- "$cur")); return ;;'
            for option in FILE_OPTIONS
            if option in n.options
        ]
        per_path.append(
            "\n".join(
                [
                    f'        "{n.path}")',
                    '            case "$prev" in',
                    *cases,
                    "            esac",
                    f"            words={_words(n.commands + n.options)} ;;",
                ]
            )
        )
    return "\n".join(
        [
            "# kubectl dra completion: source it, e.g. `source <(kubectl-dra completion bash)`.",
            f"{function}() {{",
            '    local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}" path="" words="" i',
            "    local start=1",
            '    [[ "${COMP_WORDS[0]}" == kubectl && "${COMP_WORDS[1]}" == dra ]] && start=2',
            "    for ((i = start; i < COMP_CWORD; i++)); do",
            '        case "$path/${COMP_WORDS[i]}" in',
            *descend,
            "        esac",
            "    done",
            '    case "$path" in',
            *per_path,
            "    esac",
            '    COMPREPLY=($(compgen -W "$words" -- "$cur"))',
            "}",
            f"complete -F {function} kubectl-dra",
            "",
        ]
    )


def zsh(parser: argparse.ArgumentParser) -> str:
    return "\n".join(
        [
            "# kubectl dra completion for zsh: source it, e.g. `source <(kubectl-dra completion zsh)`.",
            "autoload -U +X bashcompinit && bashcompinit",
            bash(parser),
        ]
    )


def script(parser: argparse.ArgumentParser, shell: str) -> str:
    return bash(parser) if shell == "bash" else zsh(parser)
