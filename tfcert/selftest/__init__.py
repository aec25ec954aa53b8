"""`tfcert selftest`: the mutation campaign (selftest.py) and its independent judge (oracle.py,
which shares no code with verify/). A tool room: it imports the kernel, the library and the
bottom, never the command line."""
