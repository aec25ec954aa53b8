import sys

from tfcert.main import main

sys.exit(main())
