"""Token shapes the providers document: a fixed prefix, a length, an alphabet, a checksum.

Each rule names the literal ``anchors`` one of which any match contains (checked in the
lower-cased text first, so a turn without ``xox`` never runs the Slack pattern), and the
pattern itself. Patterns start behind a lookbehind that excludes the characters they then
scan, with possessive or bounded quantifiers, so no attempt backtracks or walks far.
Formats were written from the providers' token documentation and public scanner rule sets
(gitleaks, detect-secrets), checked against synthetic examples in the tests.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["TOKEN_RULES", "TokenRule", "luhn_card", "token_spans"]

_B = r"(?<![A-Za-z0-9_\-])"  # not inside a longer token
_B64 = r"A-Za-z0-9+/"


Spans = Callable[[re.Match[str]], list[tuple[int, int]]]


@dataclass(frozen=True)
class TokenRule:
    """One token shape.

    A rule runs only where it can match. ``anchors`` are lower-case literal pieces every
    match holds: the rule runs inside each run of 16+ non-space characters whose lower-cased
    text holds one (``reach`` lets a match run on past the run, for multi-line PEM bodies).
    A rule without anchors has a ``trigger`` pattern instead and runs in a ``window`` after
    each trigger match (0: the trigger match itself). ``check`` vets a match; ``spans`` picks
    the secret spans out of a match (cards, IBANs); a ``value`` group is the span reported.
    """

    kind: str
    anchors: tuple[str, ...]
    pattern: re.Pattern[str]
    check: Callable[[str], bool] | None = None
    spans: Spans | None = None
    reach: int = 0
    trigger: re.Pattern[str] | None = None
    window: int = 0

    def spans_in(self, text: str, start: int, end: int, first_before: int) -> set[tuple[int, int]]:
        """Findings of matches in ``text[start:end]`` that start before ``first_before``."""
        found: set[tuple[int, int]] = set()
        has_value = "value" in self.pattern.groupindex
        for match in self.pattern.finditer(text, start, end):
            if match.start() >= first_before:
                break
            if self.spans is not None:
                found.update(self.spans(match))
            elif has_value:
                if self.check is None or self.check(match["value"]):
                    found.add(match.span("value"))
            elif self.check is None or self.check(match[0]):
                found.add(match.span())
        return found


def _rule(
    kind: str,
    anchors: str | tuple[str, ...],
    pattern: str,
    check: Callable[[str], bool] | None = None,
    spans: Spans | None = None,
    reach: int = 0,
) -> TokenRule:
    names = (anchors,) if isinstance(anchors, str) else anchors
    lowered = tuple(dict.fromkeys(a.lower() for a in names))
    return TokenRule(kind, lowered, re.compile(pattern), check, spans, reach)


# Where anchorless rules run: digit chains (cards, SSNs); two capitals then digits (IBANs,
# National Insurance numbers).
_NUMBER_CHAIN = re.compile(r"[0-9][0-9 \-\r\n\t]{10,}+")
_LETTERS_DIGITS = re.compile(r"[A-Z]{2} ?[0-9]{2}")


def _triggered(
    kind: str,
    trigger: str | re.Pattern[str],
    window: int,
    pattern: str,
    spans: Spans | None = None,
) -> TokenRule:
    compiled = trigger if isinstance(trigger, re.Pattern) else re.compile(trigger)
    return TokenRule(kind, (), re.compile(pattern), spans=spans, trigger=compiled, window=window)


def _mixed(token: str) -> bool:
    """At least two of lower, upper and digits, as random keys have."""
    classes = (
        any(c.islower() for c in token),
        any(c.isupper() for c in token),
        any(c.isdigit() for c in token),
    )
    return sum(classes) >= 2


def _tail_mixed(prefix_length: int) -> Callable[[str], bool]:
    return lambda token: _mixed(token[prefix_length:])


def _luhn(digits: str) -> bool:
    total = 0
    for i, char in enumerate(reversed(digits)):
        n = ord(char) - 48
        if i % 2 == 1:
            n = n * 2 - 9 if n > 4 else n * 2
        total += n
    return total % 10 == 0


def luhn_card(candidate: str) -> bool:
    """A payment card number: 13-19 digits, a card-network first digit, Luhn-valid.

    Groups are split by a space, a hyphen or a line break. Without a line break the groups
    must follow a card layout (4-4-4-4, 4-6-5, 4-4-4-1..3, or one run); a list of years or
    a table of small numbers is not a card.
    """
    groups = re.findall(r"[0-9]+", candidate)
    digits = "".join(groups)
    if not (13 <= len(digits) <= 19 and digits[0] in "23456" and len(set(digits)) > 1):
        return False
    if "\n" in candidate:
        # a card wrapped over lines: groups of four or more digits, a line break between
        if any(len(g) < 4 for g in groups[:-1]) or len(groups) > 5:
            return False
    elif len(groups) > 1:
        sizes = [len(g) for g in groups]
        layout = (
            all(s == 4 for s in sizes[:-1]) and 1 <= sizes[-1] <= 4 and len(sizes) >= 4
        ) or sizes in ([4, 6, 5], [4, 6, 4])
        if not layout:
            return False
        if all(len(g) == 4 and 1900 <= int(g) <= 2099 for g in groups):
            return False
    return _luhn(digits)


def _card_spans(match: re.Match[str]) -> list[tuple[int, int]]:
    """The card inside a run of digit groups: the whole run, else its longest card slice."""
    if sum(c.isdigit() for c in match[0]) < 13:
        return []
    groups = [(m.start(), m.end()) for m in re.finditer(r"[0-9]+", match[0])]
    base = match.start()
    for size in range(len(groups), 0, -1):
        for first in range(len(groups) - size + 1):
            start, end = groups[first][0], groups[first + size - 1][1]
            if luhn_card(match[0][start:end]):
                return [(base + start, base + end)]
    return []


# Length of an IBAN per country (ISO 13616 registry).
_IBAN_LENGTHS = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22,
    "BH": 22, "BI": 27, "BR": 29, "BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24,
    "DE": 22, "DJ": 27, "DK": 18, "DO": 28, "EE": 20, "EG": 29, "ES": 24, "FI": 18,
    "FK": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23, "GL": 18, "GR": 27,
    "GT": 28, "HR": 21, "HU": 28, "IE": 22, "IL": 23, "IQ": 23, "IS": 26, "IT": 27,
    "JO": 30, "KW": 30, "KZ": 20, "LB": 28, "LC": 32, "LI": 21, "LT": 20, "LU": 20,
    "LV": 21, "LY": 25, "MC": 27, "MD": 24, "ME": 22, "MK": 19, "MN": 20, "MR": 27,
    "MT": 31, "MU": 30, "NI": 28, "NL": 18, "NO": 15, "OM": 23, "PK": 24, "PL": 28,
    "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22, "RU": 33, "SA": 24, "SC": 31,
    "SD": 18, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "SO": 23, "ST": 25, "SV": 28,
    "TL": 23, "TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20, "YE": 30,
}  # fmt: skip


def _iban_valid(compact: str) -> bool:
    if _IBAN_LENGTHS.get(compact[:2]) != len(compact):
        return False
    rearranged = compact[4:] + compact[:4]
    return int("".join(str(int(c, 36)) for c in rearranged)) % 97 == 1


def _iban_spans(match: re.Match[str]) -> list[tuple[int, int]]:
    """The longest prefix of the match that is a valid IBAN (shorter ones end at a space, so
    an upper-case word after a grouped IBAN is dropped)."""
    candidate = match[0]
    cuts = [len(candidate)] + [i for i in range(len(candidate) - 1, 0, -1) if candidate[i] == " "]
    for cut in cuts:
        if _iban_valid(candidate[:cut].replace(" ", "")):
            return [(match.start(), match.start() + cut)]
    return []


def _pem_in_base64(token: str) -> bool:
    """A base64 blob that decodes to a PEM private key header (kubeconfig ``*-key-data``)."""
    head = token[: (min(len(token), 120) // 4) * 4]
    try:
        decoded = base64.b64decode(head, validate=True)
    except (binascii.Error, ValueError):
        return False
    return b"PRIVATE KEY" in decoded


TOKEN_RULES: tuple[TokenRule, ...] = (
    # --- cloud providers
    _rule(
        "aws_access_key",
        ("AKIA", "ASIA", "ABIA", "ACCA", "A3T", "AGPA", "AIDA", "AIPA", "ANPA", "ANVA", "AROA"),
        r"(?<![A-Za-z0-9])(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|ANPA|ANVA|AROA|A3T[A-Z0-9])"
        r"[A-Z0-9]{16}(?![A-Za-z0-9])",
    ),
    _rule(
        "azure_storage_key",
        ("accountkey=", "sharedaccesskey=", "primarykey=", "secondarykey="),
        r"(?i:AccountKey|SharedAccessKey|PrimaryKey|SecondaryKey)="
        rf"(?P<value>[{_B64}]{{30,}}+={{0,2}})",
    ),
    _rule(
        "azure_sas_signature",
        "sig=",
        r"(?<=[?&;])sig=(?P<value>(?:[A-Za-z0-9+/]|%2[Bb]|%2[Ff]){20,}+(?:=|%3[Dd]){0,2})",
    ),
    _rule(
        "azure_client_secret",
        "Q~",
        r"(?<![A-Za-z0-9_~.\-])[A-Za-z0-9_~.]{3}[0-9]Q~[A-Za-z0-9_~.\-]{31,34}"
        r"(?![A-Za-z0-9_~.\-])",
    ),
    _rule("google_api_key", "AIza", _B + r"AIza[A-Za-z0-9_\-]{35}"),
    _rule("google_oauth_secret", "GOCSPX-", _B + r"GOCSPX-[A-Za-z0-9_\-]{24,32}"),
    _rule("google_oauth_token", "ya29.", _B + r"ya29\.[A-Za-z0-9_\-]{30,}+"),
    _rule("google_refresh_token", "1//0", r"(?<![A-Za-z0-9/])1//0[A-Za-z0-9_\-]{40,}+"),
    _rule("digitalocean_token", ("dop_v1_", "doo_v1_", "dor_v1_"), _B + r"do[opr]_v1_[a-f0-9]{64}"),
    _rule("alibaba_access_key", "LTAI", r"(?<![A-Za-z0-9])LTAI[A-Za-z0-9]{12,20}(?![A-Za-z0-9])"),
    _rule("tencent_secret_id", "AKID", r"(?<![A-Za-z0-9])AKID[A-Za-z0-9]{32}(?![A-Za-z0-9])"),
    _rule("heroku_key", "HRKU-", _B + r"HRKU-[A-Za-z0-9_\-]{58,60}"),
    _rule(
        "flyio_token",
        ("fo1_", "fm1", "fm2_"),
        _B + r"(?:fo1_[\w\-]{43}|fm[12][ar]?_[A-Za-z0-9+/]{60,}+)",
    ),
    _rule("databricks_token", "dapi", _B + r"dapi[a-f0-9]{32}(?:-[0-9])?"),
    _rule("cloudflare_origin_ca_key", "v1.0-", _B + r"v1\.0-[a-f0-9]{24}-[a-f0-9]{146}"),
    _rule(
        "supabase_token",
        ("sbp_", "sb_secret_"),
        _B + r"(?:sbp_[a-f0-9]{40}|sb_secret_[A-Za-z0-9_\-]{20,}+)",
    ),
    _rule("netlify_token", "nfp_", _B + r"nfp_[A-Za-z0-9]{36,40}"),
    _rule(
        "terraform_token",
        ".atlasv1.",
        r"(?<![A-Za-z0-9])[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_\-=]{60,70}",
    ),
    _rule("pulumi_token", "pul-", _B + r"pul-[a-f0-9]{40}"),
    _rule("doppler_token", "dp.", _B + r"dp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{40,44}"),
    _rule(
        "vault_token",
        ("hvs.", "hvb.", "hvr."),
        _B + r"hv[sbr]\.[A-Za-z0-9_\-]{20,}+",
        _tail_mixed(4),
    ),
    _rule("age_secret_key", "AGE-SECRET-KEY-1", r"AGE-SECRET-KEY-1[0-9A-Z]{58}"),
    # --- source hosting, registries, CI
    _rule(
        "github_token",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
        _B + r"(?:gh[pousr]_[A-Za-z0-9]{30,}+|github_pat_[A-Za-z0-9_]{22,}+)",
    ),
    _rule(
        "gitlab_token",
        (
            "glpat-",
            "gldt-",
            "glptt-",
            "glrt-",
            "glcbt-",
            "glsoat-",
            "glffct-",
            "glft-",
            "glimt-",
            "glagent-",
            "gloas-",
            "GR1348941",
        ),
        _B + r"(?:gl(?:pat|dt|ptt|rt|cbt|soat|ffct|ft|imt|agent|oas)-[A-Za-z0-9_\-.]{20,}+"
        r"|GR1348941[A-Za-z0-9_\-]{20,}+)",
    ),
    _rule("bitbucket_token", "ATBB", _B + r"ATBB[A-Za-z0-9_=.\-]{28,}+"),
    _rule("atlassian_token", ("ATATT3", "ATCTT3"), _B + r"AT[AC]TT3[A-Za-z0-9_\-=]{40,}+"),
    _rule("npm_token", "npm_", _B + r"npm_[A-Za-z0-9]{36}"),
    _rule("pypi_token", "pypi-AgE", _B + r"pypi-AgE[A-Za-z0-9_\-]{40,}+"),
    _rule("rubygems_token", "rubygems_", _B + r"rubygems_[a-f0-9]{48}"),
    _rule("clojars_token", "CLOJARS_", r"CLOJARS_[a-z0-9]{60}"),
    _rule("docker_token", "dckr_pat_", _B + r"dckr_pat_[A-Za-z0-9_\-]{20,}+"),
    _rule(
        "jfrog_token",
        ("AKCp", "cmVmdGtu"),
        _B + r"(?:AKCp[A-Za-z0-9]{60,80}|cmVmdGtu[A-Za-z0-9]{50,}+)",
    ),
    _rule("octopus_key", "API-", r"(?<![A-Za-z0-9\-])API-[A-Z0-9]{26}(?![A-Za-z0-9])"),
    _rule("prefect_token", "pnu_", _B + r"pnu_[A-Za-z0-9]{36}"),
    _rule("readme_token", "rdme_", _B + r"rdme_[a-z0-9]{70}"),
    _rule("scalingo_token", "tk-us-", _B + r"tk-us-[A-Za-z0-9_\-]{48}"),
    _rule(
        "harness_token",
        ("pat.", "sat."),
        _B + r"(?:pat|sat)\.[A-Za-z0-9_\-]{22}\.[A-Za-z0-9]{24}\.[A-Za-z0-9]{20}",
    ),
    _rule("postman_key", "PMAK-", _B + r"PMAK-[a-f0-9]{24}-[a-f0-9]{34}"),
    _rule("planetscale_token", "pscale_", _B + r"pscale_(?:tkn|pw|oauth)_[A-Za-z0-9_=.\-]{32,64}"),
    # --- chat, messaging, mail
    _rule(
        "slack_token",
        ("xox", "xapp-"),
        _B + r"(?:xox[abposer]|xoxe\.xox[bp]|xapp)-[A-Za-z0-9\-]{10,}+",
    ),
    _rule(
        "slack_webhook",
        "hooks.slack.com/",
        r"hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9+/_\-]{20,}+",
    ),
    _rule(
        "discord_webhook",
        "/api/webhooks/",
        r"discord(?:app)?\.com/api/webhooks/[0-9]{15,20}/[A-Za-z0-9_\-]{40,}+",
    ),
    _rule(
        "teams_webhook",
        ".webhook.office.com/",
        r"[A-Za-z0-9\-]{1,60}\.webhook\.office\.com/webhookb2/[A-Za-z0-9@\-/]{40,}+",
    ),
    _rule(
        "discord_bot_token",
        ".",
        r"(?<![A-Za-z0-9_\-.])[MNO][A-Za-z0-9_\-]{23,27}\.[A-Za-z0-9_\-]{6,7}\.[A-Za-z0-9_\-]{27,40}"
        r"(?![A-Za-z0-9_\-]|\.[A-Za-z0-9])",
        _mixed,
    ),
    _rule(
        "telegram_bot_token",
        ":AA",
        r"(?<![A-Za-z0-9:])[0-9]{6,12}:AA[A-Za-z0-9_\-]{32,34}(?![A-Za-z0-9_\-])",
    ),
    _rule("sendgrid_key", "SG.", _B + r"SG\.[A-Za-z0-9_\-]{16,32}\.[A-Za-z0-9_\-]{30,64}"),
    _rule(
        "sendinblue_key",
        ("xkeysib-", "xsmtpsib-"),
        _B + r"x(?:keysib|smtpsib)-[a-f0-9]{64}-[A-Za-z0-9]{16}",
    ),
    _rule("twilio_key", ("SK", "AC"), r"(?<![A-Za-z0-9])(?:SK|AC)[0-9a-fA-F]{32}(?![A-Za-z0-9])"),
    _rule(
        "mailgun_key",
        "-",
        r"(?<![A-Za-z0-9\-])(?:key-[0-9a-f]{32}|[0-9a-f]{32}-[0-9a-f]{8}-[0-9a-f]{8})"
        r"(?![A-Za-z0-9\-])",
    ),
    _rule("mailchimp_key", "-us", r"(?<![A-Za-z0-9])[0-9a-f]{32}-us[0-9]{1,2}(?![A-Za-z0-9])"),
    # --- payments and commerce
    _rule(
        "stripe_key",
        ("sk_", "rk_", "whsec_"),
        # publishable keys (pk_) are public by design and are not refused
        _B + r"(?:(?:sk|rk)_(?:live|test|prod)_[A-Za-z0-9]{16,}+|whsec_[A-Za-z0-9+/=]{24,}+)",
    ),
    _rule(
        "shopify_token",
        ("shpat_", "shpca_", "shppa_", "shpss_"),
        _B + r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}",
    ),
    _rule(
        "square_token",
        ("sq0atp-", "sq0csp-", "EAAA"),
        _B + r"(?:sq0atp-[A-Za-z0-9_\-]{22}|sq0csp-[A-Za-z0-9_\-]{43}|EAAA[A-Za-z0-9_\-]{60})",
    ),
    _rule(
        "braintree_token",
        "access_token$",
        r"access_token\$(?:production|sandbox)\$[a-z0-9]{16}\$[a-f0-9]{32}",
    ),
    _rule("flutterwave_key", "FLWSECK", _B + r"FLWSECK(?:_TEST)?-[a-h0-9]{32}-X"),
    _rule("razorpay_key", "rzp_", _B + r"rzp_(?:live|test)_[A-Za-z0-9]{14,}+"),
    _rule("shippo_token", "shippo_", _B + r"shippo_(?:live|test)_[a-f0-9]{40}"),
    _rule("easypost_key", ("EZAK", "EZTK"), _B + r"EZ[AT]K[A-Za-z0-9]{54}"),
    _rule("duffel_token", "duffel_", _B + r"duffel_(?:test|live)_[A-Za-z0-9_\-=]{43}"),
    # --- AI and SaaS APIs
    _rule("anthropic_key", "sk-ant-", _B + r"sk-ant-[A-Za-z0-9_\-]{20,}+"),
    _rule(
        "openai_key",
        "sk-",
        _B + r"sk-(?!ant-)(?:proj-|svcacct-|admin-|None-|or-v1-)?[A-Za-z0-9_\-]{20,}+",
        _tail_mixed(3),
    ),
    _rule(
        "huggingface_token",
        ("hf_", "api_org_"),
        _B + r"(?:hf|api_org)_[A-Za-z0-9]{30,40}",
        _tail_mixed(3),
    ),
    _rule("groq_key", "gsk_", _B + r"gsk_[A-Za-z0-9]{48,56}"),
    _rule("replicate_token", "r8_", _B + r"r8_[A-Za-z0-9]{37,40}"),
    _rule("perplexity_key", "pplx-", _B + r"pplx-[A-Za-z0-9]{48}"),
    _rule("xai_key", "xai-", _B + r"xai-[A-Za-z0-9]{60,90}"),
    _rule("linear_key", "lin_api_", _B + r"lin_api_[A-Za-z0-9]{40}"),
    _rule(
        "notion_token",
        ("ntn_", "secret_"),
        _B + r"(?:ntn_[0-9]{11}[A-Za-z0-9]{35}|secret_[A-Za-z0-9]{43})",
        _mixed,
    ),
    _rule("airtable_token", "pat", _B + r"pat[A-Za-z0-9]{14}\.[a-f0-9]{64}"),
    _rule(
        "grafana_token",
        ("glc_", "glsa_", "eyJrIjoi"),
        _B + r"(?:glc_[A-Za-z0-9+/]{32,}+={0,2}|glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}"
        r"|eyJrIjoi[A-Za-z0-9]{40,}+={0,2})",
    ),
    _rule("newrelic_key", ("NRAK-", "NRII-"), _B + r"(?:NRAK-[A-Z0-9]{27}|NRII-[A-Za-z0-9\-]{32})"),
    _rule(
        "sentry_token",
        ("sntrys_", "sntryu_"),
        _B + r"(?:sntrys_[A-Za-z0-9+/=_]{50,}+|sntryu_[a-f0-9]{64})",
    ),
    _rule("dynatrace_token", "dt0c01.", _B + r"dt0c01\.[A-Z0-9]{24}\.[A-Za-z0-9]{64}"),
    _rule("contentful_token", "CFPAT-", _B + r"CFPAT-[A-Za-z0-9_\-]{43}"),
    _rule("infracost_token", "ico-", _B + r"ico-[A-Za-z0-9]{32}"),
    _rule("mapbox_secret", "sk.eyJ", _B + r"sk\.eyJ[A-Za-z0-9_\-]{40,}+\.[A-Za-z0-9_\-]{16,}+"),
    _rule("yandex_key", "AQVN", _B + r"AQVN[A-Za-z0-9_\-]{35,38}"),
    _rule("meta_access_token", "EAA", r"(?<![A-Za-z0-9])EAA[BCGIM][A-Za-z0-9]{80,}+", _mixed),
    _rule("twitter_bearer", "AAAAAAAAAAAAAAAAAAAAAA", r"A{22}[A-Za-z0-9%]{60,}+", _tail_mixed(22)),
    _rule(
        "onepassword_secret",
        ("A3-", "ops_eyJ"),
        r"(?<![A-Za-z0-9\-])(?:A3-[A-Z0-9]{6}-(?:[A-Z0-9]{11}|[A-Z0-9]{6}-[A-Z0-9]{5})"
        r"(?:-[A-Z0-9]{5}){3}|ops_eyJ[A-Za-z0-9+/]{100,}+={0,3})",
    ),
    # --- structured secrets
    _rule(
        "jwt",
        "eyJ",
        r"(?<![A-Za-z0-9_\-.])eyJ[A-Za-z0-9_\-]{4,}+\.eyJ[A-Za-z0-9_\-]{4,}+\.[A-Za-z0-9_\-]{8,}+",
    ),
    _rule(
        "private_key",
        ("MII", "MHcC", "MIG", "MC4C", "b3BlbnNzaC1rZXktdjE"),
        rf"(?<![{_B64}])(?:MII[{_B64}]{{2}}[AQgw]IBA[AD]|MIG[{_B64}]AgEA|MHcCAQEE|MIGkAgEBBD"
        rf"|MC4CAQAwBQYDK2Vw|b3BlbnNzaC1rZXktdjE)[{_B64}]{{36,}}+"
        rf"(?:[ \t]{{0,4}}\\?n?(?:\r?\n)?[ \t]{{0,4}}[{_B64}]{{16,}}+)*+={{0,2}}",
        reach=64_000,
    ),
    _rule(
        "private_key",
        "LS0tLS1CRUdJTi",
        rf"(?<![{_B64}])LS0tLS1CRUdJTi[{_B64}]{{40,}}+={{0,2}}",
        _pem_in_base64,
    ),
    _triggered(
        "private_key",
        "Private-Lines:",
        64_000,
        r"Private-Lines:[ \t]*[0-9]{1,3}[ \t]*\r?\n"
        rf"(?:[ \t]*[{_B64}]{{16,}}+={{0,2}}[ \t]*\r?\n?)++",
    ),
    # --- payment cards and government ids
    _triggered(
        "payment_card",
        _NUMBER_CHAIN,
        0,
        r"(?<![0-9A-Za-z.,\-])[0-9]{1,19}+(?:(?:[ \-]|[ \t]{0,2}\r?\n[ \t]{0,8})[0-9]{1,19}+)"
        r"{0,6}+(?![0-9A-Za-z]|[.,\-][0-9])",
        spans=_card_spans,
    ),
    _triggered(
        "us_ssn",
        _NUMBER_CHAIN,
        0,
        r"(?<![0-9A-Za-z\-])(?!000|666|9)[0-9]{3}(?P<sep>[\- ])(?!00)[0-9]{2}(?P=sep)"
        r"(?!0000)[0-9]{4}(?![0-9A-Za-z]|[\- ][0-9])",
    ),
    _triggered(
        "uk_nino",
        _LETTERS_DIGITS,
        48,
        r"(?<![A-Za-z0-9])(?!BG|GB|KN|NK|NT|TN|ZZ)[A-CEGHJ-PR-TW-Z][A-CEGHJ-NPR-TW-Z]"
        r"(?: ?[0-9]{2}){3} ?[A-D](?![A-Za-z0-9])",
    ),
    _triggered(
        "iban",
        _LETTERS_DIGITS,
        48,
        r"(?<![A-Za-z0-9])[A-Z]{2}[0-9]{2}"
        r"(?:[A-Z0-9]{11,30}|(?: [A-Z0-9]{4}){2,7}(?: [A-Z0-9]{1,3})?)(?![A-Za-z0-9])",
        spans=_iban_spans,
    ),
)

_RUN = re.compile(r"\S{16,}+")
_ANCHORED = tuple(rule for rule in TOKEN_RULES if rule.anchors)
_ANCHORS = tuple(dict.fromkeys(a for rule in _ANCHORED for a in rule.anchors))
_RULES_BY_ANCHOR = {a: tuple(r for r in _ANCHORED if a in r.anchors) for a in _ANCHORS}
_BY_TRIGGER: dict[re.Pattern[str], tuple[TokenRule, ...]] = {}
for _r in TOKEN_RULES:
    if _r.trigger is not None:
        _BY_TRIGGER[_r.trigger] = (*_BY_TRIGGER.get(_r.trigger, ()), _r)


def token_spans(text: str, lowered: str) -> list[tuple[str, int, int]]:
    """``(kind, start, end)`` of every token-shape match in ``text``.

    ``lowered`` is ``text`` lower-cased position for position.
    """
    found: set[tuple[str, int, int]] = set()
    for run in _RUN.finditer(text):
        start, end = run.span()
        piece = lowered[start:end]
        present = {r for a in _ANCHORS if a in piece for r in _RULES_BY_ANCHOR[a]}
        for rule in present:
            if not rule.reach:
                found.update((rule.kind, s, e) for s, e in rule.spans_in(text, start, end, end))
                continue
            # a match may run past the run (a PEM body over several lines): try it only
            # where an anchor starts, so a miss never scans the text after the run
            stop = min(len(text), end + rule.reach)
            for anchor in rule.anchors:
                at = piece.find(anchor)  # lower-case anchors are lower-case in ``piece``
                while at >= 0:
                    found.update(
                        (rule.kind, s, e)
                        for s, e in rule.spans_in(text, start + at, stop, start + at + 1)
                    )
                    at = piece.find(anchor, at + 1)
    for trigger, rules in _BY_TRIGGER.items():
        for hit in trigger.finditer(text):
            for rule in rules:
                # matches start inside the window; reading on past it keeps the lookaheads
                # that end each pattern honest (an end of window is not an end of text)
                stop = hit.start() + (rule.window or hit.end() + 2 - hit.start())
                end = min(len(text), stop + 64)
                found.update(
                    (rule.kind, s, e) for s, e in rule.spans_in(text, hit.start(), end, stop)
                )
    return sorted(found, key=lambda f: (f[1], -f[2]))
