"""The command line: `tfcert` (main.py parses the arguments and runs the command), the command
modules of InfoFlow and the experiments, what the commands print and draw, and the pytest
plugin. The top room: it may import every other (docs/architecture.md)."""
