"""``python -m dpstats`` runs the command line."""

import sys

from dpstats.cli import main

sys.exit(main())
