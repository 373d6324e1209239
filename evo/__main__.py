import sys

from evo.app.cli import main

sys.exit(main())
