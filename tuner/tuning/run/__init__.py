"""How a study runs: the runner, its workers, the ledger of claims, one trial and the lost ones
reclaimed, the progress bar, and the dry run's plan."""
