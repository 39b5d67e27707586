"""``python -m operators.kubectl_dra``: the same as the ``kubectl-dra`` executable."""

import sys

from .cli import main

sys.exit(main())
