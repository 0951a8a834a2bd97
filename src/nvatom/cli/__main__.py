"""``python -m nvatom.cli``: the ``nvatom`` command."""

import sys

from nvatom.cli import main

if __name__ == "__main__":  # importing the module (pkgutil walks, docs tools) runs nothing
    sys.exit(main())
