import sys

from .cli import main

# ``python -m operators NAME`` is short for ``python -m operators run NAME``.
argv = sys.argv[1:]
if argv and argv[0] not in ("run", "list", "-h", "--help", "--version"):
    argv = ["run", *argv]
sys.exit(main(argv))
