"""``python -m autoglm``: the same command line as the ``autoglm`` script."""
import sys

from autoglm.cli.main import main

sys.exit(main())
