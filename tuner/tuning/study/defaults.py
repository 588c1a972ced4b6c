"""What a study does unless told otherwise: the defaults every entry point shares (study files,
the command line, the Python API and worker processes), in one place."""

#: Trials a run adds to each corpus's study.
TRIALS = 30
#: The target of a run bounded by its time budget only (the budget ends it long before).
UNBOUNDED_TRIALS = 100_000
#: Worker processes sharing each study on this machine.
JOBS = 1
#: The run's base seed (worker ``i`` samples with ``SEED + i``).
SEED = 0
#: Seconds between a worker's heartbeats, and how long a silent worker on another host stays alive.
HEARTBEAT_INTERVAL_S = 10
GRACE_PERIOD_S = 30
#: Share of each corpus's questions held out of the search for the held-out check, and its most.
VALIDATION = 0.25
MAX_VALIDATION = 0.5
#: Share of a time budget after which a run that would spend all of it judges whether the search
#: is worth the rest (:mod:`tuner.tuning.outcome.futility`), and stops when it is not.
FUTILITY_CHECK_AT = 0.5
#: How often a trial lost with its worker is retried with the same parameters.
MAX_RETRY = 3
#: Where a run's workers run: ``local`` (this machine, ``jobs`` processes) or ``dask`` (a cluster).
RUN_BACKENDS = ("local", "dask")
