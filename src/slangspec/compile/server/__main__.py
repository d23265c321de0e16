"""``python -m slangspec.compile.server``: the compile server in the foreground."""

import sys

from .serve import main

sys.exit(main())
