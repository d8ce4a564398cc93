import sys

from fxviz.frontends.cli.entry import main

sys.exit(main())
