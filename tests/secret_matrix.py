"""Secret forms for the leak matrix and the bench, generated from documented key formats.

Each form is (name, text a user or a model would write, the secret in it). Values are drawn
from a seeded generator in each vendor's documented shape (prefix, alphabet, length), never
copied from a scanner's own test strings. ``ENV`` holds environment variables (broad names and
one with no secret-looking name at all) whose values appear in the forms raw, base64, hex,
URL-encoded, JSON/``\\u``-escaped and wrapped over lines.
"""

from __future__ import annotations

import base64
import functools
import json
import random
import re
import string
import textwrap
from urllib.parse import quote

_rng = random.Random(20)
UPPER, LOWER, DIGITS = string.ascii_uppercase, string.ascii_lowercase, string.digits
ALNUM = UPPER + LOWER + DIGITS
HEX = "0123456789abcdef"
B64 = ALNUM + "+/"


def pick(alphabet: str, n: int) -> str:
    return "".join(_rng.choice(alphabet) for _ in range(n))


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def uescape(text: str) -> str:
    return "".join(f"\\u{ord(c):04x}" for c in text)


# -- documented vendor formats -------------------------------------------------------------

aws_id = "AKIA" + pick(UPPER + "234567", 16)
aws_secret = pick(B64, 40)
openai_key = "sk-proj-" + pick(ALNUM + "_-", 40) + pick(ALNUM, 8)
openai_legacy = "sk-" + pick(ALNUM, 20) + "T3BlbkFJ" + pick(ALNUM, 20)
anthropic_key = "sk-ant-api03-" + pick(ALNUM + "_-", 93) + "AA"
gh_classic = "ghp_" + pick(ALNUM, 36)
gh_fine = "github_pat_" + pick(ALNUM, 22) + "_" + pick(ALNUM, 59)
gh_oauth = "gho_" + pick(ALNUM, 36)
gitlab = "glpat-" + pick(ALNUM + "_-", 20)
slack_bot = f"xoxb-{pick(DIGITS, 12)}-{pick(DIGITS, 13)}-{pick(ALNUM, 24)}"
slack_user = f"xoxp-{pick(DIGITS, 12)}-{pick(DIGITS, 12)}-{pick(DIGITS, 13)}-{pick(HEX, 32)}"
slack_hook = f"https://hooks.slack.com/services/T{pick(UPPER + DIGITS, 8)}/B{pick(UPPER + DIGITS, 10)}/{pick(ALNUM, 24)}"  # noqa: E501
stripe_live = "sk_live_" + pick(ALNUM, 24)
stripe_restricted = "rk_live_" + pick(ALNUM, 24)
google = "AIza" + pick(ALNUM + "_-", 35)
sendgrid = f"SG.{pick(ALNUM + '_-', 22)}.{pick(ALNUM + '_-', 43)}"
twilio_key = "SK" + pick(HEX, 32)
twilio_sid = "AC" + pick(HEX, 32)
mailchimp = pick(HEX, 32) + "-us14"
npm = "npm_" + pick(ALNUM, 36)
pypi = "pypi-AgEIcHlwaS5vcmc" + pick(ALNUM + "_-", 80)
jwt = (
    ".".join(
        base64.urlsafe_b64encode(part.encode()).decode().rstrip("=")
        for part in ('{"alg":"HS256","typ":"JWT"}', '{"sub":"' + pick(DIGITS, 10) + '"}')
    )
    + "."
    + pick(ALNUM + "_-", 43)
)
discord_hook = f"https://discord.com/api/webhooks/{pick(DIGITS, 18)}/{pick(ALNUM + '_-', 68)}"
telegram = f"{pick(DIGITS, 10)}:AA{pick(ALNUM + '_-', 33)}"
azure_storage = pick(B64, 86) + "=="
hf = "hf_" + pick(ALNUM, 34)
digitalocean = "dop_v1_" + pick(HEX, 64)
shopify = "shpat_" + pick(HEX, 32)
square = "sq0csp-" + pick(ALNUM + "_-", 43)
pem_body = "\n".join(textwrap.wrap(pick(B64, 320), 64))
pem = f"-----BEGIN RSA PRIVATE KEY-----\n{pem_body}\n-----END RSA PRIVATE KEY-----"
openssh_body = "\n".join(textwrap.wrap("b3BlbnNzaC1rZXktdjEAAAAA" + pick(B64, 200), 70))
openssh = f"-----BEGIN OPENSSH PRIVATE KEY-----\n{openssh_body}\n-----END OPENSSH PRIVATE KEY-----"

# -- passwords and tokens with no vendor shape -------------------------------------------

db_pass = "Pg" + pick(ALNUM, 14)
mongo_pass = "Mo" + pick(ALNUM, 14)
redis_pass = "Rd" + pick(ALNUM, 18)
git_token = pick(ALNUM, 32)
basic_pass = "Bx" + pick(ALNUM, 12) + "!"
docker_pass = "Dk" + pick(ALNUM, 14)
netrc_pass = "Nr" + pick(ALNUM, 12)
pgpass_pass = "Pp" + pick(ALNUM, 12)
curl_pass = "Cu" + pick(ALNUM, 12)
mysql_pass = "My" + pick(ALNUM, 12)
sshpass_pass = "Ss" + pick(ALNUM, 12)
phrase_pass = "Ph" + pick(ALNUM, 10) + "7"
yaml_pass = "Ym" + pick(ALNUM, 14)
json_secret = pick(ALNUM + "_-", 40)
bearer = pick(ALNUM + "._-", 48)

# -- environment values under broad names (and one under no secret name) ------------------

ENV = {
    "STRIPE_SK": "Sv" + pick(ALNUM, 30),
    "GH_PAT": "Gp" + pick(ALNUM, 30),
    "OPENAI_API_KEY_OLD": "Oo" + pick(ALNUM, 30),
    "MY_PASSWD": "Mp" + pick(ALNUM, 14),
    "SLACK_WEBHOOK_URL": "https://hooks.example.org/in/" + pick(ALNUM, 28),
    "DB_CREDENTIALS": "Dc" + pick(ALNUM, 22),
    "SERVICE_AUTH": "Sa" + pick(ALNUM, 26),
    "PAYMENT_KEY_2": "Pk" + pick(ALNUM, 26),
    "APP_PWD": "Ap" + pick(ALNUM, 14),
    "ACME_BLOB": pick(UPPER, 4) + pick(LOWER, 8) + pick(DIGITS, 4) + pick(ALNUM, 20),
}

# -- more vendor formats (issue 20's held-out audit: gitleaks/trufflehog vendors we lacked) ----

BECH32_UPPER = "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L"
age_key = "AGE-SECRET-KEY-1" + pick(BECH32_UPPER, 58)
postman = f"PMAK-{pick(HEX, 24)}-{pick(HEX, 34)}"
newrelic = "NRAK-" + pick(UPPER + DIGITS, 27)
heroku = "HRKU-AA" + pick(ALNUM + "_-", 58)
heroku_uuid = f"{pick(HEX, 8)}-{pick(HEX, 4)}-4{pick(HEX, 3)}-a{pick(HEX, 3)}-{pick(HEX, 12)}"
atlassian = "ATATT3xFfGF0" + pick(ALNUM + "_-", 170) + "=" + pick(UPPER[:6] + DIGITS, 8)
google_oauth_secret = "GOCSPX-" + pick(ALNUM + "_-", 28)
alibaba = "LTAI" + pick(ALNUM, 20)
vault = "hvs." + pick(ALNUM + "_-", 90)
doppler = "dp.pt." + pick(ALNUM, 43)
grafana_sa = "glsa_" + pick(ALNUM, 32) + "_" + pick(HEX, 8)
sentry_token = "sntrys_" + pick(ALNUM, 80)
sentry_key = pick(HEX, 32)
stripe_webhook = "whsec_" + pick(ALNUM, 32)
databricks = "dapi" + pick(HEX, 32)
linear = "lin_api_" + pick(ALNUM, 40)
gh_app = "ghs_" + pick(ALNUM, 36)
gitlab_runner = "glrt-" + pick(ALNUM + "_-", 20)
openai_svcacct = "sk-svcacct-" + pick(ALNUM + "_-", 74)
slack_app = f"xapp-1-A{pick(UPPER + DIGITS, 10)}-{pick(DIGITS, 13)}-{pick(HEX, 64)}"
discord_bot = f"M{pick(ALNUM, 25)}.{pick(ALNUM + '_-', 6)}.{pick(ALNUM + '_-', 38)}"
azure_ad_secret = pick(ALNUM, 3) + "8Q~" + pick(ALNUM + "_~.-", 34)
azure_sas = pick(ALNUM, 40) + "%2B" + pick(ALNUM, 3) + "%3D"
dd_app_key = pick(HEX, 40)
okta = "00" + pick(ALNUM + "_-", 40)
docker_login_pass = "Dl" + pick(ALNUM, 14)
pg_env_pass = "Pe" + pick(ALNUM, 14)
kube_token = pick(ALNUM, 40)
gcp_body = pick(B64, 64) + "\\n" + pick(B64, 64)
gcp_json = (
    '{"type": "service_account", "project_id": "acme", "private_key": '
    f'"-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADAN{gcp_body}\\n-----END PRIVATE KEY-----\\n"}}'
)
encrypted_body = "\n".join(textwrap.wrap(pick(B64, 192), 64))
encrypted_pem = (
    f"-----BEGIN ENCRYPTED PRIVATE KEY-----\n{encrypted_body}\n-----END ENCRYPTED PRIVATE KEY-----"
)
pgp_body = "\n".join(textwrap.wrap(pick(B64, 192), 64))
pgp = f"-----BEGIN PGP PRIVATE KEY BLOCK-----\n\n{pgp_body}\n-----END PGP PRIVATE KEY BLOCK-----"
putty = "Nn" + pick(B64, 60)
mailgun = "key-" + pick(HEX, 32)
groq = "gsk_" + pick(ALNUM, 52)
supabase = "sbp_" + pick(HEX, 40)
terraform = pick(ALNUM, 14) + ".atlasv1." + pick(ALNUM + "_-", 67)
langsmith = f"lsv2_pt_{pick(HEX, 32)}_{pick(HEX, 10)}"
pinecone = "pcsk_" + pick(ALNUM, 6) + "_" + pick(ALNUM, 60)
tavily = "tvly-" + pick(ALNUM, 32)
elevenlabs = "sk_" + pick(HEX, 48)
brevo = f"xkeysib-{pick(HEX, 64)}-{pick(ALNUM, 16)}"
fcm = f"AAAA{pick(ALNUM + '_-', 7)}:APA91b{pick(ALNUM + '_-', 134)}"
codecov = f"{pick(HEX, 8)}-{pick(HEX, 4)}-4{pick(HEX, 3)}-8{pick(HEX, 3)}-{pick(HEX, 12)}"

NEW_FORMS: list[tuple[str, str, str]] = [
    ("age secret key", f"# created: 2026\n{age_key}\n", age_key),
    ("postman api key", f"x-api-key header set from {postman}", postman),
    ("new relic user key", f"NEW_RELIC_KEY {newrelic} works", newrelic),
    ("heroku api key", f"heroku auth token: {heroku}", heroku),
    ("heroku legacy uuid key", f"export HEROKU_API_KEY={heroku_uuid}", heroku_uuid),
    ("atlassian api token", f"jira token {atlassian}", atlassian),
    (
        "google oauth client secret",
        f"client {google_oauth_secret} for the app",
        google_oauth_secret,
    ),
    ("alibaba access key id", f"aliyun {alibaba}", alibaba),
    ("vault token", f"VAULT_TOKEN {vault} expires", vault),
    ("doppler token", f"doppler run --token {doppler}", doppler),
    ("grafana service account", f"grafana {grafana_sa}", grafana_sa),
    ("sentry auth token", f"sentry-cli uses {sentry_token}", sentry_token),
    ("sentry dsn", f"dsn = https://{sentry_key}@o4504.ingest.sentry.io/45", sentry_key),
    ("stripe webhook secret", f"endpoint secret {stripe_webhook}", stripe_webhook),
    ("databricks token", f"databricks {databricks}", databricks),
    ("linear api key", f"linear {linear}", linear),
    ("github app token", f"installation {gh_app}", gh_app),
    ("gitlab runner token", f"gitlab-runner register --token {gitlab_runner}", gitlab_runner),
    ("openai service account key", f"{openai_svcacct} in CI", openai_svcacct),
    ("slack app token", f"socket mode {slack_app}", slack_app),
    ("discord bot token", f"bot.run({discord_bot!r})", discord_bot),
    ("azure ad client secret", f"client secret value {azure_ad_secret}", azure_ad_secret),
    (
        "azure sas url",
        f"https://acct.blob.core.windows.net/c/f?sv=2022-11-02&sp=r&se=2026-01-01&sig={azure_sas}",
        azure_sas.split("%")[0],
    ),
    ("datadog app key", f"DD_APP_KEY={dd_app_key}", dd_app_key),
    ("okta ssws header", f"Authorization: SSWS {okta}", okta),
    ("docker login -p", f"docker login -u bob -p {docker_login_pass} r.io", docker_login_pass),
    ("PGPASSWORD", f"PGPASSWORD={pg_env_pass} psql -h db app", pg_env_pass),
    ("kubeconfig token", f"users:\n- name: admin\n  user:\n    token: {kube_token}\n", kube_token),
    ("gcp service account json", gcp_json, gcp_body.split("\\n")[1]),
    ("encrypted private key", encrypted_pem, encrypted_body.splitlines()[1]),
    ("pgp private key", pgp, pgp_body.splitlines()[1]),
    (
        "putty private key",
        f"PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nPrivate-Lines: 1\n{putty}\n"
        f"Private-MAC: {pick(HEX, 64)}",
        putty,
    ),
    ("mailgun key", f"mailgun {mailgun}", mailgun),
    ("groq key", f"GROQ {groq}", groq),
    ("supabase token", f"supabase login --token {supabase}", supabase),
    ("terraform cloud token", f'credentials "app.terraform.io" {{ t = {terraform} }}', terraform),
    ("langsmith key", f"LANGCHAIN_API_KEY {langsmith}", langsmith),
    ("pinecone key", f"Pinecone(api_key=os.environ['PC']) # was {pinecone}", pinecone),
    ("tavily key", f"tavily search --key {tavily}", tavily),
    ("elevenlabs key", f"xi {elevenlabs}", elevenlabs),
    ("brevo key", f"brevo {brevo}", brevo),
    ("firebase fcm server key", f"key={fcm}", fcm),
    ("uuid token under a *_TOKEN name", f"export CODECOV_TOKEN={codecov}", codecov),
]


# -- issue 43: the classes that still got through ---------------------------------------------
# (each form's secret is the part that would be left behind by a partial redaction: a JWT's
# signature, the piece of a key after its line break or its invisible character)

jwt_sig = pick(ALNUM + "_-", 43)
jwt2 = (
    ".".join(
        base64.urlsafe_b64encode(part.encode()).decode().rstrip("=")
        for part in ('{"alg":"RS256","kid":"k1"}', '{"sub":"' + pick(DIGITS, 12) + '"}')
    )
    + "."
    + jwt_sig
)
wrap_gh = "ghp_" + pick(ALNUM, 36)
wrap_ant = "sk-ant-api03-" + pick(ALNUM + "_-", 93) + "AA"
wrap_json = "sk-proj-" + pick(ALNUM, 48)
wrap_crlf = "glpat-" + pick(ALNUM, 20)
inv_ant = "sk-ant-api03-" + pick(ALNUM, 60)
inv_gh = "ghp_" + pick(ALNUM, 36)
inv_aws = "AKIA" + pick(UPPER + "234567", 16)
inv_stripe = "sk_live_" + pick(ALNUM, 30)
amz_credential = "ASIA" + pick(UPPER + "234567", 16)
amz_token = pick(ALNUM, 60)
amz_signature = pick(HEX, 64)
goog_signature = pick(HEX, 256)
cloudfront_signature = pick(ALNUM, 40) + "~" + pick(ALNUM, 30) + "__"
plain_sig = pick(HEX, 32)
private_key_id = pick(HEX, 40)
hex_token_40 = pick(HEX, 40)
hex_secret_32 = pick(HEX, 32)
hex_signature_64 = pick(HEX, 64)
hex_key_48 = pick(HEX, 48)
pgpass_other_port = "Pq" + pick(ALNUM, 14)
pgpass_ip = "Pi" + pick(ALNUM, 14)
pgpass_json = "Pj" + pick(ALNUM, 14)
amz_url = (
    "https://acme.s3.us-east-1.amazonaws.com/report.pdf?X-Amz-Algorithm=AWS4-HMAC-SHA256"
    f"&X-Amz-Credential={amz_credential}%2F20260101%2Fus-east-1%2Fs3%2Faws4_request"
    "&X-Amz-Date=20260101T000000Z&X-Amz-Expires=3600"
    f"&X-Amz-Security-Token={amz_token}%2F%2F%2F%2F%2FwEaCXVzLWVhc3QtMSJH"
    f"&X-Amz-SignedHeaders=host&X-Amz-Signature={amz_signature}"
)
goog_url = (
    "https://storage.googleapis.com/acme/report.pdf?X-Goog-Algorithm=GOOG4-RSA-SHA256"
    "&X-Goog-Credential=signer%40acme.iam.gserviceaccount.com%2F20260101%2Fauto%2Fstorage"
    "%2Fgoog4_request&X-Goog-Date=20260101T000000Z&X-Goog-Expires=900"
    f"&X-Goog-SignedHeaders=host&X-Goog-Signature={goog_signature}"
)
service_account = json.dumps(
    {
        "type": "service_account",
        "project_id": "acme",
        "private_key_id": private_key_id,
        "client_email": "signer@acme.iam.gserviceaccount.com",
    },
    indent=2,
)

ISSUE43_FORMS: list[tuple[str, str, str]] = [
    ("whole jwt in prose", f"the session is {jwt2} until noon", jwt_sig),
    ("whole jwt in a json field", json.dumps({"id": jwt2}), jwt_sig),
    (
        "key wrapped over a line break",
        f"push with {wrap_gh[:14]}\n{wrap_gh[14:]} later",
        wrap_gh[14:],
    ),
    ("key wrapped and indented", f"api_key: {wrap_ant[:30]}\n  {wrap_ant[30:]}\n", wrap_ant[30:]),
    (
        "key wrapped inside a json string",
        json.dumps({"note": f"use {wrap_json[:26]}\n{wrap_json[26:]} please"}),
        wrap_json[26:],
    ),
    ("key wrapped at a crlf", f"gitlab {wrap_crlf[:12]}\r\n{wrap_crlf[12:]} ok", wrap_crlf[12:]),
    ("zero-width space in a key", f"key {inv_ant[:9]}\u200b{inv_ant[9:]}", inv_ant[9:]),
    ("word joiner in a key", f"pat {inv_gh[:6]}\u2060{inv_gh[6:]}", inv_gh[6:]),
    ("bom in a key", f"aws {inv_aws[:6]}\ufeff{inv_aws[6:]} id", inv_aws[6:]),
    ("soft hyphen in a key", f"stripe {inv_stripe[:10]}\u00ad{inv_stripe[10:]}", inv_stripe[10:]),
    ("aws presigned signature", f"download {amz_url} today", amz_signature),
    ("aws presigned credential", f"download {amz_url} today", amz_credential),
    ("aws presigned security token", f"download {amz_url} today", amz_token),
    ("gcs signed url", f'<a href="{goog_url}">report</a>', goog_signature),
    (
        "cloudfront signature",
        f"https://d1.cloudfront.net/v.mp4?Expires=1767225600&Signature={cloudfront_signature}"
        "&Key-Pair-Id=K2JCJMDEHXQW5F",
        cloudfront_signature,
    ),
    ("sig= query value", f"https://files.example.com/dl?f=a.zip&sig={plain_sig}&e=1", plain_sig),
    ("service account private_key_id", service_account, private_key_id),
    ("hex token after 'token'", f"my github token is {hex_token_40} (rotate it)", hex_token_40),
    ("hex after 'secret'", f"client secret {hex_secret_32}", hex_secret_32),
    ("hex webhook signature", f"X-Hub-Signature-256: sha256={hex_signature_64}", hex_signature_64),
    ("hex after 'key'", f"the license key {hex_key_48} expires", hex_key_48),
    (
        "pgpass on another port",
        f"db.example.com:5433:app:bob:{pgpass_other_port}",
        pgpass_other_port,
    ),
    ("pgpass with an ip host", f"10.0.0.5:5432:*:postgres:{pgpass_ip}\n", pgpass_ip),
    (
        "pgpass inside a json string",
        json.dumps({"file": f"# ~/.pgpass\nlocalhost:6543:app:app:{pgpass_json}\n"}),
        pgpass_json,
    ),
]


def _env_forms() -> list[tuple[str, str, str]]:
    out = []
    for name, value in ENV.items():
        out.append((f"env {name} raw", f"the value in use is {value} (from the shell)", value))
    a, b, c, d, e, f, g = (ENV[k] for k in list(ENV)[:7])
    out += [
        ("env base64", f"decoded config: {b64(a)}", a),
        ("env base64 user:", f"Authorization: Basic {b64('deploy:' + b)}", b),
        ("env hex", f"dump {c.encode().hex()} end", c),
        ("env url-encoded", f"https://api.example.org/x?key={quote(d, safe='')}&v=1", d),
        ("env json-escaped", '{"v": "' + e.replace("/", "\\/") + '"}', e),
        ("env unicode-escaped", f'{{"v": "{uescape(f)}"}}', f),
        ("env line-wrapped", "blob:\n" + "\n".join(textwrap.wrap(b64(g * 2), 16)), g),
    ]
    return out


FORMS: list[tuple[str, str, str]] = [
    ("aws access key id", f"aws_access_key_id = {aws_id}", aws_id),
    ("aws secret after 'secret'", f"the aws secret is {aws_secret} ok", aws_secret),
    ("aws secret env line", f"export AWS_SECRET_ACCESS_KEY={aws_secret}", aws_secret),
    ("openai project key", f"client = OpenAI(api_key='{openai_key}')", openai_key),
    ("openai legacy key", f"key {openai_legacy}", openai_legacy),
    ("anthropic key", f"ANTHROPIC_API_KEY={anthropic_key}", anthropic_key),
    ("github classic pat", f"git push https://{gh_classic}@github.com/o/r", gh_classic),
    ("github fine-grained pat", f"token: {gh_fine}", gh_fine),
    ("github oauth", f"gh auth login --with-token <<< {gh_oauth}", gh_oauth),
    ("gitlab pat", f"PRIVATE-TOKEN: {gitlab}", gitlab),
    ("slack bot token", f"slack token {slack_bot}", slack_bot),
    ("slack user token", f"use {slack_user} for the call", slack_user),
    ("slack webhook", f"post to {slack_hook}", slack_hook),
    ("stripe live key", f"stripe.api_key = {stripe_live}", stripe_live),
    ("stripe restricted key", f"{stripe_restricted} was rotated", stripe_restricted),
    ("google api key", f"maps?key={google}", google),
    ("sendgrid key", f"SENDGRID={sendgrid}", sendgrid),
    ("twilio api key", f"twilio key {twilio_key}", twilio_key),
    ("twilio account sid", f"sid {twilio_sid}", twilio_sid),
    ("mailchimp key", f"mailchimp {mailchimp}", mailchimp),
    ("npm token", f"//registry.npmjs.org/:_authToken={npm}", npm),
    ("pypi token", f"password = {pypi}", pypi),
    ("jwt", f"cookie: session={jwt}", jwt),
    ("discord webhook", f"webhook {discord_hook}", discord_hook),
    ("telegram bot token", f"bot {telegram}", telegram),
    (
        "azure storage",
        f"DefaultEndpointsProtocol=https;AccountName=acme;AccountKey={azure_storage};",
        azure_storage,
    ),
    ("huggingface token", f"HF token {hf}", hf),
    ("digitalocean token", f"doctl auth init -t {digitalocean}", digitalocean),
    ("shopify token", f"X-Shopify-Access-Token: {shopify}", shopify),
    ("square oauth secret", f"square secret {square}", square),
    ("rsa private key", pem, pem_body.splitlines()[2]),
    ("openssh private key", openssh, openssh_body.splitlines()[1]),
    ("postgres url", f"DATABASE_URL=postgres://app:{db_pass}@db.internal:5432/app", db_pass),
    ("mongodb url", f"mongodb+srv://admin:{mongo_pass}@cluster0.example.net/x", mongo_pass),
    ("redis url", f"redis://:{redis_pass}@cache:6379/0", redis_pass),
    ("git url token", f"git clone https://x-access-token:{git_token}@example.com/r.git", git_token),
    (
        "authorization basic",
        f"Authorization: Basic {b64('alice:' + basic_pass)}",
        basic_pass,
    ),
    (
        "docker auth",
        json.dumps({"auths": {"r.io": {"auth": b64("bob:" + docker_pass)}}}),
        docker_pass,
    ),
    ("netrc", f"machine api.example.com login bob password {netrc_pass}", netrc_pass),
    ("pgpass", f"db.example.com:5432:app:bob:{pgpass_pass}", pgpass_pass),
    ("curl -u", f"curl -u bob:{curl_pass} https://api.example.com", curl_pass),
    ("mysql -p", f"mysql -u root -p{mysql_pass} app", mysql_pass),
    ("sshpass -p", f"sshpass -p '{sshpass_pass}' ssh bob@host", sshpass_pass),
    ("my password is", f"fyi my password is {phrase_pass} for the staging box", phrase_pass),
    ("yaml password", f"database:\n  password: {yaml_pass}\n", yaml_pass),
    ("json client_secret", json.dumps({"client_secret": json_secret}), json_secret),
    ("bearer header", f"curl -H 'Authorization: Bearer {bearer}' https://x", bearer),
    ("base64 of a key", f"encoded: {b64(openai_key)}", openai_key),
    ("hex of a key", f"hex {gh_classic.encode().hex()}", gh_classic),
    ("url-encoded key in query", f"?token={quote(stripe_live + '/x', safe='')}", stripe_live),
    ("unicode-escaped key", f'{{"k": "{uescape(gh_oauth)}"}}', gh_oauth),
    (
        "line-wrapped key",
        "key:\n" + "\n".join(textwrap.wrap(b64(anthropic_key), 40)),
        anthropic_key,
    ),
    *_env_forms(),
    *NEW_FORMS,
    *ISSUE43_FORMS,
]

assert len(FORMS) >= 60, len(FORMS)
SECRETS = sorted({secret for _, _, secret in FORMS}, key=len)
ALL_TEXT = "\n\n".join(text for _, text, _ in FORMS)


@functools.cache
def forms_of(secret: str) -> frozenset[str]:
    """``secret_forms.leaked_forms`` plus the JSON/``\\u``-escaped forms."""
    from secret_forms import leaked_forms

    escaped = {uescape(secret), secret.replace("/", "\\/")}
    return frozenset(leaked_forms(secret) | escaped)


def found_in(text: str, secret: str) -> bool:
    """``secret`` in any form in ``text``, also once line breaks are taken out (wrapped)."""
    return any(f in reading for reading in readings(text) for f in forms_of(secret))


@functools.lru_cache(maxsize=8)
def readings(text: str) -> tuple[str, str, str]:
    """``text``, it with its line breaks taken out, and it without invisible characters: made
    once per text, not once per secret looked for in it (some texts are a whole log)."""
    joined = text.replace("\\n", "").replace("\\r", "").replace("\n", "").replace("\r", "")
    return text, joined, INVISIBLE.sub("", text)


INVISIBLE = re.compile("[\u200b\u200c\u200d\u2060\ufeff\u00ad]")
