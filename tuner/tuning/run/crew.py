"""Who works a run's studies and until when: the workers' count and options, where they run (here or
on a Dask cluster) and the time budget they share. :mod:`.study_run` tells each study's story with it;
what a crew is does not change with the study it works."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

from ..._io.cpus import usable_cpus
from ..study import defaults
from .workers import WorkerOptions


@dataclass(frozen=True)
class Crew:
    """Who works a run's studies: ``jobs`` workers, each started with ``worker`` (its study filled
    in per study), here or on the Dask cluster at ``scheduler``, within ``timeout`` seconds."""

    worker: WorkerOptions
    jobs: int = defaults.JOBS
    backend: str = "local"
    scheduler: str | None = None
    timeout: float | None = None
    #: Spend the whole budget whatever the futility checkpoint shows (see :meth:`.study_run.StudyRun.work`).
    full_budget: bool = False

    @property
    def storage(self) -> str:
        return self.worker.storage

    @property
    def deadline(self) -> float | None:
        return self.worker.deadline

    def time_left(self) -> bool:
        return self.deadline is None or time.time() < self.deadline

    def workers_for(self, study: str) -> list[WorkerOptions]:
        return [dataclasses.replace(self.worker, study=study, threads=max(1, usable_cpus() // self.jobs))
                for _ in range(self.jobs)]

    def describe(self) -> str:
        workers = f"{self.jobs} worker{'s' if self.jobs > 1 else ''}"
        return workers + (f" on the Dask cluster at {self.scheduler}" if self.backend == "dask" else "")
