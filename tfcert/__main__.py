import sys

from tfcert.cli.main import main

sys.exit(main())
