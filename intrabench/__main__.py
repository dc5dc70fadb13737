"""``python -m intrabench``: the same as the ``intrabench`` command."""

import sys

from intrabench.cli import main

if __name__ == "__main__":
    sys.exit(main())
