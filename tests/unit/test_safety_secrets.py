"""SAFE-1: secrets are found, refused with a pointer hint, and scrubbed."""

from __future__ import annotations

import random
import string
from itertools import pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st

from quipu.errors import SecretDetected
from quipu.safety import SecretFinding, find_secrets, scrub_secrets, secret_error

JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
    ".eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ"
    ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
PRIVATE_KEY = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\n"
    "VTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK\n"
    "-----END RSA PRIVATE KEY-----"
)

# (text, secret substring, kind)
SECRETS = [
    ("my key is sk-proj-AbCdEf1234567890GhIjKlMnOpQrStUv ok", "sk-proj-", "openai_key"),
    ("sk-9a8B7c6D5e4F3g2H1i0JkLmNoPqRsTuVwXyZ01234567", "sk-9a8B", "openai_key"),
    ("key sk-ant-api03-AbCdEf1234567890GhIjKlMnOpQrStUv-xyz", "sk-ant-", "anthropic_key"),
    ("id AKIAIOSFODNN7EXAMPLE here", "AKIAIOSFODNN7EXAMPLE", "aws_access_key"),
    ("temp ASIAY34FZKBOKMUTVV7A", "ASIAY34FZKBOKMUTVV7A", "aws_access_key"),
    (
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "aws_secret_key",
    ),
    ("token ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8", "ghp_", "github_token"),
    ("gho_16C7e42F292c6912E7710c838347Ae178B4a", "gho_", "github_token"),
    ("github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz", "github_pat_", "github_token"),
    ("glpat-Ab12Cd34Ef56Gh78Ij90", "glpat-", "gitlab_token"),
    ("xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx", "xoxb-", "slack_token"),
    ("stripe sk_live_4eC39HqLyjWDarjtT1zdp7dc", "sk_live_", "stripe_key"),
    ("rk_live_51H8abcDEF123ghiJKL456", "rk_live_", "stripe_key"),
    ("maps AIzaSyA1234567890abcdefghijklmnopqrstuv", "AIzaSy", "google_api_key"),
    (f"session {JWT}", JWT, "jwt"),
    (
        "Authorization: Bearer abcDEF1234567890ghiJKLmno",
        "abcDEF1234567890ghiJKLmno",
        "bearer_token",
    ),
    (f"deploy key:\n{PRIVATE_KEY}\nthanks", PRIVATE_KEY, "private_key"),
    ("password=hunter2", "hunter2", "password_assignment"),
    ("passwd: s3cr3t!", "s3cr3t!", "password_assignment"),
    ('pwd = "correct horse"', "correct horse", "password_assignment"),
    ('{"db_password": "Tr0ub4dor&3"}', "Tr0ub4dor&3", "password_assignment"),
    ("secret=abcd1234", "abcd1234", "password_assignment"),
    ("my password is hunter2", "hunter2", "password_assignment"),
    ("postgres://admin:S3cretPw@db.example.com/app", "S3cretPw", "password_assignment"),
    ("api_key=Ab12Cd34Ef56Gh78", "Ab12Cd34Ef56Gh78", "generic_api_key"),
    ("token: Zx9Yw8Vu7Ts6Rq5P", "Zx9Yw8Vu7Ts6Rq5P", "generic_api_key"),
    ("card 4111 1111 1111 1111 thanks", "4111 1111 1111 1111", "payment_card"),
    ("4242424242424242", "4242424242424242", "payment_card"),
    ("mc 5555-5555-5555-4444.", "5555-5555-5555-4444", "payment_card"),
    ("amex 3782 822463 10005", "3782 822463 10005", "payment_card"),
    ("ssn 123-45-6789", "123-45-6789", "us_ssn"),
    ("NI number AB 12 34 56 C", "AB 12 34 56 C", "uk_nino"),
    ("nino JG103759A", "JG103759A", "uk_nino"),
    ("pay DE89 3704 0044 0532 0130 00 please", "DE89 3704 0044 0532 0130 00", "iban"),
    ("GB82WEST12345698765432", "GB82WEST12345698765432", "iban"),
    ("BE68 5390 0754 7034 SEPA", "BE68 5390 0754 7034", "iban"),
]

PROSE = [
    "I was born in 1985 and my phone ends in 4242",
    "order #4111 1111 1111 1112",
    "the password policy requires 12 characters",
    "my password is something I forget",
    "Password: must be at least 12 characters long",
    "Secret: The meeting is at noon",
    "request 123e4567-e89b-12d3-a456-426614174000 failed",
    "fixed in commit 3f2a9c1d8e7b6a5f4e3d2c1b0a9f8e7d6c5b4a39",
    "released 2024-01-15T10:30:00Z as version 1.2.3-rc.1 (build 20240115)",
    "the meeting moved from 2023-12-01 to 12/05/2024",
    "call +1 415 555 2671 or 020 7946 0958",
    "max_tokens=4096 and temperature=0.7",
    "timestamp 1700000000000 in ms",
    "I use scikit-learn (sk-learn) and sk-ant tests",
    "the bearer of bad news",
    "ssn 666-45-6789 and 000-12-3456 and 912-34-5678 are invalid areas",
    "GB82WEST12345698765433",
    "api_key = OPENAI_API_KEY",
    "password: ${DB_PASSWORD}",
    "token: env:GITHUB_TOKEN",
    "password: vault:secret/db/prod",
    "password = settings.db_password",
    "pwd: /home/alice/projects",
    "password: None",
    "password=****",
    "",
]


@pytest.mark.parametrize(("text", "secret", "kind"), SECRETS)
def test_safe_001_known_secret_shapes_found(text: str, secret: str, kind: str) -> None:
    findings = find_secrets(text)
    assert [f.kind for f in findings] == [kind]
    found = text[findings[0].start : findings[0].end]
    assert found.startswith(secret) or found == secret
    assert secret in found


@pytest.mark.parametrize("text", PROSE)
def test_safe_001_ordinary_prose_not_flagged(text: str) -> None:
    assert find_secrets(text) == []


def test_safe_001_luhn_valid_card_refused() -> None:
    assert [f.kind for f in find_secrets("card 4012 8888 8888 1881")] == ["payment_card"]
    assert find_secrets("card 4012 8888 8888 1882") == []


def test_safe_001_iban_checksum_required() -> None:
    assert [f.kind for f in find_secrets("FR1420041010050500013M02606")] == ["iban"]
    assert find_secrets("FR1420041010050500013M02607") == []


def test_safe_001_private_key_without_end_line_still_found() -> None:
    text = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU\n\nThe end"
    findings = find_secrets(text)
    assert [f.kind for f in findings] == ["private_key"]
    assert "b3BlbnNzaC1rZXktdjEAAAAABG5vbmU" in text[findings[0].start : findings[0].end]
    assert "The end" not in text[findings[0].start : findings[0].end]


def test_safe_001_specific_kind_wins_over_assignment() -> None:
    text = "OPENAI_API_KEY=sk-proj-AbCdEf1234567890GhIjKlMnOpQrStUv"
    assert [f.kind for f in find_secrets(text)] == ["openai_key"]


def test_safe_001_findings_sorted_and_non_overlapping() -> None:
    text = f"ssn 123-45-6789, token {JWT}, card 4111111111111111, password=hunter2"
    findings = find_secrets(text)
    assert [f.kind for f in findings] == ["us_ssn", "jwt", "payment_card", "password_assignment"]
    for before, after in pairwise(findings):
        assert before.end <= after.start


def test_safe_001_offsets_are_in_the_original_unicode_string() -> None:
    text = "naïve 日本語 🙂 password=hunter2 and\x00ssn 123-45-6789"
    findings = find_secrets(text)
    assert [text[f.start : f.end] for f in findings] == ["hunter2", "123-45-6789"]


def test_safe_001_unicode_digits_are_not_card_digits() -> None:
    assert find_secrets("٤١١١١١١١١١١١١١١١") == []


def test_safe_001_scrub_replaces_spans_with_kind_markers() -> None:
    text = "use sk-proj-AbCdEf1234567890GhIjKlMnOpQrStUv with password=hunter2 today"
    scrubbed, findings = scrub_secrets(text)
    assert scrubbed == (
        "use [REDACTED:openai_key] with password=[REDACTED:password_assignment] today"
    )
    assert [f.kind for f in findings] == ["openai_key", "password_assignment"]
    assert text[findings[0].start : findings[0].end].startswith("sk-proj-")


def test_safe_001_scrub_is_stable() -> None:
    for text, _, _ in SECRETS:
        scrubbed, _ = scrub_secrets(text)
        assert find_secrets(scrubbed) == []
        assert scrub_secrets(scrubbed) == (scrubbed, [])


def test_safe_001_scrub_leaves_clean_text_alone() -> None:
    assert scrub_secrets("nothing to see") == ("nothing to see", [])
    assert scrub_secrets("") == ("", [])


def test_safe_001_error_names_kinds_and_spans_never_the_value() -> None:
    text = "my key sk-proj-AbCdEf1234567890GhIjKlMnOpQrStUv and ssn 123-45-6789"
    findings = find_secrets(text)
    error = secret_error(findings)
    assert isinstance(error, SecretDetected)
    assert error.code == "secret_detected"
    assert error.status == 422
    assert "openai_key" in error.message
    assert "us_ssn" in error.message
    assert "vault path" in error.message
    assert "env var" in error.message
    assert error.details == {
        "findings": [{"kind": f.kind, "start": f.start, "end": f.end} for f in findings]
    }
    dumped = repr(error.to_dict())
    assert "AbCdEf1234567890" not in dumped
    assert "6789" not in dumped


def test_safe_001_finding_is_frozen() -> None:
    finding = SecretFinding("jwt", 1, 2)
    with pytest.raises(AttributeError):
        finding.start = 5  # type: ignore[misc]


@pytest.mark.parametrize(
    "text",
    [
        "a" * 1_000_000,
        "1" * 1_000_000,
        "1 " * 500_000,
        "eyJ" * 333_333,
        "eyJab." * 160_000,
        "sk-" * 333_333,
        "a=" * 500_000,
        "password=x " * 90_000,
        "-----BEGIN RSA PRIVATE KEY-----" * 30_000,
        "\x00" * 1_000_000,
        "\U0001f642" * 250_000,
    ],
    ids=[
        "a",
        "digits",
        "spaced-digits",
        "eyJ",
        "eyJ-dots",
        "sk",
        "assign",
        "pw",
        "pem",
        "nul",
        "emoji",
    ],
)
def test_safe_005_adversarial_megabyte_inputs_complete(text: str) -> None:
    findings = find_secrets(text)
    assert all(0 <= f.start < f.end <= len(text) for f in findings)


def test_safe_005_random_megabyte_completes() -> None:
    rng = random.Random(7)
    for alphabet in (string.printable, string.ascii_letters + string.digits + "-_.=:/ "):
        text = "".join(rng.choices(alphabet, k=1_000_000))
        findings = find_secrets(text)
        assert all(a.end <= b.start for a, b in pairwise(findings))


@given(st.text(max_size=300))
def test_safe_001_findings_well_formed_for_any_text(text: str) -> None:
    findings = find_secrets(text)
    assert findings == sorted(findings, key=lambda f: f.start)
    for before, after in pairwise(findings):
        assert before.end <= after.start
    assert all(0 <= f.start < f.end <= len(text) for f in findings)
    scrubbed, again = scrub_secrets(text)
    assert again == findings
    assert find_secrets(scrubbed) == []


FRAGMENTS = [s for s, _, _ in SECRETS] + PROSE + ["=", ":", " ", "\n", '"', "password", "-"]


@given(st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=5), max_size=8).map("".join))
def test_safe_001_scrub_removes_every_secret_in_mixed_text(text: str) -> None:
    scrubbed, findings = scrub_secrets(text)
    assert find_secrets(scrubbed) == []
    assert scrubbed.count("[REDACTED:") == len(findings) + text.count("[REDACTED:")


@pytest.mark.parametrize(
    "text",
    [
        'password = os.environ["DB_PASSWORD"]',
        "secret = get_secret()",
        "api_key: <your-api-key>",
        "password: '%(db_password)s'",
    ],
)
def test_safe_001_code_references_and_placeholders_not_flagged(text: str) -> None:
    assert find_secrets(text) == []


@pytest.mark.parametrize(
    ("text", "value"),
    [("password=Pa55(word", "Pa55(word"), ("password: Summer2024.Fall", "Summer2024.Fall")],
)
def test_safe_001_password_with_symbols_still_flagged(text: str, value: str) -> None:
    findings = find_secrets(text)
    assert [text[f.start : f.end] for f in findings] == [value]


def test_safe_001_glued_keys_are_all_found() -> None:
    google = "AIzaSyA1234567890abcdefghijklmnopqrstuv"
    openai = "sk-9a8B7c6D5e4F3g2H1i0JkLmNoPqRsTuVwXyZ01234567"
    findings = find_secrets(google + openai)
    assert [f.kind for f in findings] == ["google_api_key", "openai_key"]


def test_safe_001_value_running_into_a_key_is_hidden_whole() -> None:
    text = "password=ab!sk-9a8B7c6D5e4F3g2H1i0JkLmNoPqRsTuVwXyZ01234567 ok"
    scrubbed, _ = scrub_secrets(text)
    assert scrubbed == "password=[REDACTED:password_assignment] ok"


def test_safe_001_a_hex_id_opening_with_digits_is_not_a_card() -> None:
    """A random 32-hex id whose first 15 characters are digits passed Luhn about once in 6,000
    ids and was refused as a card, in an audit row written after a subject-erasure job was
    already queued (a partial write). A card number ends where letters begin."""
    assert find_secrets("691848710482452ba5f876ee890849f7") == []
    assert find_secrets("job 691848710482452ba5f876ee890849f7 queued") == []
    assert [f.kind for f in find_secrets("card 4111 1111 1111 1111, exp 12/29")] == ["payment_card"]
