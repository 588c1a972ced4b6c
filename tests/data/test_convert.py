"""Documents in other formats: PDF, DOCX and HTML files built here become exact text.

Every file is written inside the test with the format's own library (fpdf2 for PDF,
python-docx for DOCX) or by hand (HTML), so the text each must convert to is known: the
expected texts below are written by hand from the content put in, following markdown's
conventions (``#`` headings, blank lines between blocks, ``*`` bullets).
"""

from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path

import pytest

import tuner
import tuner.data.convert as convert
import tuner.embedding
from tuner.cli import main
from tuner.data.convert import ConversionError, convert_file
from tuner.data.corpus import load_corpus, matches
from tuner.errors import CorpusError

from fakes import HashedWordsEmbedder

fpdf = pytest.importorskip("fpdf", reason="fpdf2 is a test dependency: pip install -e '.[test]'")
docx = pytest.importorskip("docx", reason="python-docx is a test dependency: pip install -e '.[test]'")

# --- the documents ----------------------------------------------------------------------------------

#: A PDF of two pages: a 20-point title, 15-point section headings, 10-point body lines five
#: millimetres apart, and four extra millimetres between paragraphs.
PDF_BLOCKS = [
    ("h", 20, "Tidepool Field Notes"),
    ("p", "Tidepools form where rocks trap seawater at low tide."),
    ("h", 15, "Anemones"),
    ("p", "Anemones close their tentacles when the water drains away.",
     "They open again as soon as the tide returns."),
    ("p", "Their sting is harmless to people."),
    ("h", 15, "Crabs"),
    ("p", "Shore crabs hide under stones during the day."),
    ("page",),
    ("h", 15, "Limpets"),
    ("p", "Limpets return to the same spot on the rock."),
]
PDF_TEXT = (
    "# Tidepool Field Notes\n\n"
    "Tidepools form where rocks trap seawater at low tide.\n\n"
    "## Anemones\n\n"
    "Anemones close their tentacles when the water drains away.\n"
    "They open again as soon as the tide returns.\n\n"
    "Their sting is harmless to people.\n\n"
    "## Crabs\n\n"
    "Shore crabs hide under stones during the day.\n\n"
    "## Limpets\n\n"
    "Limpets return to the same spot on the rock.\n"
)
DOCX_TEXT = (
    "# Harbour Rules\n\n"
    "Boats must be moored by 20:00. Late arrivals use berth_7.\n\n"
    "## Fees\n\n"
    "Visitors pay 12 euros a night.\n\n"
    "* Water is free\n"
    "* Power costs extra\n\n"
)
HTML_PAGE = ("<!DOCTYPE html>\n<html><head><meta charset=\"windows-1252\"><title>Caf\xe9</title>"
             "<style>p {color: red}</style><script>var tracking = 1;</script></head>\n"
             "<body><h1>Caf\xe9 Guide</h1>\n<p>Open <b>daily</b> &amp; late. Ask for log_keep_days.</p>\n"
             "<h2>Menu</h2>\n<ul><li>Tea</li><li>Cake</li></ul>\n</body></html>\n")
HTML_TEXT = "# Café Guide\n\nOpen **daily** & late. Ask for log_keep_days.\n\n## Menu\n\n* Tea\n* Cake\n"


def write_pdf(path: Path, blocks=PDF_BLOCKS) -> Path:
    pdf = fpdf.FPDF(format="A4")
    pdf.add_page()
    for block in blocks:
        if block[0] == "page":
            pdf.add_page()
        elif block[0] == "h":
            pdf.set_font("Helvetica", "B", block[1])
            pdf.cell(0, block[1] * 0.5, block[2], new_x="LMARGIN", new_y="NEXT")
            pdf.ln(2)
        else:
            pdf.set_font("Helvetica", "", 10)
            for line in block[1:]:
                pdf.cell(0, 5, line, new_x="LMARGIN", new_y="NEXT")
            pdf.ln(4)
    pdf.output(str(path))
    return path


def write_docx(path: Path) -> Path:
    document = docx.Document()
    document.add_heading("Harbour Rules", level=1)
    document.add_paragraph("Boats must be moored by 20:00. Late arrivals use berth_7.")
    document.add_heading("Fees", level=2)
    document.add_paragraph("Visitors pay 12 euros a night.")
    document.add_paragraph("Water is free", style="List Bullet")
    document.add_paragraph("Power costs extra", style="List Bullet")
    table = document.add_table(rows=2, cols=2)
    for (row, col), text in {(0, 0): "Item", (0, 1): "Price", (1, 0): "Shower", (1, 1): "2 euros"}.items():
        table.cell(row, col).text = text
    document.save(str(path))
    return path


def write_scanned_pdf(path: Path) -> Path:
    from PIL import Image, ImageDraw

    image = Image.new("L", (400, 120), 255)
    ImageDraw.Draw(image).rectangle((20, 40, 380, 60), fill=0)  # a "line of text", as pixels
    pdf = fpdf.FPDF()
    pdf.add_page()
    pdf.image(image, x=10, y=10, w=180)
    pdf.output(str(path))
    return path


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    """Each test its own (empty) conversion cache."""
    monkeypatch.setenv("CHUNKWISE_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture
def folder(tmp_path) -> Path:
    """A folder of mixed formats, some read, some skipped, one to leave out."""
    root = tmp_path / "docs"
    (root / "drafts").mkdir(parents=True)
    write_pdf(root / "tidepools.pdf")
    write_docx(root / "harbour.docx")
    (root / "cafe.html").write_bytes(HTML_PAGE.encode("cp1252"))
    (root / "notes.md").write_text("# Notes\n\nPlain markdown stays as it is.\n", encoding="utf-8")
    (root / "photo.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0")
    (root / "archive.zip").write_bytes(b"PK\x05\x06" + b"\0" * 18)
    write_pdf(root / "drafts" / "old.pdf", [("p", "An old draft.")])
    return root


# --- conversion -----------------------------------------------------------------------------------


def test_pdf_becomes_markdown_with_headings_and_paragraphs(tmp_path):
    text, conversion = convert_file(write_pdf(tmp_path / "tidepools.pdf"))
    assert text == PDF_TEXT
    assert conversion.converter.startswith("pdf: chunkwise-convert 3, pypdfium2 ")
    assert conversion.warnings == () and not conversion.cached


def test_docx_headings_lists_and_tables_come_out_as_markdown(tmp_path):
    text, _ = convert_file(write_docx(tmp_path / "harbour.docx"))
    assert text.startswith(DOCX_TEXT)
    # The table follows, one markdown row per table row (no header row in the file).
    assert text.endswith("| Item | Price |\n| Shower | 2 euros |\n")


def test_html_is_converted_not_read_as_markup(tmp_path):
    path = tmp_path / "cafe.html"
    path.write_bytes(HTML_PAGE.encode("cp1252"))  # a legacy encoding, declared in the page
    text, _ = convert_file(path)
    # Scripts and styles dropped, entities decoded, identifiers not backslash-escaped.
    assert text == HTML_TEXT


def test_a_converted_file_named_directly_keeps_its_path_as_id(tmp_path):
    corpus = load_corpus(write_pdf(tmp_path / "tidepools.pdf"))
    (document,) = corpus.documents
    assert (corpus.name, document.id, document.text) == ("tidepools", "tidepools.pdf", PDF_TEXT)
    assert corpus.conversion == {"converters": {".pdf": document.conversion.converter},
                                 "documents": {"tidepools.pdf": document.conversion.key}}


@pytest.mark.parametrize(("make", "message"), [
    (write_scanned_pdf, "scan.pdf has no extractable text: it looks like a scanned, image-only PDF (1 image(s)). "
                        "chunkwise does not do OCR"),
    (lambda p: _encrypted_pdf(p), "scan.pdf is an encrypted PDF that needs a password to open"),
    (lambda p: p.write_bytes(b"%PDF-1.4\n% damaged beyond repair"), "scan.pdf is not a readable PDF"),
])
def test_unreadable_pdfs_say_why(tmp_path, make, message):
    path = tmp_path / "scan.pdf"
    make(path)
    with pytest.raises(ConversionError) as error:
        load_corpus(path)
    assert message in str(error.value)
    assert str(path) in str(error.value)


def _encrypted_pdf(path: Path) -> None:
    pdf = fpdf.FPDF()
    pdf.add_page()
    pdf.set_font("Helvetica", "", 10)
    pdf.cell(0, 5, "Confidential.")
    pdf.set_encryption(owner_password="owner", user_password="reader")
    pdf.output(str(path))


@pytest.mark.parametrize(("name", "data", "message"), [
    ("report.docx", b"PK\x03\x04 this is not a zip archive", "report.docx cannot be converted: it is damaged or not "
                                                              "a real .docx file"),
    ("report.docx", b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\0" * 100, "report.docx is not a .docx file inside: it is "
                                                                       "password-protected (encrypted)"),
    ("deck.pptx", b"garbage", "deck.pptx cannot be converted"),
])
def test_damaged_office_files_name_themselves(tmp_path, name, data, message):
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(CorpusError) as error:
        load_corpus(path)
    assert message in str(error.value)


def test_nothing_is_cached_or_written_for_a_failed_conversion(tmp_path, folder, capsys):
    (folder / "broken.pdf").write_bytes(b"%PDF-1.4 nothing")
    out = tmp_path / "texts"
    assert main(["convert", str(folder), "-o", str(out)]) == 2
    assert "broken.pdf is not a readable PDF" in capsys.readouterr().err
    assert not out.exists()


# --- cache and determinism --------------------------------------------------------------------------


def test_conversion_is_cached_by_content_and_converter(tmp_path, monkeypatch):
    path = write_pdf(tmp_path / "tidepools.pdf")
    first = load_corpus(path).documents[0]

    def refuse(path, data, **options):
        raise AssertionError("converted twice")

    monkeypatch.setitem(convert.formats.CONVERTERS, "pdf", refuse)
    again = load_corpus(path).documents[0]
    assert again.text == PDF_TEXT and again.conversion.cached and again.conversion == first.conversion
    cached = tmp_path / "cache" / "conversions" / f"{first.conversion.key}.json"
    assert cached.stat().st_mode & 0o777 == 0o600
    # A new converter version means a new key: converted again (here: refused).
    monkeypatch.setattr(convert, "CONVERSION_VERSION", 4)
    convert.converter_identity.cache_clear()
    try:
        with pytest.raises(AssertionError, match="converted twice"):
            load_corpus(path)
    finally:
        convert.converter_identity.cache_clear()


def test_a_damaged_cache_entry_is_converted_again(tmp_path):
    path = write_pdf(tmp_path / "tidepools.pdf")
    key = load_corpus(path).documents[0].conversion.key
    (tmp_path / "cache" / "conversions" / f"{key}.json").write_text("{not json", encoding="utf-8")
    document = load_corpus(path).documents[0]
    assert (document.text, document.conversion.cached) == (PDF_TEXT, False)


def test_the_corpus_hash_covers_the_converter(tmp_path, monkeypatch):
    path = write_pdf(tmp_path / "tidepools.pdf")
    before = load_corpus(path).sha256
    monkeypatch.setattr(convert, "CONVERSION_VERSION", 99)
    convert.converter_identity.cache_clear()
    try:
        after = load_corpus(path)
    finally:
        convert.converter_identity.cache_clear()
    assert after.documents[0].text == PDF_TEXT and after.sha256 != before
    # A text file hashes as it always did: ids and texts only.
    import hashlib

    (tmp_path / "a.md").write_text("alpha", encoding="utf-8")
    assert load_corpus(tmp_path / "a.md").sha256 == hashlib.sha256(b"a.md\0alpha\0").hexdigest()


# --- folders: what is read, what is skipped ---------------------------------------------------------


def test_folder_mode_reads_mixed_formats_and_says_what_it_skipped(folder, tmp_path, capsys):
    out = tmp_path / "texts"
    assert main(["convert", str(folder), "-o", str(out), "--exclude", "drafts/*"]) == 0
    err = capsys.readouterr().err
    assert err.splitlines()[0] == ("chunkwise: corpus 'docs': read 4 files (.docx 1, .html 1, .md 1, .pdf 1; "
                                   "3 converted to text); skipped 2 (.png 1, .zip 1); "
                                   "1 left out by --include/--exclude")
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == [
        "cafe.html.md", "harbour.docx.md", "notes.md", "tidepools.pdf.md"]
    assert (out / "tidepools.pdf.md").read_text(encoding="utf-8") == PDF_TEXT
    assert (out / "tidepools.pdf.md").stat().st_mode & 0o777 == 0o600
    # The second time, the converted texts come from the cache.
    assert main(["convert", str(folder), "-o", str(out), "--include", "*.pdf", "--exclude", "drafts/*"]) == 0
    assert "read 1 file (.pdf 1; 1 converted to text, 1 from the conversion cache); skipped none; 6 left out" in \
        capsys.readouterr().err


def test_include_reads_any_suffix_and_exclude_wins(tmp_path):
    root = tmp_path / "logs"
    root.mkdir()
    (root / "app.log").write_text("started\n", encoding="utf-8")
    (root / "skip.log").write_text("noise\n", encoding="utf-8")
    (root / "readme.md").write_text("# Readme\n", encoding="utf-8")
    corpus = load_corpus(root, include=["*.log"], exclude=["skip.*"])
    assert [d.id for d in corpus] == ["app.log"]
    assert corpus.loading.describe("logs") == "corpus 'logs': read 1 file (.log 1); skipped none; 2 left out by " \
                                              "include/exclude"
    with pytest.raises(CorpusError, match=r"holds no text file and no document to convert; 3 file\(s\) left out"):
        load_corpus(root, exclude=["*"])


@pytest.mark.parametrize(("path", "pattern", "expected"), [
    ("a/b/report.pdf", "*.pdf", True),
    ("a/b/report.pdf", "report.*", True),
    ("a/b/report.pdf", "a/*", True),
    ("a/b/report.pdf", "b/*", False),
    ("a/b/report.pdf", "**/report.pdf", True),
    ("a/b/report.pdf", "./a/b/*.pdf", True),
    ("a/b/report.PDF", "*.pdf", False),
])
def test_filter_patterns(path, pattern, expected):
    assert matches(path, pattern) is expected


# --- references and chunks against the converted text -----------------------------------------------


def test_references_against_converted_text_validate_and_chunks_round_trip(folder, tmp_path, capsys):
    sentence = "They open again as soon as the tide returns."
    across = "drains away.\nThey open"  # a reference may span lines of the converted text
    queries = tmp_path / "q.jsonl"
    rows = [{"question": "When do anemones open?", "references": [
                {"document": "tidepools.pdf", "start_index": PDF_TEXT.index(sentence),
                 "end_index": PDF_TEXT.index(sentence) + len(sentence), "content": sentence}]},
            {"question": "What happens at low water?", "references": [
                {"document": "tidepools.pdf", "start_index": PDF_TEXT.index(across),
                 "end_index": PDF_TEXT.index(across) + len(across), "content": across}]},
            {"question": "What is on the menu?", "references": [
                {"document": "cafe.html", "start_index": HTML_TEXT.index("* Tea"),
                 "end_index": HTML_TEXT.index("* Tea") + len("* Tea\n* Cake"), "content": "* Tea\n* Cake"}]}]
    queries.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    assert main(["validate", "--corpus", str(folder), "--queries", str(queries), "--exclude", "drafts/*"]) == 0
    assert "3 queries, 3 references: all match their documents" in capsys.readouterr().out

    config = tmp_path / "markdown.yaml"
    config.write_text("chunker: {name: markdown, params: {size: 40, levels: 2}}\n", encoding="utf-8")
    out = tmp_path / "chunks.jsonl"
    assert main(["chunk", "--config", str(config), str(folder), "-o", str(out), "--exclude", "drafts/*"]) == 0
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    texts = {"tidepools.pdf": PDF_TEXT, "cafe.html": HTML_TEXT, "notes.md": "# Notes\n\nPlain markdown stays as "
             "it is.\n", "harbour.docx": None}
    for record in records:
        text = texts[record["document"]]
        if text is not None:
            assert text[record["start_index"]:record["end_index"]] == record["text"]
    pdf = [(r["text"], r["headings"]) for r in records if r["document"] == "tidepools.pdf"]
    assert pdf == [
        ("# Tidepool Field Notes\n\nTidepools form where rocks trap seawater at low tide.", ["Tidepool Field Notes"]),
        ("## Anemones\n\nAnemones close their tentacles when the water drains away.\nThey open again as soon as the "
         "tide returns.\n\nTheir sting is harmless to people.", ["Tidepool Field Notes", "Anemones"]),
        ("## Crabs\n\nShore crabs hide under stones during the day.", ["Tidepool Field Notes", "Crabs"]),
        ("## Limpets\n\nLimpets return to the same spot on the rock.", ["Tidepool Field Notes", "Limpets"]),
    ]


def test_python_api_takes_mixed_folders(folder):
    corpus = tuner.load_corpus(folder, exclude=["drafts/*"])
    assert [d.id for d in corpus] == ["cafe.html", "harbour.docx", "notes.md", "tidepools.pdf"]
    assert [d.conversion is not None for d in corpus] == [True, True, False, True]
    chunks = tuner.make_chunker("recursive", size=30).split(corpus.document("tidepools.pdf"))
    assert all(PDF_TEXT[c.start_index:c.end_index] == c.text for c in chunks)


def test_a_binary_file_named_directly_lists_what_is_converted(tmp_path):
    path = tmp_path / "data.bin"
    path.write_bytes(bytes(range(256)))
    with pytest.raises(CorpusError, match=r"data.bin is a binary file, not UTF-8 text \(chunkwise reads text files, "
                                          r"and converts .docx, .epub, .htm, .html, .pdf"):
        load_corpus(path)


def test_zip_named_docx_with_no_document_is_damaged(tmp_path):
    path = tmp_path / "empty.docx"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("hello.txt", "not a word document")
    with pytest.raises(ConversionError, match=r"empty\.docx cannot be converted"):
        load_corpus(path)


# --- generate and tune on PDFs; a changed converter is a refused resume ------------------------------


SHORE = [  # three PDFs about the shore, one sentence per line
    [("h", 20, "Rock Pools"), ("p", "Rock pools are left behind on the shore when the tide goes out."),
     ("h", 15, "Temperature"), ("p", "Shallow pools warm up quickly on sunny afternoons in summer."),
     ("p", "Animals in them must tolerate large swings in salinity as well.")],
    [("h", 20, "Seaweeds"), ("p", "Bladder wrack carries small air pockets that keep its fronds afloat."),
     ("h", 15, "Kelp"), ("p", "Kelp forests grow below the low tide line in cold clear water.")],
    [("h", 20, "Birds"), ("p", "Oystercatchers open mussels with their strong orange bills."),
     ("h", 15, "Gulls"), ("p", "Herring gulls drop shellfish onto rocks to break them open.")],
]


@pytest.mark.slow
def test_generate_on_pdfs_then_tune_and_refuse_a_changed_converter(tmp_path, openai_server, monkeypatch, capsys):
    from tuner.data.generate import generate_evaluation_set
    from tuner.llm.client import LLMClient
    from tuner.tuning.study.opening import load_study_inputs
    from tuner.tuning.study.settings import StudySettings
    from tuner.tuning.study.storage import make_storage

    monkeypatch.setenv("OPENAI_API_KEY", "k")
    folder = tmp_path / "shore"
    folder.mkdir()
    for i, blocks in enumerate(SHORE):
        write_pdf(folder / f"part{i + 1}.pdf", blocks)

    def answer(body):  # the stub "LLM" copies the passage's first full sentence as the excerpt
        passage = body["messages"][-1]["content"].split("<passage>\n", 1)[1].split("\n</passage>", 1)[0]
        sentence = re.findall(r"[A-Z][^.!?\n]{30,}[.!?]", passage)[0]
        return json.dumps({"question": "What does it say about " + " ".join(sentence.split()[1:4]) + "?",
                           "references": [{"content": sentence}]})

    openai_server.chat_handler = answer
    queries = tmp_path / "shore.jsonl"
    client = LLMClient(model="stub-llm", base_url=openai_server.base_url, cache_path=tmp_path / "llm.sqlite3")
    corpus = tuner.load_corpus(folder)
    # The stub writes questions, not critiques: the critique is tested in test_generate_filters.py.
    report = generate_evaluation_set(corpus, queries, 4, client, HashedWordsEmbedder(), relevance_threshold=0.0,
                                     duplicate_threshold=1.0, critique=False)
    assert report.accepted == 4
    evalset = tuner.load_evaluation_set(queries, corpus)  # validates every offset against the converted text
    for query in evalset:
        for ref in query.references:
            assert corpus.document(ref.document).text[ref.start_index:ref.end_index] == ref.content
            assert ref.document.endswith(".pdf")

    storage = f"sqlite:///{tmp_path}/shore.db"
    command = ["tune", "--name", "shore", "--corpus", str(folder), "--queries", str(queries), "--space",
               str(Path(__file__).resolve().parents[2] / "search_spaces" / "structure.yaml"), "--embedder",
               "openai:stub-embed", "--base-url", openai_server.base_url, "--storage", storage, "--n-trials", "3",
               "--cache", str(tmp_path / "embeddings.sqlite3")]
    assert main(command) == 0
    assert "chunkwise: corpus 'shore': read 3 files (.pdf 3; 3 converted to text, 3 from the conversion cache)" \
        in capsys.readouterr().err
    import optuna

    study = optuna.load_study(study_name="shore/shore", storage=make_storage(storage, heartbeat_interval=None))
    settings = study.user_attrs["settings"]
    assert sorted(settings["conversion"]["documents"]) == ["part1.pdf", "part2.pdf", "part3.pdf"]
    assert settings["conversion"]["documents"]["part1.pdf"] == corpus.document("part1.pdf").conversion.key

    # The same files through another converter version: the resume is refused, naming the converter.
    monkeypatch.setattr(convert, "CONVERSION_VERSION", 4)
    convert.converter_identity.cache_clear()
    try:
        assert main(command) == 2
        err = capsys.readouterr().err
        assert "study 'shore/shore' was created with different settings" in err
        assert 'conversion.converters..pdf: "pdf: chunkwise-convert 3, pypdfium2' in err
        assert '-> "pdf: chunkwise-convert 4, pypdfium2' in err
        with pytest.raises(tuner.ChunkwiseError, match="is converted to text differently than when study 'shore/shore' "
                                                       "was created"):
            load_study_inputs(StudySettings.from_json(settings), "shore/shore")
    finally:
        convert.converter_identity.cache_clear()


def test_study_files_take_include_and_exclude(tmp_path):
    from tuner.tuning import StudyError
    from tuner.tuning.study.opening import load_study_data
    from tuner.tuning.study.spec import load_study_file

    docs = tmp_path / "docs"
    docs.mkdir()
    write_pdf(docs / "guide.pdf")
    (docs / "draft.md").write_text("# Draft\n\nNot ready.\n", encoding="utf-8")
    sentence = "Their sting is harmless to people."
    start = PDF_TEXT.index(sentence)
    (tmp_path / "q.jsonl").write_text(json.dumps({"question": "Do anemones sting?", "references": [
        {"document": "guide.pdf", "start_index": start, "end_index": start + len(sentence),
         "content": sentence}]}) + "\n", encoding="utf-8")
    study = tmp_path / "s.yaml"
    quick = Path(__file__).resolve().parents[2] / "search_spaces" / "quick.yaml"
    study.write_text(f"name: s\ncorpora: {{docs: docs}}\nqueries: q.jsonl\nspace: {quick}\nexclude: '*.md'\n"
                     "include: ['*.pdf', '*.md']\n", encoding="utf-8")
    spec = load_study_file(study)
    assert (spec.include, spec.exclude) == (("*.pdf", "*.md"), ("*.md",))
    (corpus,) = load_study_data(spec).corpora
    assert [d.id for d in corpus] == ["guide.pdf"]
    study.write_text(f"name: s\ncorpora: {{docs: docs}}\nqueries: q.jsonl\nspace: {quick}\nexclude: [3]\n",
                     encoding="utf-8")
    with pytest.raises(StudyError, match=r"exclude must be a glob pattern or a list of them, got \[3\]"):
        load_study_file(study)
