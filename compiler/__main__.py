"""``python -m compiler``: the ``relayvm`` command line (see compiler.cli). Compiler layer."""

import sys

from compiler.cli import main

if __name__ == "__main__":
    sys.exit(main())
