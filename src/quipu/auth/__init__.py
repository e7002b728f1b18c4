"""Authentication and admission: tenants, API keys, run tokens, rate limits."""
