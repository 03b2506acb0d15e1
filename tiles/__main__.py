"""python -m tiles ... is the `tiles` command."""
import sys

from .cli import main

sys.exit(main())
