"""What do the LLM features give? The LLM features on a real local model, and the server that runs
it (docs/results/llm.md)."""
