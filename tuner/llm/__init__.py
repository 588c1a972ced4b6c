"""LLMs behind any OpenAI-compatible endpoint: the chat/completions client with its reply cache
(:mod:`.client`), and the endpoint rules every request follows: timeouts, retries, which
failures are fatal, and keys kept out of messages (:mod:`.endpoint`), with the pace an endpoint's
rate-limit headers set (:mod:`.rates`)."""

from .client import LLMClient, LLMError

__all__ = ["LLMClient", "LLMError"]
