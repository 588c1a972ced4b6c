# The modules here are chunkwise extensions, imported only where a test names them in
# CHUNKWISE_PLUGINS (tests/test_extensions.py): collecting them (--doctest-modules imports every
# module) would register them in the process of every other test.
collect_ignore_glob = ["throwaway_*.py"]
