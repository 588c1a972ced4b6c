"""chunkwise's benchmarks (not part of the package), one folder per question a reader asks, as the
docs site's results pages (``docs/results/``) are organised:

* ``exactness/``: how exact is it? (``docs/results/exactness.md``)
* ``speed/``: how fast is it? (``speed.md``)
* ``retrieval/``: which chunkers and retrieval methods win? (``retrieval.md``)
* ``search/``: what does the search add? (``search.md``)
* ``scale/``: what does it cost at 20 MB? (``scale.md``)
* ``generated_questions/``: how good are generated questions? (``generated-questions.md``)
* ``llm/``: what do the LLM features give? (``llm.md``)
* ``conversion/``: how faithful is document conversion? (``conversion.md``)
* ``languages/``: how does it do in other languages? (``languages.md``)
* ``review/``: does review answer bad input? (``review-faults.md``)
* ``development/``: what did the codebase steps cost? (``development.md``)
* ``corpora/``: the corpora nobody tuned chunkwise on (realdocs, the Rust book, Valgrind's manual,
  the 20 MB bigdocs), built outside the repository and read by the benchmarks above.

Beside them: ``data/`` holds what the benchmarks read that is committed (hand-written questions,
pinned file lists, generated question sets and their verdicts), ``results/`` what runs wrote that the
results pages quote. The modules at this level are the helpers the scripts share: ``_common``
(paths, chroma-dev), ``_corpus`` (locating hand-written questions, pinned pages), ``_render`` (the
handbook as HTML, DOCX and PDF) and ``decision_bar`` (is a faster path decision-safe?).

Every script runs as a file from anywhere, ``python benchmarks/FOLDER/SCRIPT.py ARGS`` (run that
way, it puts the repository root on ``sys.path`` and imports its helpers as ``benchmarks.*``), and
builds its command line in ``parser()``, which its ``main()`` parses with:
``tests/test_benchmark_commands.py`` checks every command the docs quote against it.
"""
