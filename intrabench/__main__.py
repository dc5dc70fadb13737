"""``python -m intrabench``: the same as the ``intrabench`` command."""

import sys

from intrabench.cli import command

if __name__ == "__main__":
    sys.exit(command())
