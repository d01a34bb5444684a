"""What a model's tokens cost: ``pricing:`` entries and the tokens a call used, cached ones apart.

Prices are USD per million tokens. ``input_tokens`` counts every prompt token, those read
from the provider's prompt cache (``cache_read_tokens``) and those written to it
(``cache_write_tokens``) included; each part is charged at its own price, and a price not
configured falls back to ``input``.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True, slots=True)
class Price:
    """One model's prices in USD per million tokens."""

    input: float
    output: float
    cache_read: float | None = None
    """Prompt tokens read from the cache; None: the input price."""
    cache_write: float | None = None
    """Prompt tokens written to the cache; None: the input price."""


def cost(price: Price, input_tokens: int, output_tokens: int, cache_read_tokens: int = 0, cache_write_tokens: int = 0) -> float:
    """What these tokens cost in USD at ``price`` (cached tokens are part of ``input_tokens``)."""
    read = min(max(0, cache_read_tokens), max(0, input_tokens))
    write = min(max(0, cache_write_tokens), max(0, input_tokens) - read)
    plain = max(0, input_tokens) - read - write
    read_price = price.input if price.cache_read is None else price.cache_read
    write_price = price.input if price.cache_write is None else price.cache_write
    return (plain * price.input + read * read_price + write * write_price + max(0, output_tokens) * price.output) / 1_000_000
