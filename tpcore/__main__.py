"""``python -m tpcore``: the ``tpcore`` command."""

import sys

from tpcore.cli import main

sys.exit(main())
