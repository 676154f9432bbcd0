"""Providers: the translation boundary between rein's IR and model vendors."""

from rein.providers.base import Provider
from rein.providers.fallback import FallbackProvider, is_retryable
from rein.providers.litellm import LiteLLMProvider
from rein.providers.mock import MockProvider

__all__ = ["Provider", "MockProvider", "LiteLLMProvider", "FallbackProvider", "is_retryable"]
