"""Safety checks on memory text: secret refusal and scrubbing (SAFE-1), injection defanging
(SAFE-2), and the same screens over structured values (metadata, tags) with field paths."""

from quipu.safety.fields import (
    FieldFinding,
    find_injection_fields,
    find_secrets_in_value,
    walk_strings,
)
from quipu.safety.injection import defang, looks_like_injection, render_data_block
from quipu.safety.secrets import SecretFinding, find_secrets, scrub_secrets, secret_error

__all__ = [
    "FieldFinding",
    "SecretFinding",
    "defang",
    "find_injection_fields",
    "find_secrets",
    "find_secrets_in_value",
    "looks_like_injection",
    "render_data_block",
    "scrub_secrets",
    "secret_error",
    "walk_strings",
]
