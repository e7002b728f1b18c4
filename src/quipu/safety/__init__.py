"""Safety checks on memory text: secret refusal and scrubbing (SAFE-1), injection defanging
(SAFE-2)."""

from quipu.safety.injection import defang, looks_like_injection, render_data_block
from quipu.safety.secrets import SecretFinding, find_secrets, scrub_secrets, secret_error

__all__ = [
    "SecretFinding",
    "defang",
    "find_secrets",
    "looks_like_injection",
    "render_data_block",
    "scrub_secrets",
    "secret_error",
]
