"""``chunkwise evaluate``."""

from __future__ import annotations

import argparse
import json
import sys

from ..evaluation.config import COPIES
from ..evaluation.metrics import UNITS
from ..retrieval import CONTEXTS, FUSIONS, INDEX_BACKENDS, SCOPES, method_names
from ._args import (
    RegistryChoices,
    add_cache_arguments,
    add_data_arguments,
    add_precision_argument,
    load_data,
    parse_param,
)
from .format import format_result


def add_parser(commands: argparse._SubParsersAction) -> None:
    evaluate = commands.add_parser(
        "evaluate", help="score one chunking configuration",
        description="Chunk the corpora, embed and index the chunks, retrieve the top k chunks "
                    "per query and print token-level recall, precision, IoU and precision-Omega.",
    )
    add_data_arguments(evaluate)
    evaluate.add_argument("--config", metavar="FILE",
                          help="configuration file (YAML or JSON, chunkwise schema); flags override it")
    evaluate.add_argument("--chunker", help="chunker name (see `chunkwise chunkers`); default: recursive")
    evaluate.add_argument("-p", "--param", action="append", default=[], metavar="NAME=VALUE",
                          help="chunker parameter, repeatable (e.g. -p size=250 -p overlap=0); "
                               "values are parsed as YAML (numbers, lists)")
    evaluate.add_argument("--embedder", metavar="PROVIDER[:MODEL]",
                          help="sentence-transformers[:MODEL_DIR] (default, bundled all-MiniLM-L6-v2) "
                               "or openai[:MODEL] (key from $OPENAI_API_KEY)")
    evaluate.add_argument("--base-url", help="OpenAI-compatible endpoint for --embedder openai")
    add_precision_argument(evaluate)
    evaluate.add_argument("-k", type=int, help="chunks retrieved per query (default 5)")
    evaluate.add_argument("--unit", choices=UNITS,
                          help="scoring unit: cl100k tokens (default) or characters")
    evaluate.add_argument("--copies", choices=COPIES,
                          help="a reference whose text occurs more than once in its corpus is satisfied by any copy "
                               "(default) or only at its marked offsets")
    evaluate.add_argument("--scope", choices=SCOPES,
                          help="retrieve from one index of all corpora (default) or per corpus")
    evaluate.add_argument("--index", choices=INDEX_BACKENDS,
                          help="exact numpy search (default) or chromadb (HNSW)")
    evaluate.add_argument("--index-path", metavar="DIR",
                          help="persistent chromadb folder for --index chroma (default: in memory)")
    evaluate.add_argument("--method", choices=RegistryChoices(method_names),
                          help="retrieval: embeddings (dense, default), BM25 (embeds nothing), or both fused (hybrid)")
    evaluate.add_argument("--fusion", choices=FUSIONS,
                          help="how --method hybrid fuses: reciprocal-rank fusion (rrf, default) or weighted scores")
    evaluate.add_argument("--alpha", type=float, metavar="A",
                          help="weight of the dense score in --fusion weighted, in [0, 1] (0.5)")
    evaluate.add_argument("--rrf-k", type=int, metavar="K", help="constant of reciprocal-rank fusion, >= 0 (60)")
    evaluate.add_argument("--context", choices=CONTEXTS,
                          help="header prepended to the text embedded and indexed (not to offsets or scores): "
                               "none (default), the document title, the chunk's heading path, or llm: a context an LLM "
                               "writes for each chunk ($OPENAI_BASE_URL, $CHUNKWISE_LLM_MODEL)")
    evaluate.add_argument("--rerank", metavar="FOLDER",
                          help="rerank the first stage's candidates with the cross-encoder saved in FOLDER "
                               "(sentence-transformers CrossEncoder; nothing is downloaded); none: no reranker")
    evaluate.add_argument("--candidates", type=int, metavar="N",
                          help="first-stage chunks the reranker reads (30)")
    add_cache_arguments(evaluate)
    evaluate.add_argument("--json", action="store_true", help="print machine-readable JSON")
    evaluate.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from ..deploy.export import load_config
    from ..embedding import EmbeddingCache
    from ..evaluation.config import EvaluationConfig
    from ..evaluation.evaluator import evaluate

    config = load_config(args.config).config if args.config else EvaluationConfig()
    embedder = config.embedder.overridden(args.embedder, args.base_url, args.precision)
    params = dict(parse_param(p) for p in args.param)
    corpora, evalset = load_data(args)
    cache = None if args.no_cache else EmbeddingCache(args.cache) if args.cache else True
    result = evaluate(corpora, evalset, config, chunker=args.chunker, k=args.k, unit=args.unit,
                      scope=args.scope, index=args.index, embedder=embedder, cache=cache,
                      index_path=args.index_path, progress=not args.json, copies=args.copies, method=args.method,
                      fusion=args.fusion, alpha=args.alpha, rrf_k=args.rrf_k, context=args.context,
                      rerank=args.rerank, candidates=args.candidates, **params)
    for note in result.notes:
        print(f"chunkwise: note: {note}", file=sys.stderr)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        print(format_result(result))
    return 0
