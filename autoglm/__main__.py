"""``python -m autoglm``: the same command line as the ``autoglm`` script."""
import sys

from autoglm.cli import main

sys.exit(main())
