"""``python3 -m stridewise.dump ...``: same as ``python3 -m stridewise dump ...``."""
import sys

from .cli import main

sys.exit(main(sys.argv[1:]))
