"""How fast is it? Trials per minute, chunking and embedding throughput, hosted APIs, a Dask
cluster, the review page (docs/results/speed.md)."""
