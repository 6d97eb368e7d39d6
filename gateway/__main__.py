"""``python -m gateway`` is ``kgw``."""

import sys

from .cli import main

sys.exit(main())
