"""Exit codes and the errors that lead to them; scripts can tell the cases apart.

=====  ======================================================================================
code   meaning
=====  ======================================================================================
0      done; the answer is on stdout
1      an error: the API is unreachable or refused, the API or the request failed; or the
       question before a change was not answered yes
2      usage: bad arguments (argparse's own exit code), or a change asked for without a
       terminal to confirm it and without ``--yes``
3      timeout: the API took the request but no operator answered in time
4      pods remain: ``drain`` ended at its time-out with pods still using the devices
=====  ======================================================================================
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_TIMEOUT = 3
EXIT_PODS_REMAIN = 4


class PluginError(Exception):
    """A failure explained to the user in one message; ``code`` is the exit code."""

    code = EXIT_ERROR


class Forbidden(PluginError):
    """The API refused the credentials' user (403): a question that is only an extra can be left out."""


class UsageError(PluginError):
    code = EXIT_USAGE


class NoAnswer(PluginError):
    code = EXIT_TIMEOUT


class PodsRemain(PluginError):
    """``drain``: pods still use the devices at the time-out; ``pods`` names them."""

    code = EXIT_PODS_REMAIN

    def __init__(self, message: str, pods: list[str]) -> None:
        super().__init__(message)
        self.pods = pods
