"""Input and output that every stage shares: atomic, private writes (:mod:`.files`), secrets kept
out of every message (:mod:`.secrets`), the cache folder (:mod:`.cachedir`), chunkwise's own
SQL tables beside a study's (:mod:`.sqltables`), whether a process of this host runs
(:mod:`.liveness`) and the CPUs this one may use (:mod:`.cpus`)."""
