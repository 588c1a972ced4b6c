"""Low-fidelity evaluation: score a configuration against a sample of its distractors.

Chunking a corpus is cheap; embedding every chunk is what a trial pays for. Most chunks of
a large corpus hold no reference unit of any question: they matter only as *distractors*,
the chunks a retriever must rank below the right ones. A low-fidelity evaluation embeds and
indexes every chunk that holds a reference unit (at any of its copies) and a stable sample
of the others, then scores exactly as a full one does (one metric implementation); only the
index is smaller.

**The sample rule** is the same for every configuration of a study, so scores at one
fidelity are comparable across trials: each document is cut into blocks of
``block_chars`` characters, each block is kept with probability ``fraction`` by a seeded
hash of (corpus, document, block), and a distractor chunk is indexed when the block under
its middle character is kept. Every configuration so sees the same part of the corpus
text as distractors, whatever its chunk size. Samples are nested (a block kept at 10% is
kept at 30%): a trial promoted from one fidelity to the next embeds only the added chunks,
the others come from the embedding cache.

**Promotion** follows asynchronous successive halving (Li et al., "A System for Massively
Parallel Hyperparameter Tuning", MLSys 2020), with the rule of Optuna's
``SuccessiveHalvingPruner``: a trial that finished rung ``r`` goes on to the next rung
when its score is among the best ``1/reduction`` of all scores recorded at rung ``r`` so
far, itself included; with fewer than ``reduction`` scores, only when it is the best so far.

Example::

    >>> fidelity = Fidelity(rungs=(0.1, 0.3, 1.0), reduction=3)
    >>> fidelity.multi
    True
    >>> promoted(0.8, [0.8, 0.5, 0.7, 0.2, 0.9, 0.1], reduction=3)  # top 2 of 6: 0.9 and 0.8
    True
    >>> promoted(0.7, [0.8, 0.5, 0.7, 0.2, 0.9, 0.1], reduction=3)
    False
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..chunkers import Chunk
from ..errors import InvalidParameterError
from ..schema import check_keys, check_settings, invalid, setting

#: Characters per sampling block: about one typical chunk (250-500 tokens) of English prose.
BLOCK_CHARS = 2000
#: The proxies a first rung may score with, each in words.
PROXY_LABELS = {"late": "late-chunking"}
PROXIES = tuple(PROXY_LABELS)
#: What a proxy's scores mean, stored with a study's fidelity and compared on resume: 2 since a proxy
#: pools only what the model reads of each chunk embedded alone (its first window of word pieces, see
#: :mod:`tuner.embedding.late`). A study stored before (no version: 1, every token of a chunk pooled)
#: is not resumed with this proxy: its proxy scores and the new ones would rank the same chunkings apart.
PROXY_VERSION = 2


@dataclass(frozen=True)
class Fidelity:
    """The rungs a trial climbs and how many trials each one lets through.

    Args:
        rungs: increasing fractions of the distractors indexed at each rung, the last one
            ``1.0`` (full fidelity, the only rung whose trials complete). ``(1.0,)`` turns
            multi-fidelity off.
        reduction: a trial is promoted when it is in the best ``1/reduction`` of its rung
            (>= 2).
        proxy: ``"late"``: a first rung scored with late-chunking vectors of the study's embedder
            (one pass over the corpus per embedder, then about what BM25 costs per chunking).
            A trial scored by the proxy stops there; when the run's trials are done, the
            ``confirm`` best of them by proxy score are evaluated again at full fidelity
            (:mod:`tuner.tuning.search.confirmations`). The rungs serve the configurations the
            proxy cannot score (a provider without token embeddings).
        confirm: how many proxy-scored configurations a run confirms at full fidelity (>= 1).
        seed: seeds the distractor sample (the same for every trial of a study).
        block_chars: the sampling block (see the module docstring).
    """

    rungs: tuple[float, ...] = (1.0,)
    reduction: int = setting(3, int, low=2)
    seed: int = setting(0, int)
    block_chars: int = setting(BLOCK_CHARS, int, low=1)
    #: A first rung before ``rungs``, scored with a proxy of the embedder on the whole index:
    #: ``"late"`` pools each chunk's vector from its documents' token embeddings, computed once
    #: per embedder (see :mod:`tuner.embedding.late`); None: no proxy rung.
    proxy: str | None = setting(None, str, choices=PROXIES, optional=True)
    #: Behind a proxy: the best configurations by proxy score that a run confirms at full fidelity.
    confirm: int = setting(3, int, low=1)
    #: :data:`PROXY_VERSION`, which a study stores (not a setting a study file gives).
    proxy_version: int = field(default=PROXY_VERSION, compare=True)

    def __post_init__(self) -> None:
        rungs = tuple(self.rungs)
        object.__setattr__(self, "rungs", rungs)
        bad = [r for r in rungs if isinstance(r, bool) or not isinstance(r, (int, float)) or not 0 < r <= 1]
        if not rungs or bad or rungs[-1] != 1.0 or any(a >= b for a, b in itertools.pairwise(rungs)):
            raise invalid("fidelity.rungs", list(rungs),
                          "increasing fractions in (0, 1] ending at 1.0, e.g. [0.1, 0.3, 1.0]")
        check_settings(self, "fidelity")

    @property
    def multi(self) -> bool:
        """Whether trials start below full fidelity."""
        return len(self.rungs) > 1 or self.proxy is not None

    def describe(self) -> str:
        """How a trial climbs, in words.

        >>> Fidelity(rungs=(1.0,), proxy="late", confirm=2).describe()
        'fidelity: a late-chunking proxy first, then its best 2 confirmed at full fidelity'
        >>> Fidelity(rungs=(0.1, 1.0), reduction=4).describe()
        'fidelity: rungs 0.1, 1 (best 1/4 climb)'
        >>> FULL.describe()
        'full fidelity'
        """
        if not self.multi:
            return "full fidelity"
        if self.proxy:
            said = (f"fidelity: a {PROXY_LABELS.get(self.proxy, self.proxy)} proxy first, then its best "
                    f"{self.confirm} confirmed at full fidelity")
            if len(self.rungs) > 1:  # for what the proxy cannot score
                said += f" (rungs {', '.join(f'{r:g}' for r in self.rungs)} where it cannot score)"
            return said
        return f"fidelity: rungs {', '.join(f'{r:g}' for r in self.rungs)} (best 1/{self.reduction} climb)"

    def expected_share(self, trials: int = 1) -> float:
        """The expected share of a full-fidelity trial's distractor embedding a trial pays, when
        ``1/reduction`` of the trials reaching each rung climb to the next one (the chunks that
        hold references come on top: every rung indexes them). Behind a proxy, a run of
        ``trials`` trials confirms ``confirm`` of them at full fidelity.

        >>> round(Fidelity(rungs=(0.1, 0.3, 1.0), reduction=3).expected_share(), 3)
        0.244
        >>> Fidelity(proxy="late", confirm=3).expected_share(trials=60)
        0.05
        """
        if self.proxy is not None:
            return min(1.0, self.confirm / max(1, trials))
        share, below = 0.0, 0.0
        for level, fraction in enumerate(self.rungs):
            share += (fraction - below) / self.reduction ** level
            below = fraction
        return share

    def to_dict(self) -> dict[str, Any]:
        out = {"rungs": list(self.rungs), "reduction": self.reduction, "seed": self.seed,
               "block_chars": self.block_chars}
        if self.proxy is not None:  # written only when on: a study stored before proxies reads the same
            out["proxy"] = self.proxy
            out["confirm"] = self.confirm
            out["proxy_version"] = self.proxy_version
        return out

    @classmethod
    def from_stored(cls, data: dict[str, Any]) -> Fidelity:
        """The fidelity a study stored (:meth:`to_dict`): a proxy stored without its version scored
        every token of a chunk (version 1)."""
        data = dict(data)
        version = data.pop("proxy_version", 1 if data.get("proxy") is not None else PROXY_VERSION)
        return dataclasses.replace(cls.from_dict(data), proxy_version=int(version))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Fidelity:
        check_keys(data, "fidelity", ("rungs", "reduction", "seed", "block_chars", "proxy", "confirm"))
        return cls(**{**data, "rungs": tuple(data.get("rungs", (1.0,)))})


FULL = Fidelity()


def block_kept(corpus: str, document: str, block: int, fraction: float, seed: int) -> bool:
    """Whether a block is in the sample at ``fraction`` (nested: kept at f, kept at every f' > f)."""
    if fraction >= 1.0:
        return True
    digest = hashlib.blake2b(f"{seed}\x1f{corpus}\x1f{document}\x1f{block}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64 < fraction


def distractor_sample(chunks: Sequence[Chunk], chunk_corpora: Sequence[str], fraction: float, *, seed: int = 0,
                      block_chars: int = BLOCK_CHARS) -> np.ndarray:
    """Which chunks the sample keeps: those whose middle character lies in a kept block."""
    kept = np.ones(len(chunks), dtype=bool)
    if fraction >= 1.0:
        return kept
    decided: dict[tuple[str, str, int], bool] = {}
    for i, (chunk, corpus) in enumerate(zip(chunks, chunk_corpora)):
        block = (chunk.start_index + chunk.end_index) // 2 // block_chars
        key = (corpus, chunk.document, block)
        if key not in decided:
            decided[key] = block_kept(corpus, chunk.document, block, fraction, seed)
        kept[i] = decided[key]
    return kept


def holding_references(references: Sequence[Sequence[Sequence[tuple[int, int]]]], starts: np.ndarray,
                       ends: np.ndarray, space_size: int) -> np.ndarray:
    """Which chunks hold at least one unit of some reference, at any of its occurrences.

    Args:
        references: per query, per reference, the ``[a, b)`` intervals of its occurrences on
            the unit line (as :func:`tuner.evaluation.metrics.query_references` gives them).
        starts, ends: the chunks' spans on the same line, shape ``(n_chunks, max_spans)``
            (empty spans have ``start == end``).
        space_size: the line's length.
    """
    marks = np.zeros(space_size + 1, dtype=np.int64)
    for query in references:
        for occurrences in query:
            for a, b in occurrences:
                if b > a:
                    marks[a] += 1
                    marks[b] -= 1
    covered = np.cumsum(marks)[:-1] > 0
    prefix = np.concatenate([[0], np.cumsum(covered)])
    inside = prefix[ends] - prefix[starts]
    return (inside > 0).any(axis=1) if inside.size else np.zeros(len(starts), dtype=bool)


def promoted(score: float, rung_scores: Sequence[float], reduction: int) -> bool:
    """Successive halving's rule (see the module docstring); ``rung_scores`` includes ``score``."""
    ranked = sorted(rung_scores, reverse=True)
    if not ranked:
        return True
    cut = max(len(ranked) // reduction - 1, 0)
    return score >= ranked[cut]


#: The fidelities a study may ask for by name: ``auto`` (rungs on a large corpus, see
#: :data:`tuner.tuning.study.settings.AUTO_RUNGS`) and ``full``.
FIDELITY_CHOICES = ("auto", "full")


def parse_fidelity(value: Any, where: str) -> str | Fidelity:
    """``"auto"``, ``"full"``, a :class:`Fidelity`, from a study file's ``fidelity`` (one of
    those words, a list of rungs, or a mapping of :class:`Fidelity`'s fields) or from
    ``--fidelity`` (a word, or rungs separated by commas).

    >>> parse_fidelity("0.1,0.3,1", "--fidelity").rungs
    (0.1, 0.3, 1.0)
    """
    if isinstance(value, Fidelity) or value in FIDELITY_CHOICES:
        return value
    try:
        if isinstance(value, str):
            return Fidelity(rungs=tuple(float(part) for part in value.split(",")))
        if isinstance(value, list):
            return Fidelity(rungs=tuple(value))
        if isinstance(value, dict):
            return Fidelity.from_dict(value)
    except InvalidParameterError:  # before ValueError, which it is: it names the value and what is allowed
        raise
    except ValueError:  # not numbers
        pass
    raise invalid(where, value, "auto, full, or increasing rungs ending at 1, e.g. 0.1,0.3,1")
