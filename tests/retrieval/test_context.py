"""Contextual chunk headers: headings at exact offsets, heading paths, titles, and headers that
reach the embedder and BM25 but never the chunks' offsets or scored units."""

from __future__ import annotations

import pytest

import tuner
from tuner.chunkers import Chunk
from tuner.data.corpus import Corpus
from tuner.data.document import Document
from tuner.data.evalset import EvaluationSet, Query, Reference
from tuner.embedding import EmbeddingCache
from tuner.embedding.cache import text_key
from tuner.retrieval.context import Outline, context_header, contextualize, markdown_headings

from fakes import WordEmbedder

TEXT = (
    "# Guide\n"                 # 0
    "Intro line.\n"             # 8
    "## Install ##\n"           # 20
    "Run it.\n"                 # 34
    "```\n"                     # 42
    "# not a heading\n"         # 46
    "```\n"                     # 62
    "### Docker\n"              # 66
    "Use the image.\n"          # 77
    "## Use\n"                  # 92
    "   ## Indented\n"          # 99
    "#nospace\n"                # 115
    "Done.\n"                   # 124
)


def test_markdown_headings_at_exact_offsets_outside_code_fences():
    found = [(h.offset, h.level, h.title) for h in markdown_headings(TEXT)]
    assert found == [(0, 1, "Guide"), (20, 2, "Install"), (66, 3, "Docker"), (92, 2, "Use"), (99, 2, "Indented")]
    for offset, level, _ in found:
        assert TEXT[offset:].lstrip(" ").startswith("#" * level + " ")


def test_heading_path_at_an_offset():
    outline = Outline(Document("docs/guide.md", TEXT))
    assert outline.path_at(0) == ("Guide",)
    assert outline.path_at(19) == ("Guide",)  # the line before "## Install"
    assert outline.path_at(20) == ("Guide", "Install")  # the heading's own line starts its section
    assert outline.path_at(80) == ("Guide", "Install", "Docker")
    assert outline.path_at(95) == ("Guide", "Use")  # a level-2 heading closes the level-3 one
    assert outline.path_at(130) == ("Guide", "Indented")
    assert outline.title == "Guide"


def test_title_without_a_level_one_heading_is_the_file_name():
    assert Outline(Document("reports/state_of_the-union.md", "No headings here.")).title == "state of the union"
    assert Outline(Document("notes.txt", "## Only level two\ntext")).title == "notes"
    assert Outline(Document("x.md", "text")).path_at(2) == ()


def test_headers_of_each_context():
    document = Document("guide.md", TEXT)
    outline = Outline(document)
    chunk = Chunk("guide.md", 34, 50, TEXT[34:50], 5)
    assert context_header(chunk, outline, "none") == ""
    assert context_header(chunk, outline, "title") == "Guide"
    assert context_header(chunk, outline, "headings") == "Guide > Install"
    # A chunker's own heading path (the markdown chunker records one) wins.
    own = Chunk("guide.md", 34, 50, TEXT[34:50], 5, headings=("Guide", "Setup"))
    assert context_header(own, outline, "headings") == "Guide > Setup"
    # Before the first heading: the title.
    early = Outline(Document("a_b.md", "preface\n# Title\ntext"))
    assert context_header(Chunk("a_b.md", 0, 7, "preface", 1), early, "headings") == "Title"
    # A multi-span chunk takes the path at its first span.
    spans = Chunk("guide.md", 8, 105, "x", 1, spans=((8, 19), (92, 105)))
    assert context_header(spans, outline, "headings") == "Guide"
    assert contextualize([chunk], [document], "headings") == ["Guide > Install\n\n" + TEXT[34:50]]
    assert contextualize([chunk], [document], "none") == [TEXT[34:50]]


class RecordingEmbedder(WordEmbedder):
    """Counts words of a kitchen vocabulary and remembers every text it embedded (``seen``)."""

    identity = "recording:v1"
    VOCAB = ("lemon", "apricot", "oven", "kettle")


# Cut at 12 tokens: "# Kitchen ... ## Oven" (the only chunk that says "oven") and "Preheat to 200 degrees.".
KITCHEN = "# Kitchen\n\nKettle: kettle kettle.\n## Oven\n\nPreheat to 200 degrees.\n"


def kitchen():
    corpus = Corpus("k", [Document("kitchen.md", KITCHEN)])
    start = KITCHEN.index("Preheat")
    end = start + len("Preheat to 200 degrees.")
    queries = EvaluationSet((Query("q1", "oven temperature", "k", (Reference("kitchen.md", start, end,
                                                                           KITCHEN[start:end]),)),))
    return corpus, queries


def test_headers_are_embedded_but_never_part_of_offsets_or_scored_units(tmp_path):
    corpus, queries = kitchen()
    kwargs = dict(chunker="recursive", size=12, overlap=0, k=1, unit="chars")
    plain = tuner.evaluate(corpus, queries, embedder=RecordingEmbedder(), cache=None, **kwargs)
    embedder = RecordingEmbedder()
    headed = tuner.evaluate(corpus, queries, embedder=embedder, cache=None, context="headings", **kwargs)
    assert headed.chunks == plain.chunks  # same texts and offsets
    for chunk in headed.chunks:
        assert KITCHEN[chunk.start_index:chunk.end_index] == chunk.text
    preheat = next(i for i, c in enumerate(headed.chunks) if c.text.startswith("Preheat"))
    assert headed.indexed_texts[preheat] == "Kitchen > Oven\n\nPreheat to 200 degrees."
    assert "Kitchen > Oven\n\nPreheat to 200 degrees." in embedder.seen
    # The question says "oven": without headers only the heading's chunk mentions it; with them the
    # passage under "## Oven" reads "Kitchen > Oven" and is retrieved first, scored on its own
    # characters: recall 1, precision 1 (the header adds no unit).
    assert headed.ranking[0, 0] == preheat
    assert headed.scores.at(1)["recall"][0] == 1.0 and headed.scores.at(1)["precision"][0] == 1.0
    assert plain.ranking[0, 0] != preheat
    # The index's embedded tokens include the headers.
    assert headed.embedding["index_tokens"] > sum(c.token_count for c in headed.chunks)


def test_cached_vectors_are_keyed_by_the_text_embedded(tmp_path):
    corpus, queries = kitchen()
    cache = EmbeddingCache(tmp_path / "cache.sqlite3")
    kwargs = dict(chunker="recursive", size=12, overlap=0, k=1)
    tuner.evaluate(corpus, queries, embedder=RecordingEmbedder(cache=cache), **kwargs)
    embedder = RecordingEmbedder(cache=cache)
    headed = tuner.evaluate(corpus, queries, embedder=embedder, context="title", **kwargs)
    # Every chunk is embedded anew under its headed text (the question is a cache hit).
    assert sorted(embedder.seen) == sorted(headed.indexed_texts)
    assert all(text.startswith("Kitchen\n\n") for text in embedder.seen)
    keys = [text_key(t) for t in headed.indexed_texts]
    assert set(cache.get_many(RecordingEmbedder.identity, keys)) == set(keys)
    again = RecordingEmbedder(cache=cache)
    tuner.evaluate(corpus, queries, embedder=again, context="title", **kwargs)
    assert again.seen == []


def test_bm25_reads_the_header_too():
    corpus, queries = kitchen()
    kwargs = dict(chunker="recursive", size=12, overlap=0, k=1, method="bm25", cache=None)
    plain = tuner.evaluate(corpus, queries, **kwargs)
    headed = tuner.evaluate(corpus, queries, context="headings", **kwargs)
    assert plain.ranking[0, 0] != headed.ranking[0, 0]
    assert headed.chunks[headed.ranking[0, 0]].text == "Preheat to 200 degrees."


@pytest.mark.parametrize("context", ["title", "headings"])
def test_context_on_the_example_keeps_every_chunk_exact(context):
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    corpus = tuner.load_corpus(root / "examples" / "handbook")
    chunker = tuner.make_chunker("token", size=96, overlap=16)
    for document in corpus:
        chunks = chunker.split(document)
        texts = contextualize(chunks, [document], context)
        for chunk, text in zip(chunks, texts):
            assert text.endswith("\n\n" + chunk.text) and document.text[chunk.start_index:chunk.end_index] == chunk.text
