"""What a model call costs, from the `genai-prices` table (pydantic's maintained price data,
shipped inside the package: no network at run time).

`Usage.input_tokens` counts *uncached* input only, for every provider (Anthropic reports it that
way; the OpenAI adapter subtracts the cached part); genai-prices wants the total input with the
cached parts inside it, so the sum is rebuilt here. A model the table does not know (a local
model, a new name) costs 0 and is reported once in the log, never silently. Prices are list
prices for run accounting and eval reports, not billing.
"""

from __future__ import annotations

import logging

import genai_prices

from ragloop.core.types import Usage

log = logging.getLogger("ragloop.llm")
_unpriced: set[tuple[str, str]] = set()


def cost_usd(provider: str, model: str, usage: Usage) -> float:
    """USD cost of `usage` on `provider`'s `model`; 0.0 (logged once) when it has no price."""
    total_input = usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens
    try:
        price = genai_prices.calc_price(
            genai_prices.Usage(input_tokens=total_input, output_tokens=usage.output_tokens,
                               cache_read_tokens=usage.cache_read_tokens,
                               cache_write_tokens=usage.cache_write_tokens),
            model_ref=model, provider_id=provider)
    except LookupError:
        if (provider, model) not in _unpriced:
            _unpriced.add((provider, model))
            log.warning("no price known for %s:%s; its calls are counted at $0", provider, model)
        return 0.0
    return float(price.total_price)


def has_price(provider: str, model: str) -> bool:
    try:
        genai_prices.calc_price(genai_prices.Usage(input_tokens=1), model_ref=model,
                                provider_id=provider)
    except LookupError:
        return False
    return True
