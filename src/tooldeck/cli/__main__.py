"""``python -m tooldeck.cli``: the same as the ``tooldeck`` command."""

import sys

from tooldeck.cli.main import main

sys.exit(main())
