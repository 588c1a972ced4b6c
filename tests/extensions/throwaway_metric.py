"""A throwaway metric, a count that is better when smaller, declared in this one file: how many
chunks a reader passes over before the first that holds part of the answer (all ``k`` when none
does). Its utility is one half at 2 chunks (``half``); a study may set another
(``scales: {chunks_before_hit_half: 4}``).

Loaded as any extension is (``CHUNKWISE_PLUGINS=throwaway_metric``); nothing else in chunkwise names it.
"""

import numpy as np

from tuner.evaluation import Metric, register_metric


def chunks_before_hit(run) -> np.ndarray:
    """Per question and cut-off ``k``: ``1 / MRR - 1`` where a chunk holds the answer, else ``k``."""
    mrr = run.scores.mrr
    ks = np.arange(1, mrr.shape[1] + 1, dtype=np.float64)
    return np.where(mrr > 0, 1.0 / np.where(mrr > 0, mrr, 1.0) - 1.0, ks)


register_metric(Metric("chunks_before_hit", "chunks before the answer", higher_is_better=False, count=True,
                       half=2.0, compute=chunks_before_hit))
