"""Late chunking (tuner/embedding/late.py, late_pooling.py, late_cache.py): pooling over a token
span, windows over a long document, the per-document token cache, and the configuration that asks for it. The model is a
tiny sentence-transformers model the tests save themselves (tests/fakes.py); expected token
embeddings come from running its transformer directly on each window."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from tuner.chunkers import Chunk, make_chunker
from tuner.data.corpus import Corpus
from tuner.data.document import Document
from tuner.embedding import EmbedderConfig, EmbeddingCache, SentenceTransformerEmbedder
from tuner.embedding.cache import text_key
from tuner.embedding.late import LateChunkingEmbedder
from tuner.embedding.late_cache import STALE_CLAIM_S, STALE_TEMP_S, TokenEmbeddingCache, token_cache_for
from tuner.embedding.late_pooling import DocumentTokens, owning_window, window_starts
from tuner.errors import EmbeddingError, InvalidParameterError
from tuner.evaluation.config import EvaluationConfig
from tuner.retrieval.config import RetrievalConfig
from tuner.text.tokens import count_tokens

from fakes import SENTENCE_MODEL_WORDS, save_sentence_transformer

#: The test model reads 16 tokens: [CLS], 14 of the text, [SEP].
WINDOW = 14


@pytest.fixture(scope="module")
def model_folder(tmp_path_factory) -> Path:
    return save_sentence_transformer(tmp_path_factory.mktemp("st") / "tiny", max_seq_length=WINDOW + 2)


def words(count: int, seed: int) -> str:
    """``count`` words of the test model's vocabulary, seeded (one word piece each)."""
    rng = random.Random(seed)
    vocabulary = [w for w in SENTENCE_MODEL_WORDS if w.isalpha()]
    return " ".join(rng.choice(vocabulary) for _ in range(count))


def unit(vector: np.ndarray) -> np.ndarray:
    return vector / np.linalg.norm(vector)


# --- pooling ------------------------------------------------------------------------------------


def hand_tokens() -> DocumentTokens:
    """Five tokens of "ab cd ef gh ij" (offsets by hand) with vectors chosen by hand."""
    vectors = np.array([[1, 0, 0], [0, 2, 0], [0, 0, 4], [2, 2, 0], [1, 1, 1]], dtype=np.float16)
    offsets = np.array([[0, 2], [3, 5], [6, 8], [9, 11], [12, 14]])
    return DocumentTokens(vectors, offsets)


def test_a_chunk_vector_is_the_normalised_mean_of_the_tokens_in_its_span():
    tokens = hand_tokens()
    # "cd ef": tokens 1 and 2, mean (0, 1, 2), norm sqrt(5).
    assert np.allclose(tokens.pool([(3, 8)]), np.array([0, 1, 2]) / np.sqrt(5))
    # A span cutting "ab" and "ef" in the middle takes both: tokens 0, 1, 2, mean (1/3, 2/3, 4/3).
    assert np.allclose(tokens.pool([(1, 7)]), unit(np.array([1, 2, 4]) / 3))
    # Two spans ("ab" and "gh ij") pool their tokens together: 0, 3, 4, mean (4/3, 1, 1/3).
    assert np.allclose(tokens.pool([(0, 2), (9, 14)]), unit(np.array([4, 3, 1]) / 3))
    # Overlapping spans count a token once: "cd" twice is token 1 alone.
    assert np.allclose(tokens.pool([(3, 5), (4, 5)]), [0, 1, 0])
    # Whitespace between "cd" and "ef" covers no token: the token after it ("ef").
    assert np.allclose(tokens.pool([(5, 6)]), [0, 0, 1])
    # Trailing whitespace past the last token: the last token.
    assert np.allclose(tokens.pool([(14, 15)]), unit(np.array([1, 1, 1])))
    assert tokens.pool([(3, 8)]).dtype == np.float32


def test_many_chunks_pooled_at_once_each_get_their_own_mean():
    pooled = hand_tokens().pool_chunks([[(3, 8)], [(0, 2), (9, 14)], [(5, 6)], [(14, 15)], [(0, 14)]])
    assert pooled.dtype == np.float32 and pooled.shape == (5, 3)
    # The hand-computed means above, and all five tokens: mean (4/5, 1, 1).
    want = [np.array([0, 1, 2]) / np.sqrt(5), unit(np.array([4, 3, 1]) / 3), [0, 0, 1], unit(np.array([1, 1, 1])),
            unit(np.array([4, 5, 5]) / 5)]
    assert np.allclose(pooled, want)
    empty = DocumentTokens(np.zeros((0, 3), dtype=np.float16), np.zeros((0, 2), dtype=np.int64))
    assert np.array_equal(empty.pool_chunks([[(0, 4)]]), np.zeros((1, 3)))  # a document without tokens


def test_the_token_cache_keeps_what_it_read_in_memory_within_its_cap(tmp_path):
    tokens = hand_tokens()
    cache = TokenEmbeddingCache(tmp_path, memory_bytes=tokens.nbytes)
    cache.put("m", "a", tokens, {})
    (tmp_path / "m" / "a.npz").unlink()
    assert np.array_equal(cache.get("m", "a").vectors, tokens.vectors)  # from memory
    cache.put("m", "b", tokens, {})  # over the cap: "a" leaves memory
    assert cache.get("m", "a") is None and cache.get("m", "b") is not None
    nothing = TokenEmbeddingCache(tmp_path, memory_bytes=0)
    nothing.put("m", "c", tokens, {})
    (tmp_path / "m" / "c.npz").unlink()
    assert nothing.get("m", "c") is None


def test_windows_step_by_window_less_overlap_and_the_last_one_ends_the_document():
    assert window_starts(5, 14, 4) == [0]  # fits in one window
    assert window_starts(14, 14, 4) == [0]
    assert window_starts(34, 14, 4) == [0, 10, 20]  # 20 + 14 = 34 ends it
    assert window_starts(36, 14, 4) == [0, 10, 20, 22]  # the last one ends at 36
    with pytest.raises(ValueError):
        window_starts(36, 14, 14)


def test_each_token_keeps_the_window_where_it_has_the_most_context():
    # Windows [0, 14), [10, 24), [20, 34): overlaps 10-13 and 20-23, split in two (ties to the earlier).
    owner = owning_window(34, [0, 10, 20], 14)
    assert owner.tolist() == [0] * 12 + [1] * 10 + [2] * 12
    # An odd overlap (3: tokens 11, 12, 13 in windows [0, 14) and [11, 25)): token 12 has one token of
    # context on its nearer side in each window (13 after it in the first, 11 before it in the second): a tie.
    owner = owning_window(25, [0, 11], 14)
    assert owner.tolist() == [0] * 13 + [1] * 12


# --- windows over a real model -------------------------------------------------------------------


def expected_token_vectors(folder: Path, text: str, window: int, overlap: int) -> tuple[np.ndarray, np.ndarray]:
    """Each token's embedding as the module docstring promises, computed here by running the
    transformer (transformers' own BertModel) on every window separately, and picking for each
    token the window where min(tokens before, tokens after) is largest, ties to the earlier."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    model = AutoModel.from_pretrained(str(folder), local_files_only=True).eval()
    encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    ids, offsets = encoded["input_ids"], np.array(encoded["offset_mapping"])
    n = len(ids)
    starts, start = [], 0
    while True:  # every window - overlap tokens, the last one ending the document
        if start + window >= n:
            starts.append(max(n - window, 0))
            break
        starts.append(start)
        start += window - overlap
    starts = sorted(set(starts))
    per_window = []
    for start in starts:
        piece = [tokenizer.cls_token_id, *ids[start:start + window], tokenizer.sep_token_id]
        with torch.no_grad():
            hidden = model(input_ids=torch.tensor([piece])).last_hidden_state[0, 1:-1].numpy()
        per_window.append((start, hidden))
    vectors = np.zeros((n, model.config.hidden_size), dtype=np.float32)
    for i in range(n):
        best, chosen = -1, None
        for start, hidden in per_window:
            if start <= i < start + len(hidden):
                context = min(i - start, start + len(hidden) - 1 - i)
                if context > best:
                    best, chosen = context, hidden[i - start]
        vectors[i] = chosen
    return vectors, offsets


def test_a_long_document_is_read_in_overlapping_windows(model_folder):
    text = words(40, seed=3) + ". " + words(23, seed=4)  # 64 tokens: windows at 0, 10, 20, 30, 40, 50
    late = LateChunkingEmbedder(SentenceTransformerEmbedder(str(model_folder), device="cpu"), overlap=4)
    assert late.window == WINDOW
    tokens = late.document_tokens(text)
    want, offsets = expected_token_vectors(model_folder, text, WINDOW, 4)
    assert len(want) == 64
    assert tokens.offsets.tolist() == offsets.tolist()
    assert tokens.vectors.dtype == np.float16
    assert np.allclose(tokens.vectors.astype(np.float32), want, atol=2e-3, rtol=2e-3)
    # A token's embedding depends on its window: the same word in another window differs.
    alone = LateChunkingEmbedder(SentenceTransformerEmbedder(str(model_folder), device="cpu"), overlap=4)
    assert not np.allclose(alone.document_tokens(text[offsets[30][0]:]).vectors[0], tokens.vectors[30], atol=1e-2)
    # A chunk's vector is the normalised mean of its tokens' embeddings: tokens 12 to 30 here.
    start, end = int(offsets[12][0]), int(offsets[30][1])
    chunk = Chunk("d.md", start, end, text[start:end], 19)
    (vector,) = late.embed_chunks(Corpus("c", [Document("d.md", text)]), [chunk])
    assert np.allclose(vector, unit(want[12:31].mean(axis=0)), atol=2e-3)


def test_a_model_that_does_not_pool_by_the_mean_is_refused(tmp_path):
    folder = save_sentence_transformer(tmp_path / "cls", max_seq_length=16, pooling="cls")
    late = LateChunkingEmbedder(SentenceTransformerEmbedder(str(folder), device="cpu"))
    with pytest.raises(EmbeddingError, match="late chunking needs a mean-pooling model") as caught:
        late.document_tokens("the apple is red")
    assert caught.value.fatal


# --- the token cache -----------------------------------------------------------------------------


def corpus_of(texts: dict[str, str]) -> tuple[Corpus, list]:
    corpus = Corpus("c", [Document(name, text) for name, text in texts.items()])
    chunker = make_chunker("token", size=6, overlap=0)
    return corpus, [chunk for document in corpus for chunk in chunker.split(document)]


def test_the_token_cache_is_keyed_by_content_model_and_precision(model_folder, tmp_path):
    cache = TokenEmbeddingCache(tmp_path / "tokens")
    texts = {"a.md": words(30, seed=1), "b.md": words(30, seed=2)}
    corpus, chunks = corpus_of(texts)

    def late(folder: Path = model_folder, precision: str = "fp32") -> LateChunkingEmbedder:
        return LateChunkingEmbedder(SentenceTransformerEmbedder(str(folder), device="cpu", precision=precision),
                                    tokens=cache)

    first = late()
    vectors = first.embed_chunks(corpus, chunks)
    assert first.stats.computed == 2  # two documents read, once each
    folder = cache.folder / first.model_key
    files = {p.name: p.stat().st_mtime_ns for p in folder.glob("*.npz")}
    assert len(files) == 2
    assert oct(folder.stat().st_mode & 0o777) == "0o700"
    assert all(oct(p.stat().st_mode & 0o777) == "0o600" for p in folder.glob("*.npz"))
    assert json.loads((folder / "model.json").read_text())["precision"] == "fp32"

    again = late()  # another process: served from disk, the same vectors
    assert np.array_equal(again.embed_chunks(corpus, chunks), vectors)
    assert again.stats.computed == 0

    texts["a.md"] = texts["a.md"].replace(" ", "  ", 1)  # one document changes
    changed, chunks = corpus_of(texts)
    third = late()
    third.embed_chunks(changed, chunks)
    assert third.stats.computed == 1  # only the changed one is read again
    now = {p.name: p.stat().st_mtime_ns for p in folder.glob("*.npz")}
    assert len(now) == 3 and {k: now[k] for k in files} == files  # the others untouched

    int8 = late(precision="int8")  # another precision never reads these vectors
    assert int8.model_key != first.model_key
    int8.embed_chunks(changed, chunks)
    assert int8.stats.computed == 2
    other = late(save_sentence_transformer(tmp_path / "other", max_seq_length=16, seed=1))
    assert other.model_key not in (first.model_key, int8.model_key)


def test_sums_and_counts_of_a_chunks_tokens():
    sums, counts = hand_tokens().sum_chunks([[(3, 8)], [(0, 2), (9, 14)], [(5, 6)]])
    # "cd ef": (0,2,0) + (0,0,4); "ab" + "gh ij": (1,0,0) + (2,2,0) + (1,1,1); whitespace: "ef" alone.
    assert sums.tolist() == [[0, 2, 4], [4, 3, 1], [0, 0, 4]] and counts.tolist() == [2, 3, 1]


def test_a_proxy_pools_a_context_header_with_its_chunk(model_folder):
    # Late chunking cannot read a header; the proxy of a configuration with one counts the header's
    # tokens (the model reading the header alone) in the chunk's mean.
    late = LateChunkingEmbedder(SentenceTransformerEmbedder(str(model_folder), device="cpu"))
    corpus, chunks = corpus_of({"a.md": words(20, seed=3)})
    header = words(3, seed=4)
    document = late.document_tokens(corpus.document("a.md").text)
    own = late.document_tokens(header).vectors.astype(np.float32)
    assert len(own) == 3  # one word piece per word
    chunk = chunks[1]
    rows = [i for i, (a, b) in enumerate(document.offsets.tolist()) if a < chunk.end_index and b > chunk.start_index]
    mean = np.vstack([document.vectors[rows].astype(np.float32), own]).mean(axis=0)
    with_header, plain = late.embed_chunks(corpus, [chunk, chunk], headers=[header, ""])
    assert np.allclose(with_header, mean / np.linalg.norm(mean), atol=1e-6)
    assert np.allclose(plain, late.embed_chunks(corpus, [chunk])[0])  # an empty header: the chunk alone
    assert not np.allclose(with_header, plain)


def test_limits_keep_each_chunks_first_tokens():
    tokens = hand_tokens()
    # All five tokens, the first two read: mean of (1,0,0) and (0,2,0) is (1/2, 1, 0).
    assert np.allclose(tokens.pool_chunks([[(0, 14)]], limits=2), [unit(np.array([0.5, 1, 0]))])
    # Per chunk: "cd ef gh" keeps "cd" alone; "ab" + "gh ij" (two spans) keeps "ab" and "gh" (document order).
    sums, counts = tokens.sum_chunks([[(3, 11)], [(0, 2), (9, 14)], [(3, 5)]], limits=[1, 2, 0])
    assert sums.tolist() == [[0, 2, 0], [3, 2, 0], [0, 0, 0]] and counts.tolist() == [1, 2, 0]
    # A limit past the chunk's end changes nothing.
    assert np.array_equal(tokens.pool_chunks([[(3, 8)]], limits=99), tokens.pool_chunks([[(3, 8)]]))


def test_a_proxy_pools_what_the_model_reads_of_a_chunk_longer_than_its_window(model_folder):
    # Issue 30, item 1: the model reads the first 14 word pieces of a chunk embedded alone; the proxy
    # pools those 14 tokens and no more. Late chunking itself (the configuration) pools all of them.
    text = words(40, seed=8)  # 40 one-piece words: windows at 0, 10, 20, 26
    late = LateChunkingEmbedder(SentenceTransformerEmbedder(str(model_folder), device="cpu"), overlap=4)
    want, offsets = expected_token_vectors(model_folder, text, WINDOW, 4)
    start, end = int(offsets[5][0]), int(offsets[30][1])  # tokens 5 to 30: 26 tokens, 12 past the window
    chunk = Chunk("d.md", start, end, text[start:end], 26)
    corpus = Corpus("c", [Document("d.md", text)])
    (proxy,) = late.embed_chunks(corpus, [chunk], as_read=True)
    assert np.allclose(proxy, unit(want[5:19].mean(axis=0)), atol=2e-3)
    (whole,) = late.embed_chunks(corpus, [chunk])
    assert np.allclose(whole, unit(want[5:31].mean(axis=0)), atol=2e-3)
    assert not np.allclose(proxy, whole, atol=1e-2)
    # A chunk inside the window reads whole either way.
    short = Chunk("d.md", int(offsets[5][0]), int(offsets[10][1]), text[int(offsets[5][0]):int(offsets[10][1])], 6)
    assert np.array_equal(late.embed_chunks(corpus, [short], as_read=True), late.embed_chunks(corpus, [short]))


def test_a_proxys_header_is_read_first_and_counts_inside_the_window(model_folder):
    text = words(40, seed=9)
    late = LateChunkingEmbedder(SentenceTransformerEmbedder(str(model_folder), device="cpu"), overlap=4)
    want, offsets = expected_token_vectors(model_folder, text, WINDOW, 4)
    start, end = int(offsets[5][0]), int(offsets[30][1])
    chunk = Chunk("d.md", start, end, text[start:end], 26)
    corpus = Corpus("c", [Document("d.md", text)])
    header = words(4, seed=10)  # 4 word pieces: the model reads them, then 10 of the chunk's
    own, _ = expected_token_vectors(model_folder, header, WINDOW, 4)
    assert len(own) == 4
    (vector,) = late.embed_chunks(corpus, [chunk], headers=[header], as_read=True)
    assert np.allclose(vector, unit(np.vstack([own, want[5:15]]).mean(axis=0)), atol=2e-3)
    # A header as long as the window or longer leaves no room for the chunk: its first 14 tokens alone.
    long_header = words(20, seed=11)
    own, _ = expected_token_vectors(model_folder, long_header, WINDOW, 4)
    (vector,) = late.embed_chunks(corpus, [chunk], headers=[long_header], as_read=True)
    assert np.allclose(vector, unit(own[:14].mean(axis=0)), atol=2e-3)


def test_a_damaged_cache_file_is_read_again(model_folder, tmp_path):
    cache = TokenEmbeddingCache(tmp_path / "tokens")
    corpus, chunks = corpus_of({"a.md": words(20, seed=5)})
    model = LateChunkingEmbedder(SentenceTransformerEmbedder(str(model_folder), device="cpu"), tokens=cache)
    want = model.embed_chunks(corpus, chunks)
    (stored,) = (cache.folder / model.model_key).glob("*.npz")
    stored.write_bytes(stored.read_bytes()[:100])
    again = TokenEmbeddingCache(cache.folder)  # another process: this one keeps what it wrote in memory
    fresh = LateChunkingEmbedder(SentenceTransformerEmbedder(str(model_folder), device="cpu"), tokens=again)
    assert np.array_equal(fresh.embed_chunks(corpus, chunks), want)
    assert fresh.stats.computed == 1


def test_a_cache_file_under_another_documents_name_is_computed_again(model_folder, tmp_path):
    # Issue 29, item 3: a's file copied over b's name served a's vectors for b (the proxy's scores
    # changed with no message). A file holds the keys it was written under and proves it on read.
    cache = TokenEmbeddingCache(tmp_path / "tokens")
    texts = {"a.md": words(30, seed=6), "b.md": words(30, seed=7)}
    corpus, chunks = corpus_of(texts)

    def late(tokens: TokenEmbeddingCache) -> LateChunkingEmbedder:
        return LateChunkingEmbedder(SentenceTransformerEmbedder(str(model_folder), device="cpu"), tokens=tokens)

    want = late(cache).embed_chunks(corpus, chunks)
    model_key = late(cache).model_key
    a_file, b_file = (cache.folder / model_key / f"{text_key(texts[name]).hex()}.npz" for name in ("a.md", "b.md"))
    b_file.write_bytes(a_file.read_bytes())
    fresh = late(TokenEmbeddingCache(cache.folder))  # another process: nothing in memory
    assert np.array_equal(fresh.embed_chunks(corpus, chunks), want)
    assert fresh.stats.computed == 1  # b again; a's own file is a's
    assert TokenEmbeddingCache(cache.folder).get(model_key, b_file.stem) is not None  # b's file is b's again
    assert TokenEmbeddingCache(cache.folder).get("another-model", b_file.stem) is None

    # A file without the keys (an older chunkwise wrote it) is computed again too.
    vectors = np.zeros((2, 3), dtype=np.float16)
    np.savez(b_file, vectors=vectors, offsets=np.zeros((2, 2), dtype=np.int32))
    assert TokenEmbeddingCache(cache.folder).get(model_key, b_file.stem) is None


def test_a_writer_killed_mid_write_leaves_a_temporary_file_that_a_later_cache_removes(tmp_path):
    # Issue 29, item 3: a SIGKILL while a document's file was written left its temporary file (as
    # large as the document's vectors) for good.
    folder = tmp_path / "tokens"
    write = ("import sys, numpy as np; from tuner.embedding.late_cache import DocumentTokens, TokenEmbeddingCache; "
             "TokenEmbeddingCache(sys.argv[1]).put('m', 'd', DocumentTokens(np.ones((1000, 384), dtype=np.float16), "
             "np.zeros((1000, 2), dtype=np.int64)), {})")
    killed = subprocess.run([sys.executable, "-c", write, str(folder)], capture_output=True, text=True, timeout=120,
                            env={**os.environ, "CHUNKWISE_FAULT": "writing_tokens"})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    (left,) = (folder / "m").glob(".d.npz.*.tmp")
    assert left.stat().st_size > 1000 * 384 * 2 and not (folder / "m" / "d.npz").exists()

    young = folder / "m" / ".e.npz.0123abcd.tmp"  # another process writing now: kept
    young.write_bytes(b"partial")
    assert TokenEmbeddingCache(folder).get("m", "d") is None
    assert left.exists() and young.exists()  # not old enough to be sure its writer is gone

    old = time.time() - STALE_TEMP_S - 60
    os.utime(left, (old, old))
    assert TokenEmbeddingCache(folder).documents("m") == []
    assert sorted(p.name for p in (folder / "m").iterdir()) == sorted(["model.json", young.name])


# --- the pass, shared between processes (issue 42) ------------------------------------------------


def late_on(model_folder: Path, cache: TokenEmbeddingCache) -> LateChunkingEmbedder:
    return LateChunkingEmbedder(SentenceTransformerEmbedder(str(model_folder), device="cpu", precision="fp32"),
                                tokens=cache)


def exited_pid() -> int:
    """The id of a process of this host that has ended."""
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(done.stdout)


def hold_claim(cache: TokenEmbeddingCache, model_key: str, document_key: str, pid: int, host: str | None = None,
               age_s: float = 0.0) -> Path:
    """A claim as another process leaves it (its host and process id), ``age_s`` seconds old."""
    import socket

    path = cache.folder / model_key / f".{document_key}.claim"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"host": host or socket.gethostname(), "pid": pid}))
    if age_s:
        then = time.time() - age_s
        os.utime(path, (then, then))
    return path


def test_a_document_another_live_process_holds_is_waited_for_not_computed_again(model_folder, tmp_path):
    # Issue 42: two workers that start with a proxy trial each read every document of the corpus
    # (1.95 corpus passes on realdocs with --jobs 2). A document another live process is computing
    # is left to it: this process reads the others, then waits for that one.
    import threading

    cache = TokenEmbeddingCache(tmp_path / "tokens")
    texts = [words(30, seed=s) for s in range(4)]
    mine = late_on(model_folder, cache)
    held = text_key(texts[1]).hex()
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        claim = hold_claim(cache, mine.model_key, held, other.pid)

        def the_other_process_finishes() -> None:  # stores the document, then lets go of its claim
            late_on(model_folder, TokenEmbeddingCache(cache.folder)).document_tokens(texts[1])
            claim.unlink()

        finisher = threading.Timer(1.0, the_other_process_finishes)
        finisher.start()
        computed = mine.read_documents(texts)
        finisher.join()
    finally:
        other.kill()
        other.wait()
    assert mine.stats.computed == 3  # the three others; the held one came from the cache
    # the pass's tokens are the three documents' (cl100k, as a corpus counts them), the held one's not
    assert computed == sum(count_tokens(text) for number, text in enumerate(texts) if number != 1)
    assert sorted(p.stem for p in (cache.folder / mine.model_key).glob("*.npz")) == sorted(
        text_key(t).hex() for t in texts)
    assert list((cache.folder / mine.model_key).glob(".*.claim")) == []  # every claim let go


def test_a_claim_whose_process_is_gone_is_taken_over(model_folder, tmp_path):
    cache = TokenEmbeddingCache(tmp_path / "tokens")
    texts = [words(30, seed=s) for s in range(3)]
    mine = late_on(model_folder, cache)
    hold_claim(cache, mine.model_key, text_key(texts[0]).hex(), exited_pid())  # a worker killed mid-document
    elsewhere = hold_claim(cache, mine.model_key, text_key(texts[2]).hex(), 1, host="another-host",
                           age_s=STALE_CLAIM_S + 60)  # another host's, too old to be at work still
    mine.read_documents(texts)
    assert mine.stats.computed == 3
    assert not elsewhere.exists()


def test_another_hosts_recent_claim_is_respected(model_folder, tmp_path):
    cache = TokenEmbeddingCache(tmp_path / "tokens")
    mine = late_on(model_folder, cache)
    key = text_key(words(30, seed=0)).hex()
    hold_claim(cache, mine.model_key, key, 1, host="another-host", age_s=60)
    assert cache.claim_alive(mine.model_key, key)
    assert not cache.claim(mine.model_key, key)


def test_progress_counts_each_chunk_once_as_its_document_is_read(model_folder, tmp_path):
    # The pass is the slow part of a proxy trial (18 minutes at 20 MB): its progress must move while
    # documents are read, each chunk counted once, with the shared cache or without one.
    texts = {"a.md": words(40, seed=1), "b.md": words(25, seed=2), "c.md": words(40, seed=1)}  # c is a's copy
    corpus, chunks = corpus_of(texts)
    per_document = {name: sum(c.document == name for c in chunks) for name in texts}
    for cache in (TokenEmbeddingCache(tmp_path / "tokens"), None):
        late = late_on(model_folder, cache)
        calls = []
        late.embed_chunks(corpus, chunks, progress=calls.append)
        assert sum(calls) == len(chunks)
        if cache is not None:  # one call per distinct text, once it is stored: a and its copy c together
            assert sorted(calls) == sorted([per_document["a.md"] + per_document["c.md"], per_document["b.md"]])
        else:
            assert sorted(calls) == sorted(per_document.values())


SHARED_PASS = """
import json, sys
from tuner.embedding import SentenceTransformerEmbedder
from tuner.embedding.late import LateChunkingEmbedder
from tuner.embedding.late_cache import TokenEmbeddingCache
model, folder, texts, go = sys.argv[1], sys.argv[2], json.loads(open(sys.argv[3]).read()), sys.argv[4]
late = LateChunkingEmbedder(SentenceTransformerEmbedder(model, device="cpu", precision="fp32"),
                            tokens=TokenEmbeddingCache(folder))
late.base.modules  # the model loaded before the start, so that both read at once
import os, time
while not os.path.exists(go):
    time.sleep(0.01)
late.read_documents(texts)
print(late.stats.computed)
"""


def test_two_processes_reading_one_corpus_at_once_compute_each_document_once(model_folder, tmp_path):
    texts = [words(200, seed=s) for s in range(40)]
    (tmp_path / "texts.json").write_text(json.dumps(texts))
    go = tmp_path / "go"
    workers = [subprocess.Popen([sys.executable, "-c", SHARED_PASS, str(model_folder), str(tmp_path / "tokens"),
                                 str(tmp_path / "texts.json"), str(go)], stdout=subprocess.PIPE, text=True)
               for _ in range(2)]
    time.sleep(0.5)
    go.touch()
    counts = [int(worker.communicate(timeout=300)[0]) for worker in workers]
    assert all(worker.returncode == 0 for worker in workers)
    assert sum(counts) == 40  # each document read by exactly one of them
    (folder,) = [p for p in (tmp_path / "tokens").iterdir() if p.is_dir()]
    assert len(list(folder.glob("*.npz"))) == 40 and list(folder.glob(".*.claim")) == []


def test_token_embeddings_live_beside_the_embedding_cache(tmp_path, monkeypatch):
    assert token_cache_for(None) is None
    assert token_cache_for(EmbeddingCache(tmp_path / "mine.sqlite3")).folder == tmp_path / "mine-late-chunking"
    monkeypatch.setenv("CHUNKWISE_CACHE_DIR", str(tmp_path / "home"))
    assert token_cache_for(EmbeddingCache()).folder == tmp_path / "home" / "embeddings-late-chunking"


# --- the configuration ---------------------------------------------------------------------------


def test_late_chunking_is_an_embedder_setting_written_only_when_on(model_folder, tmp_path):
    plain = EmbedderConfig(model=str(model_folder), precision="fp32")
    assert "late_chunking" not in plain.to_dict()
    late = EmbedderConfig.from_dict({"model": str(model_folder), "late_chunking": True})
    assert late.to_dict(speed=False) == {"provider": "sentence-transformers", "model": str(model_folder),
                                         "late_chunking": True}
    assert EmbedderConfig.from_dict(late.to_dict()) == late
    assert late.overridden(precision="int8").late_chunking
    built = late.build(EmbeddingCache(tmp_path / "cache.sqlite3"))
    assert isinstance(built, LateChunkingEmbedder)
    assert built.tokens.folder == tmp_path / "cache-late-chunking"
    assert built.identity == SentenceTransformerEmbedder(str(model_folder)).identity  # questions as usual


def test_late_chunking_is_refused_where_it_cannot_apply(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    with pytest.raises(InvalidParameterError, match="late_chunking=true is invalid; allowed: false with provider 'op"):
        EmbedderConfig.from_dict({"provider": "openai", "late_chunking": True})
    with pytest.raises(InvalidParameterError, match=r"context='title' is invalid; allowed: 'none' with embedder\.late"):
        EvaluationConfig(embedder=EmbedderConfig(late_chunking=True), retrieval=RetrievalConfig(context="title"))
    with pytest.raises(InvalidParameterError, match="late_chunking=1 is invalid; allowed: true or false"):
        EmbedderConfig.from_dict({"late_chunking": 1})


def test_a_search_space_chooses_late_chunking_as_an_embedder(model_folder):
    from tuner.tuning.search.space_file import SearchSpaceError, parse_search_space

    plain = {"provider": "sentence-transformers", "model": str(model_folder), "precision": "fp32"}
    space = parse_search_space({"chunkers": {"token": {"size": 100}}, "k": 5,
                                "embedders": [plain, {**plain, "late_chunking": True}]})
    assert space._embedder_labels == ("sentence-transformers:" + str(model_folder),
                                      "sentence-transformers:" + str(model_folder) + ":late")
    assert space.to_dict()["embedders"][1]["late_chunking"] is True
    with pytest.raises(SearchSpaceError, match="an embedder with late_chunking cannot take a context header"):
        parse_search_space({"chunkers": {"token": {"size": 100}}, "k": 5, "retrieval": {"context": ["none", "title"]},
                            "embedders": [{**plain, "late_chunking": True}]})


def test_evaluating_late_chunking_needs_the_late_chunking_embedder(model_folder):
    import tuner

    corpus, _ = corpus_of({"a.md": words(20, seed=6)})
    text = corpus.document("a.md").text
    evalset = tuner.EvaluationSet((tuner.Query("q", "apple", "c", (tuner.Reference("a.md", 0, 5, text[:5]),)),))
    config = EvaluationConfig(embedder=EmbedderConfig(model=str(model_folder), late_chunking=True, precision="fp32"))
    with pytest.raises(EmbeddingError, match="asks for late chunking, but the embedder given"):
        tuner.evaluate(corpus, evalset, config, embedder=SentenceTransformerEmbedder(str(model_folder)), cache=None)
    result = tuner.evaluate(corpus, evalset, config, cache=None)
    assert result.embedding["computed_texts"] == 2  # the document, once, and the question


def test_late_chunking_reads_the_model_through_its_public_interface():
    # Issue 52, item 4: late.py reached into SentenceTransformerEmbedder's _model, _tokenizer and _autocast.
    import ast

    import tuner.embedding.late as module

    tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
    reached = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)
               and isinstance(node.value, ast.Attribute) and node.value.attr == "base"
               and node.attr.startswith("_") and node.attr != "_embed"}  # _embed: every Embedder's hook
    assert reached == set()
