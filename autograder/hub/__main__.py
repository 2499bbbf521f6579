"""``python -m autograder.hub``: the class hub's command line (see :mod:`autograder.hub`)."""

import sys

from autograder.hub import main

sys.exit(main())
