"""Input and output that every stage shares: atomic, private writes (:mod:`.files`), secrets kept
out of every message (:mod:`.secrets`), the cache folder (:mod:`.cachedir`) and chunkwise's own
SQL tables beside a study's (:mod:`.sqltables`)."""
