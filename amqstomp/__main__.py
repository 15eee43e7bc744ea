"""``python -m amqstomp``: the command line (see :mod:`amqstomp.cli`)."""
import sys

from .cli import main

sys.exit(main())
