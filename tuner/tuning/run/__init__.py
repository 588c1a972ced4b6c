"""How a study runs: the run, its workers, the ledger of claims, one trial, progress."""
