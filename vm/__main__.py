"""``python -m vm``: the runtime's command line (see vm.cli). Runtime layer."""

import sys

from vm.cli import main

if __name__ == "__main__":
    sys.exit(main())
