"""``python -m vm``: the runtime's command line (see vm.cli). Runtime layer."""

import sys

from vm.cli import main

sys.exit(main())
