"""Exit codes and the errors that lead to them; scripts can tell the cases apart.

=====  ======================================================================================
code   meaning
=====  ======================================================================================
0      done; the answer is on stdout
1      an error: the API is unreachable or refused, the API or the request failed
2      usage: bad arguments (argparse's own exit code)
3      timeout: the API took the request but no operator answered in time
=====  ======================================================================================
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_TIMEOUT = 3


class PluginError(Exception):
    """A failure explained to the user in one message; ``code`` is the exit code."""

    code = EXIT_ERROR


class UsageError(PluginError):
    code = EXIT_USAGE


class NoAnswer(PluginError):
    code = EXIT_TIMEOUT
