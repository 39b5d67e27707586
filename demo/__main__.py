"""``python -m demo``: see :mod:`demo.walkthrough`."""

import sys

from demo.walkthrough import main

sys.exit(main())
