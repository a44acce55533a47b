"""What a model call costs, from a small price table (USD per million tokens).

`Usage.input_tokens` counts *uncached* input only, for every provider (Anthropic reports it that
way; the OpenAI adapter subtracts the cached part), so the cost is a plain sum:

    input·in + output·out + cache_read·read + cache_write·write

Model names match by longest prefix ("claude-sonnet-4-5-20250929" → "claude-sonnet-4"). A model
that is not in the table (local models, unknown names) costs 0. Prices are list prices at the
time of writing; they are for run accounting and eval reports, not billing.
"""

from __future__ import annotations

from dataclasses import dataclass

from ragloop.types import Usage


@dataclass(frozen=True)
class Price:
    input: float
    output: float
    cache_read: float
    cache_write: float


# USD per 1M tokens. Anthropic cache writes are the 5-minute TTL rate (1.25 × input).
PRICES: dict[str, Price] = {
    # Anthropic
    "claude-opus-4-1": Price(15.00, 75.00, 1.50, 18.75),
    "claude-opus-4-0": Price(15.00, 75.00, 1.50, 18.75),
    "claude-opus-4-2025": Price(15.00, 75.00, 1.50, 18.75),  # claude-opus-4-20250514
    "claude-opus-4": Price(5.00, 25.00, 0.50, 6.25),  # 4.5 and later
    "claude-sonnet-4": Price(3.00, 15.00, 0.30, 3.75),
    "claude-haiku-4": Price(1.00, 5.00, 0.10, 1.25),
    "claude-3-5-haiku": Price(0.80, 4.00, 0.08, 1.00),
    "claude-3-7-sonnet": Price(3.00, 15.00, 0.30, 3.75),
    # OpenAI (no separate cache-write charge: cache_write = input)
    "gpt-4o-mini": Price(0.15, 0.60, 0.075, 0.15),
    "gpt-4o": Price(2.50, 10.00, 1.25, 2.50),
    "gpt-4.1-nano": Price(0.10, 0.40, 0.025, 0.10),
    "gpt-4.1-mini": Price(0.40, 1.60, 0.10, 0.40),
    "gpt-4.1": Price(2.00, 8.00, 0.50, 2.00),
    "gpt-5-nano": Price(0.05, 0.40, 0.005, 0.05),
    "gpt-5-mini": Price(0.25, 2.00, 0.025, 0.25),
    "gpt-5": Price(1.25, 10.00, 0.125, 1.25),
}


def price_for(model: str) -> Price | None:
    """The price entry for a model name ("provider:" prefix allowed), by longest prefix."""
    name = model.split(":", 1)[1] if ":" in model else model
    name = name.strip().lower()
    best: str | None = None
    for prefix in PRICES:
        if name.startswith(prefix) and (best is None or len(prefix) > len(best)):
            best = prefix
    return PRICES[best] if best is not None else None


def cost_usd(model: str, usage: Usage) -> float:
    """USD cost of `usage` on `model`; 0.0 for models not in the table."""
    price = price_for(model)
    if price is None:
        return 0.0
    total = (
        usage.input_tokens * price.input
        + usage.output_tokens * price.output
        + usage.cache_read_tokens * price.cache_read
        + usage.cache_write_tokens * price.cache_write
    )
    return total / 1_000_000
