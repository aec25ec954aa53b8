"""`tfcert bench`: the benchmark suite (bench.py drives it; benchphase.py is one phase as a
process of its own; peers.py what it is measured against; floatrun.py a float run of a model).
A tool room: it imports the kernel, the library and the bottom, never the command line."""
