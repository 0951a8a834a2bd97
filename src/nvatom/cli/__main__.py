"""``python -m nvatom.cli``: the ``nvatom`` command."""

import sys

from nvatom.cli import main

sys.exit(main())
