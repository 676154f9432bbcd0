"""Providers: the translation boundary between rein's IR and model vendors."""

from rein.blueprint.providers.base import Provider
from rein.blueprint.providers.fallback import FallbackProvider, is_retryable
from rein.blueprint.providers.litellm import LiteLLMProvider
from rein.blueprint.providers.mock import MockProvider

__all__ = ["Provider", "MockProvider", "LiteLLMProvider", "FallbackProvider", "is_retryable"]
