"""``python -m lmclient``: the same as the ``lmclient`` command."""

import sys

from ._cli import main

sys.exit(main())
