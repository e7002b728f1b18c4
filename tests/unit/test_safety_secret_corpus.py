"""SAFE-1 over the corpora: issue 20 defect 4 (secret shapes the screen missed) and issue 31
part 1 (code the screen refused). 0 misses and 0 false positives are asserted; the figures
and the comparison with detect-secrets come from scripts/safety_screen_eval.py."""

from __future__ import annotations

import pytest

from quipu.safety import find_secrets, scrub_secrets, secret_error
from tests.support.secret_corpus import CODE, LOOKALIKES, SECRETS, Case


def test_safe_001_corpus_sizes_meet_issue_20_and_31() -> None:
    assert len(SECRETS) >= 100
    assert len({c.label for c in SECRETS}) == len(SECRETS)
    assert len(LOOKALIKES) >= 40
    assert len(CODE) >= 200


@pytest.mark.parametrize("case", SECRETS, ids=[c.label for c in SECRETS])
def test_safe_001_defect_4_secret_in_sentence_refused_and_scrubbed(case: Case) -> None:
    findings = find_secrets(case.text)
    assert findings, f"{case.label} not refused"
    scrubbed, _ = scrub_secrets(case.text)
    assert case.secret not in scrubbed, f"{case.label} left in {scrubbed!r}"
    assert find_secrets(scrubbed) == []
    error = secret_error(findings)
    assert case.secret not in repr(error.to_dict())
    assert all(f.kind in error.message for f in findings)


@pytest.mark.parametrize("text", LOOKALIKES)
def test_safe_001_defect_4_lookalike_not_refused(text: str) -> None:
    assert find_secrets(text) == []


@pytest.mark.parametrize("text", CODE)
def test_safe_001_issue_31_code_snippet_not_refused(text: str) -> None:
    assert find_secrets(text) == []


@pytest.mark.parametrize(
    "text",
    [
        "password = db.Column(db.String(120), nullable=False)",
        "hashed_password = generate_password_hash(password, method='sha256')",
        "password = fields.Str(required=True)",
        "stored_hashed_password = argon2.hash_password(password)",
        "{'username': 'testuser', 'password': 'testpassword'}",
        "password: Optional[str] = None",
        "password = os.environ['DB_PASSWORD']",
        "password: <password>",
        "password = 'changeme'",
        "password = '****'",
        "password: ${DB_PASSWORD}",
    ],
)
def test_safe_001_issue_31_examples_pass(text: str) -> None:
    """The refusals issue 31 reports, and the placeholders it names, are not secrets."""
    assert find_secrets(text) == []


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ('password = "Xk9#mQ2vL!p"', "Xk9#mQ2vL!p"),
        ("DB_PASS=hunter2hunter2", "hunter2hunter2"),
        ("my password is Tr0ub4dor&3", "Tr0ub4dor&3"),
        ("the wifi password is correcthorsebatterystaple", "correcthorsebatterystaple"),
        ("password: Tr0ub4dor&3", "Tr0ub4dor&3"),
        ("user.set_password('Qp7#Wm3Zx9')", "Qp7#Wm3Zx9"),
        ("password: str = 'Zq8vLm2#Rt'", "Zq8vLm2#Rt"),
        ("const config = { password: `Lm8#Vq2Xz` };", "Lm8#Vq2Xz"),
    ],
)
def test_safe_001_issue_31_real_credentials_still_refused(text: str, value: str) -> None:
    findings = find_secrets(text)
    assert [text[f.start : f.end] for f in findings] == [value]


@pytest.mark.parametrize(
    "text",
    [
        "my password is something I forget",
        "The password is weak.",
        "The password is stored in the vault.",
        "the pin was bent",
        "Password: must be at least 12 characters long",
        "I'll share a secret: **dry brining** keeps the meat juicy.",
        "GOOGLE_CLOUD_SPEECH_CREDENTIALS = 'caramel-base-379922-9d9af53bf1a0.json'",
        "CREDENTIALS = 'C:\\Users\\dan\\Desktop\\Testscaramel-base-379922-9d9af53bf1a0.json'",
        "Unemployment by age\n0-14 15-24 25-44 45-64 65-84\n4.2% 5.1%",
    ],
)
def test_safe_001_prose_and_paths_found_in_conversations_pass(text: str) -> None:
    """Shapes the screen refused in LoCoMo/LongMemEval turns before the value rules."""
    assert find_secrets(text) == []


def test_safe_001_defect_4_obfuscated_spans_cover_the_invisible_characters() -> None:
    key = "AKIA" + "\u200b".join("IOSFODNN7EXAMPLE")
    text = f"key {key} ok"
    (finding,) = find_secrets(text)
    assert text[finding.start : finding.end] == key
    assert scrub_secrets(text)[0] == "key [REDACTED:aws_access_key] ok"


def test_safe_001_defect_4_fullwidth_key_maps_back_to_original_span() -> None:
    token = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    wide = "".join(chr(ord(c) + 0xFEE0) for c in token)
    text = f"日本語 {wide} です"
    (finding,) = find_secrets(text)
    assert finding.kind == "github_token"
    assert text[finding.start : finding.end] == wide


def test_safe_001_publishable_stripe_key_is_public() -> None:
    assert find_secrets("pk_live_51H8abcDEF123ghiJKL456mnoPQR in the checkout page") == []
