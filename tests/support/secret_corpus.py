"""Corpora for the secret screen (SAFE-1; issue 20 defect 4, issue 31 part 1).

- ``SECRETS``: credentials, each inside a natural sentence, a config line or a command; the
  screen must refuse every one and scrubbing must leave no byte of the secret.
- ``LOOKALIKES``: identifiers, digests and numbers shaped like secrets; none is refused.
- ``CODE``: code and config snippets that name passwords, keys and tokens without holding
  one (models, form schemas, fixtures, config loaders, placeholders); none is refused.

Every credential is synthetic: generated at import by a seeded generator in the documented
shape of its provider (prefix, length, alphabet, checksum). None is a real key, and none
appears literally in the repository.
"""

from __future__ import annotations

import base64
import json
import random
import string
from dataclasses import dataclass

__all__ = ["CODE", "LOOKALIKES", "SECRETS", "Case"]

_rng = random.Random(20_31)
_LOWER = string.ascii_lowercase
_UPPER = string.ascii_uppercase
_DIGITS = string.digits
_ALNUM = _LOWER + _UPPER + _DIGITS
_HEX = "0123456789abcdef"
_B64 = _ALNUM + "+/"
_URLSAFE = _ALNUM + "-_"


def _tok(alphabet: str, n: int) -> str:
    """A random run; alphanumeric runs always mix cases and digits, as generated keys do."""
    while True:
        out = "".join(_rng.choice(alphabet) for _ in range(n))
        mixed = (
            any(c.islower() for c in out)
            and any(c.isupper() for c in out)
            and sum(c.isdigit() for c in out) >= 2
        )
        if alphabet in (_ALNUM, _B64, _URLSAFE) and n >= 8 and not mixed:
            continue
        if alphabet == _HEX and n >= 8 and sum(c.isdigit() for c in out) < 2:
            continue
        return out


def _password(n: int = 12) -> str:
    """A generated password: letters of both cases, digits and a symbol."""
    body = _tok(_ALNUM, n - 1)
    cut = _rng.randrange(2, n - 2)
    return body[:cut] + _rng.choice("#!%&*@^") + body[cut:]


def _luhn_complete(prefix: str, length: int) -> str:
    digits = prefix + "".join(_rng.choice(_DIGITS) for _ in range(length - len(prefix) - 1))
    for check in _DIGITS:
        candidate = digits + check
        total = 0
        for i, char in enumerate(reversed(candidate)):
            n = int(char)
            if i % 2 == 1:
                n = n * 2 - 9 if n > 4 else n * 2
            total += n
        if total % 10 == 0:
            return candidate
    raise AssertionError("unreachable")


def _iban(country: str, bban: str) -> str:
    rearranged = bban + country + "00"
    number = int("".join(str(int(c, 36)) for c in rearranged))
    return f"{country}{98 - number % 97:02d}{bban}"


def _groups(text: str, size: int = 4) -> str:
    return " ".join(text[i : i + size] for i in range(0, len(text), size))


def _amex() -> str:
    number = _luhn_complete("37", 15)
    return f"{number[:4]} {number[4:10]} {number[10:]}"


def _wrapped_card() -> str:
    """A card number whose second half went onto the next line."""
    grouped = _groups(_luhn_complete("4", 16))
    return grouped[:9] + "\n" + grouped[10:]


def _b64url(data: dict[str, object]) -> str:
    raw = json.dumps(data, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _jwt() -> str:
    header = _b64url({"alg": "HS256", "typ": "JWT"})
    claims = _b64url({"sub": str(_rng.randrange(10**9)), "exp": 1900000000 + _rng.randrange(9999)})
    return f"{header}.{claims}.{_tok(_URLSAFE, 43)}"


def _pem_body(prefix: str, lines: int = 4) -> str:
    text = prefix + _tok(_B64, 64 * lines - len(prefix))
    return "\n".join(text[i : i + 64] for i in range(0, len(text), 64))


def _discord_bot() -> str:
    user_id = str(_rng.randrange(10**17, 10**18))
    head = base64.b64encode(user_id.encode()).decode().rstrip("=")
    return f"{head}.{_tok(_URLSAFE, 6)}.{_tok(_URLSAFE, 38)}"


@dataclass(frozen=True)
class Case:
    """A credential in context: ``secret`` must not survive scrubbing ``text``."""

    label: str
    text: str
    secret: str


def _case(label: str, template: str, secret: str) -> Case:
    return Case(label, template.format(s=secret), secret)


_AWS_SECRET = _tok(_ALNUM, 18) + "/" + _tok(_ALNUM, 12) + "+" + _tok(_ALNUM, 8)
_PW = [_password(n) for n in (11, 12, 13, 14, 12, 15, 10, 12, 16, 12, 13, 12, 14, 12, 11, 12)]
_SSWS = "00" + _tok(_URLSAFE, 40)

SECRETS: tuple[Case, ...] = (
    # --- cloud providers
    _case(
        "aws_access_key",
        "Use access key {s} for the nightly backup bucket.",
        "AKIA" + _tok(_UPPER + _DIGITS, 16),
    ),
    _case(
        "aws_sts_key",
        "The temporary credentials start with {s} and expire in an hour.",
        "ASIA" + _tok(_UPPER + _DIGITS, 16),
    ),
    _case(
        "aws_secret_prose",
        "The AWS secret for the billing account is {s} so keep it handy.",
        _AWS_SECRET,
    ),
    _case(
        "aws_secret_config",
        "aws_secret_access_key = {s}",
        _tok(_ALNUM, 24) + "/" + _tok(_ALNUM, 15),
    ),
    _case(
        "aws_secret_sentence",
        "Amazon gave us this secret access key: {s}",
        _tok(_ALNUM, 20) + "+" + _tok(_ALNUM, 19),
    ),
    _case(
        "azure_account_key",
        "Connection string: DefaultEndpointsProtocol=https;AccountName=media01;AccountKey={s};EndpointSuffix=core.windows.net",
        _tok(_B64, 86) + "==",
    ),
    _case(
        "azure_sas",
        "Download it from https://media01.blob.core.windows.net/exports/q3.csv?sv=2022-11-02&se=2031-01-01T00%3A00%3A00Z&sr=b&sp=r&sig={s} before Friday.",
        _tok(_ALNUM, 30) + "%2B" + _tok(_ALNUM, 10) + "%3D",
    ),
    _case(
        "azure_servicebus",
        "The queue listens on Endpoint=sb://orders.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey={s}",
        _tok(_B64, 43) + "=",
    ),
    _case(
        "azure_ad_secret",
        "The app registration's client secret is {s}, valid for two years.",
        _tok(_ALNUM, 3) + "8Q~" + _tok(_ALNUM + "_.-", 34),
    ),
    _case(
        "google_api_key",
        "Maps stopped working until I set the key to {s} again.",
        "AIza" + _tok(_URLSAFE, 35),
    ),
    _case(
        "google_oauth_secret",
        "OAuth client secret from the console: {s}",
        "GOCSPX-" + _tok(_URLSAFE, 28),
    ),
    _case(
        "google_access_token",
        "curl said 401 with ya29 token {s} so it must have expired.",
        "ya29." + _tok(_URLSAFE, 60),
    ),
    _case(
        "digitalocean",
        "I created a DigitalOcean token {s} for the droplet script.",
        "dop_v1_" + _tok(_HEX, 64),
    ),
    _case("alibaba", "The Alibaba Cloud access key id is {s}.", "LTAI" + _tok(_ALNUM, 20)),
    _case("heroku", "Heroku CLI authorised with {s} on my laptop.", "HRKU-AA" + _tok(_URLSAFE, 58)),
    _case("databricks", "Databricks PAT for the ETL job: {s}", "dapi" + _tok(_HEX, 32)),
    _case(
        "terraform_cloud",
        "TFE token {s} goes in credentials.tfrc.json.",
        _tok(_ALNUM, 14) + ".atlasv1." + _tok(_URLSAFE, 67),
    ),
    _case("supabase", "The Supabase management token is {s}", "sbp_" + _tok(_HEX, 40)),
    _case(
        "flyio", "fly deploy worked after exporting {s} as the token.", "fo1_" + _tok(_URLSAFE, 43)
    ),
    _case("netlify", "Netlify personal token: {s}", "nfp_" + _tok(_ALNUM, 36)),
    _case("pulumi", "Pulumi access token {s} was added to CI yesterday.", "pul-" + _tok(_HEX, 40)),
    _case("doppler", "Doppler service token for staging: {s}", "dp.st." + _tok(_ALNUM, 43)),
    _case(
        "vault", "Vault login succeeded with {s} from the ops laptop.", "hvs." + _tok(_URLSAFE, 92)
    ),
    _case(
        "age_key",
        "My age identity is {s}; the recipients file has the public half.",
        "AGE-SECRET-KEY-1" + _tok("QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L".upper(), 58),
    ),
    _case(
        "cloudflare_origin",
        "The origin CA key {s} is in the nginx folder.",
        "v1.0-" + _tok(_HEX, 24) + "-" + _tok(_HEX, 146),
    ),
    # --- code hosting, registries, CI
    _case(
        "github_pat",
        "Push failed until I used the token {s} as the password.",
        "ghp_" + _tok(_ALNUM, 36),
    ),
    _case("github_oauth", "The OAuth app handed back {s} for the user.", "gho_" + _tok(_ALNUM, 36)),
    _case("github_app", "Installation token {s} expires at noon.", "ghs_" + _tok(_ALNUM, 36)),
    _case(
        "github_fine_grained",
        "New fine-grained PAT: {s}",
        "github_pat_" + _tok(_ALNUM, 22) + "_" + _tok(_ALNUM, 59),
    ),
    _case("gitlab_pat", "GitLab token {s} has api scope.", "glpat-" + _tok(_URLSAFE, 20)),
    _case("gitlab_runner", "Register the runner with {s} please.", "glrt-" + _tok(_URLSAFE, 20)),
    _case("gitlab_deploy", "The deploy token is {s}.", "gldt-" + _tok(_URLSAFE, 20)),
    _case("bitbucket", "Bitbucket app password {s} for the mirror job.", "ATBB" + _tok(_ALNUM, 32)),
    _case(
        "atlassian",
        "Jira API token is {s} for the sync bot.",
        "ATATT3xFfGF0" + _tok(_URLSAFE, 180) + "=" + _tok(_HEX, 8).upper(),
    ),
    _case(
        "npm",
        "Add //registry.npmjs.org/:_authToken={s} to .npmrc on the build box.",
        "npm_" + _tok(_ALNUM, 36),
    ),
    _case(
        "pypi",
        "Upload with twine using {s} as the password.",
        "pypi-AgEIcHlwaS5vcmc" + _tok(_URLSAFE, 70),
    ),
    _case("rubygems", "gem push needs {s} in ~/.gem/credentials.", "rubygems_" + _tok(_HEX, 48)),
    _case("docker_hub", "Docker Hub access token {s} for pulls.", "dckr_pat_" + _tok(_URLSAFE, 27)),
    _case("jfrog", "Artifactory key {s} belongs to the release bot.", "AKCp" + _tok(_ALNUM, 69)),
    _case("postman", "Postman API key: {s}", "PMAK-" + _tok(_HEX, 24) + "-" + _tok(_HEX, 34)),
    _case("clojars", "Clojars deploy token {s}", "CLOJARS_" + _tok(_LOWER + _DIGITS, 60)),
    # --- chat and mail
    _case(
        "slack_bot",
        "The bot token is {s} and it posts to #alerts.",
        "xoxb-" + _tok(_DIGITS, 12) + "-" + _tok(_DIGITS, 13) + "-" + _tok(_ALNUM, 24),
    ),
    _case(
        "slack_user",
        "Slack user token {s} lets the script read history.",
        "xoxp-"
        + _tok(_DIGITS, 12)
        + "-"
        + _tok(_DIGITS, 12)
        + "-"
        + _tok(_DIGITS, 13)
        + "-"
        + _tok(_HEX, 32),
    ),
    _case(
        "slack_app",
        "Socket mode needs the app token {s}.",
        "xapp-1-A" + _tok(_UPPER + _DIGITS, 10) + "-" + _tok(_DIGITS, 13) + "-" + _tok(_HEX, 64),
    ),
    _case(
        "slack_webhook",
        "Alerts go to https://{s} now.",
        "hooks.slack.com/services/T"
        + _tok(_UPPER + _DIGITS, 8)
        + "/B"
        + _tok(_UPPER + _DIGITS, 10)
        + "/"
        + _tok(_ALNUM, 24),
    ),
    _case(
        "discord_webhook",
        "Post build results to https://{s}",
        "discord.com/api/webhooks/" + _tok(_DIGITS, 19) + "/" + _tok(_URLSAFE, 68),
    ),
    _case("discord_bot", "The Discord bot logs in with {s}.", _discord_bot()),
    _case(
        "telegram_bot",
        "BotFather gave me {s} for the alert bot.",
        _tok(_DIGITS, 10) + ":AA" + _tok(_URLSAFE, 33),
    ),
    _case(
        "teams_webhook",
        "Teams channel hook: https://{s}",
        "contoso.webhook.office.com/webhookb2/"
        + _tok(_HEX, 8)
        + "-"
        + _tok(_HEX, 4)
        + "-"
        + _tok(_HEX, 4)
        + "-"
        + _tok(_HEX, 4)
        + "-"
        + _tok(_HEX, 12)
        + "@"
        + _tok(_HEX, 8)
        + "/IncomingWebhook/"
        + _tok(_HEX, 32),
    ),
    _case(
        "sendgrid",
        "SendGrid key for transactional mail: {s}",
        "SG." + _tok(_URLSAFE, 22) + "." + _tok(_URLSAFE, 43),
    ),
    _case(
        "mailgun_legacy", "Mailgun private key {s} is on the old server.", "key-" + _tok(_HEX, 32)
    ),
    _case(
        "mailgun",
        "The new Mailgun API key is {s}.",
        _tok(_HEX, 32) + "-" + _tok(_HEX, 8) + "-" + _tok(_HEX, 8),
    ),
    _case(
        "mailchimp",
        "Mailchimp key {s} for the newsletter list.",
        _tok(_HEX, 32) + "-us" + str(_rng.randrange(1, 21)),
    ),
    _case(
        "twilio_api_key",
        "Twilio API key SID {s} with its secret in the vault.",
        "SK" + _tok(_HEX, 32),
    ),
    _case("twilio_auth_token", "The Twilio auth token is {s} for the SMS sender.", _tok(_HEX, 32)),
    _case(
        "sendinblue", "Brevo SMTP key: {s}", "xkeysib-" + _tok(_HEX, 64) + "-" + _tok(_ALNUM, 16)
    ),
    # --- payments and commerce
    _case(
        "stripe_secret",
        "Stripe live key {s} must never reach the client.",
        "sk_live_" + _tok(_ALNUM, 99),
    ),
    _case(
        "stripe_restricted",
        "The restricted key {s} can only read charges.",
        "rk_live_" + _tok(_ALNUM, 99),
    ),
    _case("stripe_webhook", "Webhook signing secret: {s}", "whsec_" + _tok(_ALNUM, 32)),
    _case("shopify", "Shopify admin token {s} for the inventory sync.", "shpat_" + _tok(_HEX, 32)),
    _case("shopify_shared", "The Shopify app shared secret is {s}.", "shpss_" + _tok(_HEX, 32)),
    _case("square", "Square production access token: {s}", "EAAA" + _tok(_URLSAFE, 60)),
    _case("square_oauth", "Square OAuth secret {s}", "sq0csp-" + _tok(_URLSAFE, 43)),
    _case(
        "braintree",
        "Braintree gateway token access_token$production${s}",
        _tok(_LOWER + _DIGITS, 16) + "$" + _tok(_HEX, 32),
    ),
    _case("razorpay", "Razorpay live key {s}", "rzp_live_" + _tok(_ALNUM, 14)),
    _case(
        "flutterwave",
        "Flutterwave secret {s}",
        "FLWSECK_TEST-" + _tok("abcdefgh0123456789", 32) + "-X",
    ),
    _case("easypost", "EasyPost production key {s}", "EZAK" + _tok(_ALNUM, 54)),
    _case("shippo", "Shippo token {s}", "shippo_live_" + _tok(_HEX, 40)),
    # --- AI and SaaS APIs
    _case(
        "openai",
        "Set OPENAI_API_KEY to {s} before running the notebook.",
        "sk-proj-" + _tok(_URLSAFE, 48) + "T3BlbkFJ" + _tok(_URLSAFE, 48),
    ),
    _case(
        "anthropic",
        "The Claude key {s} is billed to research.",
        "sk-ant-api03-" + _tok(_URLSAFE, 93) + "AA",
    ),
    _case("huggingface", "Download the gated model with {s}.", "hf_" + _tok(_ALNUM, 34)),
    _case("huggingface_org", "Org token {s} can push to the hub.", "api_org_" + _tok(_ALNUM, 34)),
    _case("groq", "Groq key: {s}", "gsk_" + _tok(_ALNUM, 52)),
    _case("replicate", "Replicate token {s} runs the image model.", "r8_" + _tok(_ALNUM, 37)),
    _case("perplexity", "The Perplexity key is {s}.", "pplx-" + _tok(_ALNUM, 48)),
    _case("xai", "Grok access uses {s}", "xai-" + _tok(_ALNUM, 80)),
    _case("linear", "Linear API key for the triage bot: {s}", "lin_api_" + _tok(_ALNUM, 40)),
    _case("notion", "Notion integration secret {s}", "ntn_" + _tok(_DIGITS, 11) + _tok(_ALNUM, 35)),
    _case(
        "airtable",
        "Airtable PAT {s} reads the CRM base.",
        "pat" + _tok(_ALNUM, 14) + "." + _tok(_HEX, 64),
    ),
    _case(
        "grafana_sa",
        "Grafana service account token {s}",
        "glsa_" + _tok(_ALNUM, 32) + "_" + _tok(_HEX, 8),
    ),
    _case("grafana_cloud", "Grafana Cloud token: {s}", "glc_" + _tok(_B64, 60) + "=="),
    _case("newrelic", "New Relic user key {s}", "NRAK-" + _tok(_UPPER + _DIGITS, 27)),
    _case("sentry", "Sentry auth token {s} uploads source maps.", "sntryu_" + _tok(_HEX, 64)),
    _case(
        "dynatrace",
        "Dynatrace API token {s}",
        "dt0c01." + _tok(_UPPER + _DIGITS, 24) + "." + _tok(_ALNUM, 64),
    ),
    _case("contentful", "Contentful management token {s}", "CFPAT-" + _tok(_URLSAFE, 43)),
    _case(
        "planetscale",
        "PlanetScale password {s} for the main branch.",
        "pscale_pw_" + _tok(_URLSAFE, 43),
    ),
    _case("prefect", "Prefect Cloud key {s}", "pnu_" + _tok(_ALNUM, 36)),
    _case(
        "mapbox_secret",
        "The Mapbox secret token is {s}.",
        "sk.eyJ" + _tok(_URLSAFE, 60) + "." + _tok(_URLSAFE, 22),
    ),
    _case("meta", "Facebook page token {s} expires in 60 days.", "EAAB" + _tok(_ALNUM, 150)),
    _case("twitter_bearer", "Twitter bearer token: {s}", "A" * 22 + _tok(_ALNUM, 80)),
    _case("onepassword_sa", "1Password service account token {s}", "ops_eyJ" + _tok(_B64, 200)),
    # --- structured credentials
    _case("jwt", "Here is the session cookie value {s} from the staging login.", _jwt()),
    _case(
        "bearer_header",
        "curl -H 'Authorization: Bearer {s}' https://api.internal/v1/me",
        _tok(_ALNUM, 40),
    ),
    _case(
        "basic_header",
        "The webhook sends Authorization: Basic {s}",
        base64.b64encode(b"deploy:" + _tok(_ALNUM, 16).encode()).decode(),
    ),
    _case("okta", "Okta calls need the header Authorization: SSWS {s}", _SSWS),
    _case(
        "pem_rsa",
        "Deploy key below:\n{s}\nthanks",
        "-----BEGIN RSA PRIVATE KEY-----\n"
        + _pem_body("MIIEpAIBAAKCAQEA")
        + "\n-----END RSA PRIVATE KEY-----",
    ),
    _case(
        "pem_pkcs8_no_end",
        "I pasted this before the chat cut off: -----BEGIN PRIVATE KEY-----\n{s}",
        _pem_body("MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQ"),
    ),
    _case(
        "pem_body_rsa",
        "The key body was\n{s}\nwithout the header lines.",
        _pem_body("MIIEowIBAAKCAQEA"),
    ),
    _case("pem_body_pkcs8", "Promoted note: {s}", _pem_body("MIIEvgIBADANBgkqhkiG9w0BAQEFAASC", 3)),
    _case("pem_body_ec", "ec key {s}", _pem_body("MHcCAQEEI", 2)),
    _case(
        "openssh_body",
        "id_ed25519 contents: {s}",
        _pem_body("b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ", 3),
    ),
    _case(
        "pem_base64",
        "client-key-data: {s}",
        base64.b64encode(b"-----BEGIN RSA PRIVATE KEY-----\n" + _tok(_B64, 120).encode()).decode(),
    ),
    _case(
        "k8s_secret",
        "The secret manifest has data:\n  password: {s}",
        base64.b64encode(_password(14).encode()).decode(),
    ),
    # --- connection strings and command lines
    _case(
        "postgres_url", "The app connects with postgres://app:{s}@db.internal:5432/orders", _PW[0]
    ),
    _case("redis_url", "Cache is at redis://:{s}@cache.internal:6379/0", _PW[1]),
    _case(
        "mongo_url",
        "mongodb+srv://admin:{s}@cluster0.example.net/prod is the prod cluster.",
        _PW[2],
    ),
    _case("amqp_url", "Workers read amqp://worker:{s}@rabbit:5672/ for jobs.", _PW[3]),
    _case("mysql_p", "Restore with mysql -u root -p{s} shop < dump.sql", _PW[4].replace("&", "x")),
    _case("sshpass", "The cron line is sshpass -p '{s}' ssh deploy@10.0.0.7 uptime", _PW[5]),
    _case(
        "curl_user", "curl -u admin:{s} https://jenkins.internal/api/json", _PW[6].replace("&", "x")
    ),
    _case("docker_login", "docker login -u ci -p {s} registry.internal", _PW[7].replace("&", "x")),
    _case("cli_flag", "Run ./migrate --password={s} --host db1", _PW[8].replace("&", "x")),
    _case("pgpassword", "PGPASSWORD={s} psql -h db -U app", _PW[9].replace("&", "x")),
    _case(
        "netrc",
        "My .netrc has machine api.internal login bot password {s}",
        _PW[10].replace("&", "x"),
    ),
    _case("redis_cli", "redis-cli -h cache -a {s} ping", _PW[11].replace("&", "x")),
    # --- passwords in code, config and prose
    _case("password_literal", 'password = "{s}"', "Xk9#mQ2vL!p"),
    _case("env_password", "DB_PASS={s}", "hunter2hunter2"),
    _case("yaml_password", "database:\n  user: app\n  password: {s}\n", _PW[12]),
    _case("json_password", '{{"user": "svc", "password": "{s}"}}', _PW[13]),
    _case("xml_password", "<connection><password>{s}</password></connection>", _PW[14]),
    _case("dotnet_config", '<add key="DbPassword" value="{s}" />', _PW[15]),
    _case("sql_identified", "ALTER USER reporting IDENTIFIED BY '{s}';", _password(13)),
    _case(
        "django_secret",
        "SECRET_KEY = '{s}'",
        "django-insecure-" + _tok(_ALNUM + "!@#%^&*(-_=+)", 50),
    ),
    _case("jwt_secret_env", "JWT_SECRET={s}", _tok(_ALNUM, 48)),
    _case("api_key_prose", "My API key is {s} if the dashboard asks.", _tok(_ALNUM, 32)),
    _case("token_prose", "the access token: {s}", _tok(_URLSAFE, 40)),
    _case("wifi_password", "the wifi password is {s}", "correcthorsebatterystaple"),
    _case("prose_password", "My password is {s} and I never change it.", "hunter2"),
    _case("prose_password_for", "The password for the NAS is {s}.", _password(12)),
    _case("prose_set_to", "I changed the router password to {s} last night.", _password(11)),
    _case("door_code", "The door code is {s}, press the bell twice.", "4821"),
    _case("pin", "My card PIN is {s}.", "7392"),
    _case("spanish_password", "La contraseña es {s} para la cuenta del banco.", _password(12)),
    _case("french_password", "Le mot de passe est {s} pour le serveur.", _password(12)),
    _case("german_password", "Das Passwort ist {s} für den Router.", _password(12)),
    # --- weaker contexts: value first, no verb, a key named in prose
    _case("value_first", "{s} is my email password, do not share it.", _password(14)),
    _case("password_no_verb", "Wi-Fi: network HomeNet, password {s}", "tRuMpEt-42-oboe"),
    _case("storage_key_prose", "the azure storage key {s} expires in May", _tok(_B64, 86) + "=="),
    _case("jdbc_password", "jdbc:postgresql://db:5432/app?user=app&password={s}", _password(12)),
    _case("spring_password", "spring.datasource.password={s}", _password(12)),
    # --- payment cards and government ids
    _case("visa", "Charge it to {s} please.", _groups(_luhn_complete("4", 16))),
    _case(
        "mastercard", "My Mastercard is {s}.", "-".join(_groups(_luhn_complete("5", 16)).split())
    ),
    _case("amex", "Amex {s} expires 09/29.", _amex()),
    _case("card_contiguous", "card number {s} exp 11/28", _luhn_complete("6011", 16)),
    _case("card_split", "card {s} cvv on the back", _wrapped_card()),
    _case("ssn_dashes", "Her SSN is {s} for the tax form.", "219-09-9999"),
    _case("ssn_spaces", "social security number {s} on the W-2", "078 05 1120"),
    _case("ssn_plain", "SSN: {s}", "536224101"),
    _case("uk_nino", "My NI number is {s}.", "JG 10 37 59 A"),
    _case("iban_de", "Send the deposit to {s} by Monday.", _groups(_iban("DE", _tok(_DIGITS, 18)))),
    _case("iban_gb", "Refunds go to {s}.", _iban("GB", "NWBK" + _tok(_DIGITS, 14))),
    _case("iban_fr", "IBAN {s} (compte joint)", _iban("FR", _tok(_DIGITS, 23))),
    _case("passport", "Passport number: {s}", "X" + _tok(_DIGITS, 8)),
    # --- obfuscated: zero-width, soft hyphen, full-width, look-alike letters
    _case("zero_width_aws", "key is {s} ok", "AKIA" + "\u200b".join(_tok(_UPPER + _DIGITS, 16))),
    _case("soft_hyphen_stripe", "stripe {s}", "sk_live_\u00ad" + _tok(_ALNUM, 40)),
    _case(
        "fullwidth_github",
        "token {s}",
        "".join(chr(ord(c) + 0xFEE0) for c in "ghp_" + _tok(_ALNUM, 36)),
    ),
    _case("zero_width_password", "password=\u200d{s}", _password(12)),
    _case("cyrillic_openai", "key {s}", "sk-рrој-" + _tok(_ALNUM, 40)),
)

LOOKALIKES: tuple[str, ...] = (
    "Fixed in commit 9fceb02d0ae598e95dc970b74767f19372d61af8 on main.",
    "Short SHA 3f2a9c1 is the release tag.",
    "Request id 123e4567-e89b-12d3-a456-426614174000 failed with a timeout.",
    "The tenant UUID is 550E8400-E29B-41D4-A716-446655440000.",
    "ISBN 978-3-16-148410-0 is the second edition.",
    "The old ISBN was 0-306-40615-2.",
    "Order #4111 1111 1111 1112 shipped today.",
    "Amazon order 112-3456789-1234567 arrives Tuesday.",
    "Call +1 415 555 2671 or 020 7946 0958 after six.",
    "Her number is (212) 555-0147.",
    "Role arn:aws:iam::123456789012:role/DeployRole is assumed by CI.",
    "KMS key arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab encrypts the bucket.",
    "Image digest sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 was pinned.",
    "The file's MD5 is 5d41402abc4b2a76b9719d911017c592.",
    "integrity sha512-Lf0YbHn7sy1EXPJ5Rz4H5Hx3oT5ucZ6c8vC7bW3jzJTb8C9HJ5kLz3x0CAKpHhD5l5kJ9v7Ck3GZ7p9yZ2AeGw==",
    "Logo: data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==",
    "AWS account 123456789012 owns the bucket.",
    "The MongoDB document id is 507f1f77bcf86cd799439011.",
    "Container 4f66ad9a0b2e1c3d5e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5 restarted.",
    "Stripe customer cus_NffrFeUfNV2Hib and payment intent pi_3MtwBwLkdIwHu7ix28a3tqPa.",
    "Publishable key pk_test_TYooMQauvdEDq54NiTphI7jx is fine in the browser.",
    "Slack channel C024BE91L and user U0G9QF9C6.",
    "UPS tracking 1Z999AA10123456784.",
    "USPS tracking 9400 1000 0000 0000 0000 00.",
    "The IBAN GB82WEST12345698765433 failed its checksum.",
    "Invalid SSNs like 000-12-3456 and 666-45-6789 are rejected.",
    "Version 1.2.3-rc.1 built on 2024-01-15T10:30:00Z.",
    "We moved from 10.0.0.7 to 192.168.1.20; the MAC is 00:1B:44:11:3A:B7.",
    "Timestamps 1700000000000 and 1700000123456 are in milliseconds.",
    "The years 2021 2022 2023 2024 were our growth period.",
    "Deployed with git@github.com:acme/shop.git at tag v2.4.0.",
    "Browse https://user@example.com/docs for the guide.",
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl alice@laptop is my public key.",
    "-----BEGIN CERTIFICATE-----\nMIIDXTCCAkWgAwIBAgIJAKoK/heBjcOuMA0GCSqGSIb3DQEBBQUAMEUxCzAJBgNV\n-----END CERTIFICATE-----",
    "-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAu1SU1LfVLPHCozMxH2Mo\n-----END PUBLIC KEY-----",
    "The JWT header eyJhbGciOiJIUzI1NiJ9 says HS256.",
    "The password policy requires 12 characters and a digit.",
    "Reset your password at https://example.com/account/reset.",
    "My password is something I forget every month.",
    "The password is stored in 1Password under 'NAS'.",
    "The API key is in Vault at secret/data/prod/payments.",
    "Our secret ingredient is smoked paprika.",
    "The key to good sourdough is patience.",
    "The token count was 4096 for that prompt.",
    "Access key rotation is scheduled every 90 days.",
    "My PIN is in my wallet, not in the notes.",
    "The door code changed last week.",
    "Password123 is still the most common password in breach lists.",
    "Password: must be at least 12 characters long.",
    "Secret: the meeting moved to noon.",
    "Order 3012345678901235 was refunded.",
    "Meet at 12/05/2024 14:30 in room 4.01.",
    "Google Analytics id G-ABC123DEF4 and UA-12345678-1.",
    "Azure subscription 2b5a8c9d-1e2f-4a3b-9c8d-7e6f5a4b3c2d hosts the VMs.",
    "The S3 bucket s3://acme-logs/2024/05/ holds the access logs.",
    "Hash of the build: 2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae.",
    "The base64 of hello world is aGVsbG8gd29ybGQ=.",
    "The SWIFT code is DEUTDEFF and the sort code 20-00-00.",
)

# --- code that names credentials without holding one -------------------------------------

_PY_MODELS = (
    "password = db.Column(db.String(120), nullable=False)",
    "password_hash = db.Column(db.String(128))",
    "hashed_password = Column(String(255), nullable=False)",
    "password = models.CharField(max_length=128)",
    "api_key = models.CharField(max_length=64, unique=True, default=generate_key)",
    "token = models.CharField(max_length=40, primary_key=True)",
    "secret = sa.Column(sa.LargeBinary, nullable=True)",
    "password: Mapped[str] = mapped_column(String(255))",
    "class User(Base):\n    __tablename__ = 'users'\n    id = Column(Integer, primary_key=True)\n    email = Column(String, unique=True)\n    password = Column(String, nullable=False)",
    "class Credential(models.Model):\n    user = models.ForeignKey(User, on_delete=models.CASCADE)\n    token = models.CharField(max_length=255)\n    secret = models.TextField(blank=True)",
    "password = peewee.CharField()",
    "api_token = fields.CharField(max_length=80, null=True)",
)
_PY_SCHEMAS = (
    "password = fields.Str(required=True)",
    "password = fields.String(required=True, load_only=True, validate=validate.Length(min=8))",
    "password = PasswordField('Password', validators=[DataRequired()])",
    "confirm_password = PasswordField('Confirm', validators=[EqualTo('password')])",
    "password = forms.CharField(widget=forms.PasswordInput)",
    "class LoginForm(FlaskForm):\n    username = StringField('Username', validators=[DataRequired()])\n    password = PasswordField('Password', validators=[DataRequired()])",
    "class UserCreate(BaseModel):\n    email: EmailStr\n    password: str = Field(..., min_length=8)",
    "class Settings(BaseSettings):\n    database_url: str\n    secret_key: SecretStr\n    api_key: str | None = None",
    "password: str",
    "password: Optional[str] = None",
    "api_key: SecretStr = Field(default=SecretStr(''))",
    "token: str = Depends(oauth2_scheme)",
    "password: Annotated[str, Form()]",
    "class TokenData(BaseModel):\n    access_token: str\n    token_type: str = 'bearer'",
    "new_password: constr(min_length=12)",
    "password = serializers.CharField(write_only=True, style={'input_type': 'password'})",
)
_PY_LOGIC = (
    "hashed_password = generate_password_hash(password, method='sha256')",
    "stored_hashed_password = argon2.hash_password(password)",
    "password_hash = bcrypt.hashpw(password.encode('utf-8'), bcrypt.gensalt())",
    "if not check_password_hash(user.password, password):\n    return abort(401)",
    "user.set_password(form.password.data)",
    "password = request.form['password']",
    "password = request.json.get('password')",
    "password = getpass.getpass('Database password: ')",
    "password = os.environ['DB_PASSWORD']",
    'password = os.environ.get("DB_PASSWORD", "")',
    'password = os.getenv("POSTGRES_PASSWORD")',
    "secret = get_secret()",
    "secret = secrets.token_urlsafe(32)",
    "api_key = request.headers.get('X-API-Key')",
    "token = jwt.encode(payload, settings.SECRET_KEY, algorithm='HS256')",
    "access_token = create_access_token(data={'sub': user.email}, expires_delta=expires)",
    "headers = {'Authorization': f'Bearer {token}'}",
    "client = OpenAI(api_key=os.environ['OPENAI_API_KEY'])",
    "password = settings.db_password",
    "password = config['database']['password']",
    "password = cfg.get('db', 'password')",
    "pwd = pwd_context.hash(plain_password)",
    "password = new_password",
    "password = hashed",
    "secret = self.secret",
    "token = None",
    "password = ''",
    "token = token.strip()",
    "password=password,",
    "engine = create_engine(f'postgresql://{user}:{password}@{host}/{db}')",
    "DATABASE_URL = f'postgresql://{DB_USER}:{DB_PASSWORD}@{DB_HOST}:5432/{DB_NAME}'",
    "url = 'postgresql://user:password@localhost/dbname'",
    "conn = psycopg2.connect(host=host, user=user, password=password, dbname=name)",
    "auth = HTTPBasicAuth(username, password)",
    "session.auth = (os.environ['API_USER'], os.environ['API_TOKEN'])",
    "raise ValueError('password must be at least 8 characters')",
    "logger.info('password reset requested for %s', email)",
    "PASSWORD_RE = re.compile(r'^(?=.*[A-Z])(?=.*\\d).{8,}$')",
    "MIN_PASSWORD_LENGTH = 8",
    "token_expiry = timedelta(hours=1)",
    "parser.add_argument('--password', help='database password')",
    "@click.option('--token', envvar='GITHUB_TOKEN', help='API token')",
    "def verify_password(plain_password: str, hashed_password: str) -> bool:\n    return pwd_context.verify(plain_password, hashed_password)",
    "def login(username: str, password: str) -> Token:",
    "assert response.json()['detail'] == 'Incorrect username or password'",
    "secret_key = app.config['SECRET_KEY']",
    "app.config['SECRET_KEY'] = os.environ.get('SECRET_KEY') or 'you-will-never-guess'",
    "SECRET_KEY = os.environ['DJANGO_SECRET_KEY']",
    "stripe.api_key = os.environ['STRIPE_SECRET_KEY']",
    "openai.api_key = getenv('OPENAI_API_KEY')",
    "token = request.headers['Authorization'].split(' ')[1]",
    "password = input('Password: ')",
    "password = keyring.get_password('service', username)",
    "api_key = vault_client.secrets.kv.read_secret_version(path='api')['data']['data']['key']",
)
_PY_FIXTURES = (
    "{'username': 'testuser', 'password': 'testpassword'}",
    "data = {'email': 'a@example.com', 'password': 'password123'}",
    "user = User.objects.create_user(username='john', password='secret')",
    "self.client.login(username='temporary', password='temporary')",
    "client.post('/login', data={'username': 'admin', 'password': 'admin'})",
    "response = client.post('/token', data={'username': 'alice', 'password': 'test1234'})",
    "@pytest.fixture\ndef user(db):\n    return UserFactory(password='testpass123')",
    "password = factory.PostGenerationMethodCall('set_password', 'defaultpassword')",
    "TEST_PASSWORD = 'test_password'",
    "API_KEY = 'test-api-key'",
    "token = 'fake-token'",
    "mock_settings.api_key = 'dummy'",
    "monkeypatch.setenv('API_KEY', 'test-key')",
    "os.environ['DB_PASSWORD'] = 'postgres'",
    "login(page, 'demo@example.com', 'demo')",
    "creds = {'user': 'guest', 'password': 'guest'}",
    "assert hash_password('secret') != 'secret'",
    "password = 'changeme'",
    "password = '<password>'",
    "password = '****'",
    "password = '${DB_PASSWORD}'",
    "api_key = 'YOUR_API_KEY'",
    "api_key = 'your-api-key-here'",
    "token = 'xxx'",
    "secret = 'REPLACE_ME'",
)
_JS = (
    "password: { type: String, required: true, minlength: 8 },",
    "const userSchema = new mongoose.Schema({\n  email: { type: String, unique: true },\n  password: { type: String, required: true, select: false },\n});",
    "const hashed = await bcrypt.hash(password, 10);",
    "const match = await bcrypt.compare(req.body.password, user.password);",
    "const [password, setPassword] = useState('');",
    '<input type="password" value={password} onChange={e => setPassword(e.target.value)} />',
    "const token = jwt.sign({ id: user._id }, process.env.JWT_SECRET, { expiresIn: '1d' });",
    "const apiKey = process.env.STRIPE_SECRET_KEY;",
    "headers: { Authorization: `Bearer ${token}` },",
    "password: Joi.string().min(8).required(),",
    "password: yup.string().required('Password is required'),",
    "password: z.string().min(8, { message: 'Password must be at least 8 characters' }),",
    "interface LoginRequest {\n  username: string;\n  password: string;\n}",
    "password?: string;",
    "const { email, password } = req.body;",
    "if (!password) return res.status(400).json({ error: 'password required' });",
    "const secret = process.env.SESSION_SECRET || 'keyboard cat';",
    "app.use(session({ secret: process.env.SESSION_SECRET, resave: false }));",
    "const token = localStorage.getItem('token');",
    "await page.fill('#password', 'password123');",
    "it('rejects a wrong password', async () => {\n  await login('alice', 'wrongpassword');\n});",
    "export const config = { apiKey: import.meta.env.VITE_API_KEY };",
    "const client = new Client({ password: process.env.PGPASSWORD });",
    "token: string | null = null;",
    "private readonly apiKey: string;",
    "constructor(private readonly secret: string) {}",
    "const password = form.get('password') as string;",
    "this.password = password;",
    "password: '',",
    "apiKey: '<YOUR_API_KEY>',",
    "type Credentials = { username: string; password: string };",
    "const accessToken = response.data.access_token;",
    "axios.defaults.headers.common['Authorization'] = token;",
)
_GO = (
    'Password string `json:"password" db:"password_hash"`',
    'Token    string `json:"token,omitempty"`',
    'password := os.Getenv("DB_PASSWORD")',
    "hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.DefaultCost)",
    "err = bcrypt.CompareHashAndPassword([]byte(user.Password), []byte(req.Password))",
    'password := flag.String("password", "", "database password")',
    'apiKey := viper.GetString("api_key")',
    "token, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte(secret))",
    'dsn := fmt.Sprintf("host=%s user=%s password=%s dbname=%s", host, user, password, name)',
    'req.Header.Set("Authorization", "Bearer "+token)',
    'type Config struct {\n\tDBPassword string `env:"DB_PASSWORD,required"`\n\tAPIKey     string `env:"API_KEY"`\n}',
    'secret := []byte(os.Getenv("JWT_SECRET"))',
    "password = strings.TrimSpace(password)",
    'if password == "" {\n\treturn errors.New("password is required")\n}',
    'creds := &Credentials{Username: "test", Password: "test"}',
)
_JAVA_CS = (
    "private String password;",
    '@Value("${spring.datasource.password}")\nprivate String dbPassword;',
    "user.setPassword(passwordEncoder.encode(dto.getPassword()));",
    'String password = System.getenv("DB_PASSWORD");',
    'Connection conn = DriverManager.getConnection(url, user, System.getenv("DB_PASSWORD"));',
    "@NotBlank\n@Size(min = 8)\nprivate String password;",
    '@Column(name = "password_hash", nullable = false)\nprivate String passwordHash;',
    "public string Password { get; set; }",
    'var key = Configuration["Jwt:Key"];',
    "var token = await _tokenService.CreateTokenAsync(user);",
    "[Required]\n[DataType(DataType.Password)]\npublic string Password { get; set; }",
    'String token = request.getHeader("Authorization");',
    'char[] password = console.readPassword("Password: ");',
    'props.setProperty("password", System.getProperty("db.password"));',
    'val password: String = ""',
)
_RUBY_PHP_RUST = (
    "has_secure_password",
    "validates :password, presence: true, length: { minimum: 8 }",
    "t.string :password_digest, null: false",
    'password: ENV.fetch("DB_PASSWORD")',
    "user = User.create!(email: 'a@b.c', password: 'password', password_confirmation: 'password')",
    "api_key = Rails.application.credentials.dig(:stripe, :secret_key)",
    "'password' => Hash::make($request->password),",
    "'password' => env('DB_PASSWORD', ''),",
    "$password = $_POST['password'];",
    "if (password_verify($password, $user->password_hash)) {",
    'let password = env::var("DB_PASSWORD").expect("DB_PASSWORD not set");',
    "pub password: String,",
    "let token = encode(&Header::default(), &claims, &EncodingKey::from_secret(secret.as_ref()))?;",
    "password: Secret<String>,",
    "fn login(username: &str, password: &str) -> Result<Session> {",
)
_SQL = (
    "CREATE TABLE users (\n  id SERIAL PRIMARY KEY,\n  email TEXT UNIQUE NOT NULL,\n  password_hash VARCHAR(255) NOT NULL\n);",
    "SELECT id FROM users WHERE email = $1 AND password_hash = crypt($2, password_hash);",
    "UPDATE users SET password = :password WHERE id = :id;",
    "ALTER TABLE accounts ADD COLUMN api_key TEXT;",
    "INSERT INTO users (email, password_hash) VALUES (%s, %s)",
    "CREATE ROLE app LOGIN PASSWORD NULL;",
    "GRANT SELECT ON tokens TO reporting;",
    "password VARCHAR(60) NOT NULL,",
)
_CONFIG = (
    "services:\n  db:\n    image: postgres:16\n    environment:\n      POSTGRES_PASSWORD: ${POSTGRES_PASSWORD}",
    "environment:\n  - POSTGRES_PASSWORD=postgres\n  - POSTGRES_USER=postgres",
    "env:\n  - name: DB_PASSWORD\n    valueFrom:\n      secretKeyRef:\n        name: db-secret\n        key: password",
    "with:\n  password: ${{ secrets.REGISTRY_PASSWORD }}\n  username: ${{ github.actor }}",
    'db_password: "{{ vault_db_password }}"',
    "spring:\n  datasource:\n    password: ${DB_PASSWORD:changeme}",
    "[database]\nuser = app\npassword = changeme\nhost = localhost",
    "DB_PASSWORD=\nAPI_KEY=\nSECRET_KEY=",
    "DB_PASSWORD=changeme\nSECRET_KEY=your-secret-key-here\nAPI_KEY=<your-api-key>",
    "OPENAI_API_KEY=sk-...\nANTHROPIC_API_KEY=your_key_here",
    "password = var.db_password",
    "administrator_login_password = random_password.db.result",
    'resource "random_password" "db" {\n  length  = 24\n  special = true\n}',
    "api_key: !ENV ${API_KEY}",
    "password: !vault |\n  $ANSIBLE_VAULT;1.1;AES256",
    "token: <TOKEN>",
    "password: ********",
    "auth:\n  type: bearer\n  token_env: GITHUB_TOKEN",
    '[tool.poetry.source]\nname = "private"\nurl = "https://pypi.internal/simple"',
    "REDIS_URL=redis://localhost:6379/0",
    "DATABASE_URL=postgres://postgres:postgres@localhost:5432/app_dev",
    "MONGO_URI=mongodb://root:example@mongo:27017/",
    "broker_url = 'amqp://guest:guest@localhost:5672//'",
)
_SHELL = (
    'read -s -p "Password: " PASSWORD',
    "mysql -u root -p",
    "mysql -u root -p\"$MYSQL_ROOT_PASSWORD\" -e 'SHOW DATABASES'",
    'export PGPASSWORD="$DB_PASSWORD"',
    'echo "$REGISTRY_TOKEN" | docker login ghcr.io -u "$USER" --password-stdin',
    'curl -u "$API_USER:$API_TOKEN" https://api.example.com/status',
    'curl -H "Authorization: Bearer $TOKEN" https://api.example.com/me',
    "sshpass -e ssh deploy@host",
    "gh auth login --with-token < token.txt",
    'aws configure set aws_secret_access_key "$AWS_SECRET_ACCESS_KEY"',
    'kubectl create secret generic db --from-literal=password="$DB_PASSWORD"',
    "./manage.py createsuperuser --username admin --email admin@example.com",
    'psql "postgresql://$PGUSER:$PGPASSWORD@$PGHOST/$PGDATABASE"',
    'redis-cli -a "$REDIS_PASSWORD" ping',
    "openssl rand -base64 32",
    "htpasswd -c /etc/nginx/.htpasswd admin",
)
_HELD_OUT = (  # written after tuning, measured once before any rule saw them
    "if user.password != hash(form.password): raise AuthError",
    "public void setPassword(String password) { this.password = password; }",
    "password_field = driver.find_element(By.ID, 'password')",
    "self.assertEqual(form.errors['password'], ['This field is required.'])",
    "cy.get('input[name=password]').type('password')",
    "await user.update({ password: await hash(newPassword, 12) })",
    "def test_login(client):\n    resp = client.post('/login', json={'email': 'x@y.z', 'password': 'pw'})",
    "let hashed = bcrypt::hash(&password, DEFAULT_COST)?;",
    "password = serializers.CharField(min_length=8, write_only=True)",
    "expect(screen.getByLabelText('Password')).toBeInTheDocument()",
    "PASSWORD_HASHERS = ['django.contrib.auth.hashers.Argon2PasswordHasher']",
    "secret_key = Column(String, default=lambda: secrets.token_hex(32))",
    "token = await getAccessTokenSilently();",
    "api_key = st.secrets['OPENAI_API_KEY']",
    "key = Fernet.generate_key()",
    "const apiKey = useRuntimeConfig().public.apiKey",
    "AUTH_TOKEN_HEADER = 'X-Auth-Token'",
    "token_url = 'https://oauth2.googleapis.com/token'",
    "if (!token) throw new Error('missing token')",
    "password: '',  // filled from the env at startup",
    "db_password = vault.read('secret/data/db')['data']['password']",
    "$table->string('password');",
    "validates :password, format: { with: /\\A(?=.*\\d)/ }",
    "resetPasswordToken: { type: String, select: false },",
    "SELECT * FROM users WHERE reset_token = $1 AND reset_token_expires > now()",
    "credentials = service_account.Credentials.from_service_account_file('sa.json')",
    "session['token'] = token",
    "password = st.text_input('Password', type='password')",
    "login_data = {'username': username, 'password': password}",
    "docker run -e POSTGRES_PASSWORD=mysecretpassword -d postgres",
    "app.config['JWT_SECRET_KEY'] = 'super-secret'",
    "REACT_APP_API_KEY=your_api_key_here",
    "password = hashlib.sha256(password.encode()).hexdigest()",
    "user = authenticate(request, username=username, password=password)",
    'private static final String TOKEN_PREFIX = "Bearer ";',
    "auth: { user: process.env.SMTP_USER, pass: process.env.SMTP_PASS }",
    "const token = req.cookies.token || req.headers['x-access-token'];",
    "export PATH=$PATH:$HOME/.local/bin",
    "secret: ${{ secrets.DEPLOY_KEY }}",
    "key_path = os.path.expanduser('~/.ssh/id_rsa')",
)
_CHAT = (
    "The password field is hashed with bcrypt before it is stored.",
    "I added a `password_confirmation` field to the signup form.",
    "Traceback (most recent call last):\n  File \"auth.py\", line 42, in login\n    if not verify_password(password, user.hashed_password):\nAttributeError: 'NoneType' object has no attribute 'hashed_password'",
    'sqlalchemy.exc.IntegrityError: null value in column "password_hash" violates not-null constraint',
    "KeyError: 'SECRET_KEY'",
    "Use `os.environ['API_KEY']` instead of hard-coding the key.",
    "Rotate the token by calling /api/token/refresh with the refresh token cookie.",
    "We store only the hash; the plain password never touches the log.",
    "The JWT secret comes from AWS Secrets Manager at startup.",
    "Set `token_type` to bearer and `expires_in` to 3600.",
)

CODE: tuple[str, ...] = (
    *_PY_MODELS,
    *_PY_SCHEMAS,
    *_PY_LOGIC,
    *_PY_FIXTURES,
    *_JS,
    *_GO,
    *_JAVA_CS,
    *_RUBY_PHP_RUST,
    *_SQL,
    *_CONFIG,
    *_SHELL,
    *_CHAT,
    *_HELD_OUT,
)
