"""Server settings (`Settings`, environment variables `BEAM_*`) and the GitHub App credentials.

Everything the server reads from its environment is declared here, once, and validated before the
server opens a port: a wrong setting is a clear message at start, not a failure on the first webhook.
Nothing is read at import; `Settings()` reads the environment when it is built, and tests build it
from keyword arguments (`Settings(_env_file=None, app_id=...)`).

Credentials come from the environment (`BEAM_APP_ID` + key + secret) or, when the environment has
none, from the database (sealed with BEAM_SECRET_KEY, `credentials/stored.py`), else from
`<work_dir>/app-credentials.json`, the file setup mode writes without a key (mode 0600). The
environment wins so that an operator can always override what setup mode stored.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AliasChoices, Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from bot.app.settings.secret_key import SecretKeys, parse_keys
from bot.beam.providers import KEY_VARS as PROVIDER_KEY_VARS

CREDENTIALS_FILE = "app-credentials.json"
DEFAULT_GITHUB_API_URL = "https://api.github.com"
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOST = re.compile(rf"^(?:\*\.)?{_LABEL}(?:\.{_LABEL})*(?::\d{{1,5}})?$")
_PEM_RE = re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.+-----END [A-Z ]*PRIVATE KEY-----", re.DOTALL)


class SettingsError(Exception):
    """A setting or the stored credentials are unusable; the message says which and how to fix it."""


def normalise_pem(text: str, origin: str) -> str:
    # Container environments often carry a PEM on one line with literal "\n"; accept that form too.
    if "\n" not in text.strip() and "\\n" in text:
        text = text.replace("\\n", "\n")
    if not _PEM_RE.search(text):
        raise ValueError(f"{origin} is not a PEM private key (expected '-----BEGIN ... PRIVATE KEY-----')")
    return text.strip() + "\n"


def _http_url(value: str, name: str) -> str:
    if not re.match(r"^https?://[^/\s]+", value):
        raise ValueError(f"{name} must be an http(s) URL, got {value!r}")
    return value.rstrip("/")


def split_listen(value: str) -> tuple[str, int]:
    """`host:port` (`[::1]:9090` for IPv6) as (host, port); ValueError naming BEAM_METRICS_LISTEN."""
    host, sep, port = value.strip().rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not sep or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ValueError(f"BEAM_METRICS_LISTEN must be host:port (e.g. 127.0.0.1:9090), got {value!r}")
    return host, int(port)


class Settings(BaseSettings):
    """The server's configuration. Each field is the variable BEAM_<FIELD NAME>:

    - APP_ID, PRIVATE_KEY (PEM text; one line with literal \\n accepted) or PRIVATE_KEY_PATH,
      WEBHOOK_SECRET: the App's credentials, all or none. None: setup mode, unless setup mode already
      stored them, in the database (SECRET_KEY set: `bot/app/credentials/stored.py`) or the work directory.
    - DATABASE_URL: postgresql://... for several processes; unset or empty: `<work_dir>/beam.db`.
    - WORK_DIR (default ./.beam, made absolute at start; /data in the container): database, stored
      credentials, mirrors. RUNS_DIR: where run trees go (a tmpfs makes big checkouts much faster).
    - GITHUB_API_URL (https://api.github.com; https://HOST/api/v3 for GitHub Enterprise Server).
    - GITHUB_TIMEOUT (30 s per call), GITHUB_OUTAGE_WAIT (1800 s a run waits for GitHub when it
      answers 5xx or nothing, runs/outage.py).
    - PUBLIC_URL: the address GitHub reaches this server at (webhook and setup-callback URLs).
    - WEBHOOK_PROXY_URL: a smee.io-style channel to receive deliveries from (local use); SETUP_TOKEN:
      the setup page's token (default: a fresh one per start, logged).
    - APP_MANIFEST: a custom app.yml for setup mode. HOST (127.0.0.1), PORT (8080): `serve` binds.
    - CONCURRENCY (2 jobs at a time per process), JOB_TIMEOUT (1800 s per job), LEASE_SECONDS (30;
      heartbeats renew it), SHUTDOWN_GRACE (25 s for in-flight jobs on SIGTERM), SWEEP_INTERVAL
      (60 s between sweeps that finish tracking comments left open by jobs that gave up),
      MAX_UNVERIFIED_BYTES (64 MiB of webhook bodies not yet verified, all requests together),
      HEADER_TIMEOUT (10 s), BODY_TIMEOUT (30 s), MAX_CONNECTIONS (1000; more get 503),
      PEER_SHARE (0.25 of those bytes and connections for one client address), IDLE_TIMEOUT (3 s
      for a connection to send its first request),
      REDELIVERY_INTERVAL (300 s; 0: off) and REDELIVERY_LOOKBACK (3 days, the most GitHub keeps):
      missed deliveries asked again of GitHub (web/redelivery.py),
      METRICS_TOKEN (bearer token for /metrics; unset: /metrics is not served on the public port),
      METRICS_LISTEN (host:port serving /metrics without a token),
      QUEUE_POLL_INTERVAL (2 s; new deliveries wake workers at once), POLL_INTERVAL (30 s, the
      approval-reaction poll), BOT_LOGIN (our login, when it is not `<app slug>[bot]`).
    - AUTO_REVIEW (false): review pull requests on their own where the repository's config is silent.
    - BEAM_API_KEY (or GFS_BEAM_API_KEY, NVIDIA_API_KEY, then a provider's own: OPENAI_API_KEY,
      ANTHROPIC_API_KEY, GEMINI_API_KEY, OPENROUTER_API_KEY, GROQ_API_KEY): only whether a live
      model is configured. MODEL_EXTRA_BODY (a JSON object) is read by the client.
      MODEL_TOOLS (auto): how tools reach the model, native `tools`, described in the prompt (text),
      or native until the server refuses them (auto); docs/models.md. MODEL_TEMPERATURE (unset: 0.2
      for reviews, the server's own otherwise), MODEL_STRUCTURED (auto: a review's findings asked
      for as JSON matching a schema until the server refuses; off: never), read by
      OpenAiCompatible.from_env like the others.
    - Costs and limits (docs/costs-and-limits.md): PRICE_INPUT_PER_MTOK, PRICE_OUTPUT_PER_MTOK,
      MAX_TOKENS_PER_RUN, MAX_MINUTES_PER_RUN, RUNS_PER_USER_PER_DAY, RUNS_PER_REPO_PER_DAY,
      TOKENS_PER_INSTALLATION_PER_MONTH, MAX_CONCURRENCY_PER_INSTALLATION; 0 turns a limit off.
    - LOG_LEVEL (INFO), LOG_FORMAT (text, or json: one JSON object per line). Checks, limits, the
      secret key and the waits on GitHub: below, each group under its heading.
    - RETENTION_DAYS (30): deliveries' payloads, finished jobs and runs older than this are pruned,
      and so is the effects journal no job that may still run could read (jobs/retention.py); held
      pushes and their audit trail are kept. 0 turns automatic pruning off. PRUNE_INTERVAL
      (3600 s): how often the server and each worker process prune.
    """

    model_config = SettingsConfigDict(
        env_prefix="BEAM_",
        extra="ignore",
        env_ignore_empty=True,
        validate_by_name=True,
        validate_by_alias=True,
        frozen=True,
    )

    # -- Checks (docs/checks.md).

    max_check_seconds: float = Field(default=1800.0, gt=0, le=24 * 3600)
    checks_allowed_hosts: Annotated[tuple[str, ...], NoDecode] = ()
    checks_cache_dir: Path | None = None
    check_runs_per_run: int = Field(default=3, ge=0)

    @field_validator("checks_allowed_hosts", mode="before")
    @classmethod
    def _hosts(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = [part.strip() for part in value.split(",") if part.strip()]
        if isinstance(value, list | tuple):
            for host in value:
                if not isinstance(host, str) or not _HOST.fullmatch(host):
                    raise ValueError(
                        f"BEAM_CHECKS_ALLOWED_HOSTS: {host!r} is not a host name (e.g. pypi.org, "
                        "*.pythonhosted.org, or host:port)"
                    )
            return tuple(value)
        return value

    @field_validator("checks_cache_dir")
    @classmethod
    def _absolute_cache(cls, value: Path | None) -> Path | None:
        return None if value is None else value.expanduser().absolute()

    # -- Costs and limits (docs/costs-and-limits.md): prices and caps, which `limits/policy.py` turns
    # into a `Policy`.

    # Costs and limits (issue 11). A repository's `.github/beam.yml` may lower the per-run and daily
    # limits, never raise them. 0 means no limit.
    price_input_per_mtok: float | None = Field(default=None, ge=0)
    price_output_per_mtok: float | None = Field(default=None, ge=0)
    max_tokens_per_run: int = Field(default=400_000, ge=0)
    max_minutes_per_run: float = Field(default=20.0, ge=0)
    runs_per_user_per_day: int = Field(default=50, ge=0)
    runs_per_repo_per_day: int = Field(default=500, ge=0)
    tokens_per_installation_per_month: int = Field(default=50_000_000, ge=0)
    max_concurrency_per_installation: int = Field(default=2, ge=0)
    # A review's diff context (reviews/budget.py): tokens per model call, and how many calls one review
    # may make when its pull request does not fit in one; `review.max_calls` in a repository lowers it.
    review_tokens_per_call: int = Field(default=24_000, ge=2_000)
    review_max_calls: int = Field(default=3, ge=1, le=20)
    # Issue 30: the most votes (`review.passes`) one review may run; each is a whole review's tokens.
    review_max_passes: int = Field(default=3, ge=1, le=9)
    # Issue 23: the largest held commit (its git bundle, kept in the database until the push row goes);
    # a bigger one is refused when it would be held (BEM-370).
    max_held_push_bytes: int = Field(default=50 * 1024 * 1024, ge=1024)
    # Issue 43: mirrors are partial clones (`--filter=blob:none`); the blob bytes one run may fetch
    # on demand (a file a tool reads past it is refused with BEM-357, said in the review), and the
    # largest mirror kept on this disk (a repository past it is refused with BEM-358).
    max_fetch_bytes: int = Field(default=256 * 1024 * 1024, ge=1024)
    max_repo_bytes: int = Field(default=20 * 1024 * 1024 * 1024, ge=1024 * 1024)

    # -- The secret key (`secret_keys` is its keyring, None when unset), and setup mode's look for
    # credentials another host registered.

    # Issue 23: one or more Fernet keys, comma-separated; the first seals, all open (docs/configuration.md).
    secret_key: SecretStr | None = None
    # Seconds between looks, in setup mode, for credentials another host registered in the shared
    # database: the server then serves them without a restart. 0: it never looks.
    setup_poll_interval: float = Field(default=5.0, ge=0)

    @field_validator("secret_key")
    @classmethod
    def _secret_key(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None:
            parse_keys(value.get_secret_value())
        return value

    @property
    def secret_keys(self) -> SecretKeys | None:
        return None if self.secret_key is None else SecretKeys(self.secret_key.get_secret_value())

    # -- How long beam-bot waits on GitHub: one call, and an outage.

    # Seconds one GitHub API call may take before the client gives up; with GitHub's own 10 s limit
    # it also bounds how long a retry waits before it looks for a write a dead attempt began (issue 23).
    github_timeout: float = Field(default=30.0, gt=0, le=300)
    # Issue 23: seconds a run that GitHub fails with a 5xx or no answer waits for it, trying again
    # with a growing backoff, before it fails (BEM-380); 0 fails it at once.
    github_outage_wait: float = Field(default=1800.0, ge=0)

    app_id: int | None = Field(default=None, gt=0)
    private_key: SecretStr | None = None
    private_key_path: Path | None = None
    webhook_secret: SecretStr | None = None
    # A PostgreSQL URL may hold a password: kept secret so that repr and logs never show it.
    database_url: SecretStr | None = None
    # Relative paths are resolved against the directory the server starts in (default: ./.beam).
    work_dir: Path = Path(".beam")
    runs_dir: Path | None = None
    github_api_url: str = DEFAULT_GITHUB_API_URL
    public_url: str | None = None
    app_manifest: Path | None = None
    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=1, le=65535)
    concurrency: int = Field(default=2, ge=1, le=64)
    job_timeout: float = Field(default=1800.0, gt=0)
    lease_seconds: float = Field(default=30.0, gt=0)
    # Issue 8: on SIGTERM, in-flight jobs get this long to finish (match it: docs/operating.md, "Deploys").
    shutdown_grace: float = Field(default=25.0, ge=0)
    # Issue 8: how often a worker process looks for tracking comments left non-final.
    sweep_interval: float = Field(default=60.0, gt=0)
    # Issue 8, intake under abuse: bytes of unverified webhook bodies held at once (all requests),
    # seconds to read a request head and a body, and open connections (more get 503).
    max_unverified_bytes: int = Field(default=64 * 1024 * 1024, ge=1024 * 1024)
    header_timeout: float = Field(default=10.0, gt=0)
    body_timeout: float = Field(default=30.0, gt=0)
    max_connections: int = Field(default=1000, ge=1)
    # Issue 32: the share of the unverified-bytes budget and of the connections one peer (client
    # address) may hold, and how long a connection may stay open without sending a request.
    peer_share: float = Field(default=0.25, gt=0, le=1)
    idle_timeout: float = Field(default=3.0, gt=0)
    # Issue 32: deliveries GitHub could not hand over (the bot down, a 503) are asked again at start
    # and every REDELIVERY_INTERVAL seconds (0: never), looking back REDELIVERY_LOOKBACK seconds at
    # most (GitHub keeps deliveries three days).
    redelivery_interval: float = Field(default=300.0, ge=0)
    redelivery_lookback: float = Field(default=3 * 86400.0, gt=0, le=3 * 86400.0)
    # Issue 32: /metrics on the public port needs this bearer token (unset: not served there);
    # METRICS_LISTEN (host:port) serves it without a token on an address of its own.
    metrics_token: SecretStr | None = None
    metrics_listen: str | None = None
    # Issue 44: /dashboard's operator view for the bearer of this token (besides the App owner's
    # admins), and the App's OAuth client when its credentials come from the environment.
    dashboard_token: SecretStr | None = None
    client_id: str | None = None
    client_secret: SecretStr | None = None
    # Issue 9: a delivery that cannot lead to work (most comments) is kept as id, event, action and
    # time only; true keeps its whole body too (an audit that needs every comment's text).
    keep_ignored_payloads: bool = False
    queue_poll_interval: float = Field(default=2.0, gt=0)
    poll_interval: float = Field(default=30.0, gt=0)
    # Approval polling starts this often and backs off to `poll_interval` as a held push ages.
    poll_min_interval: float = Field(default=5.0, gt=0)
    # The approval comment offers a 👍/👎 reaction as an answer; `beam-bot action` turns it off, since a
    # reaction starts no workflow there and only `/beam approve <id>` is seen.
    approve_by_reaction: bool = True
    bot_login: str | None = None
    # Automatic reviews of pull requests where `.github/beam.yml` does not say (auto_review.enabled).
    auto_review: bool = False
    # Setup (web/setup.py, web/proxy.py): a webhook proxy channel (https://smee.io/<channel>) whose
    # Server-Sent Events carry GitHub's deliveries to a server GitHub cannot reach, and the setup
    # page's one-time token (generated and logged at start when unset).
    webhook_proxy_url: str | None = None
    setup_token: SecretStr | None = None
    # The seed's precedence (BEAM_API_KEY, then GFS_BEAM_API_KEY, then NVIDIA_API_KEY), then a
    # provider's own key (issue 42: OPENAI_API_KEY...); the client itself is built by
    # OpenAiCompatible.from_env, this only tells whether a live model is configured.
    llm_api_key: SecretStr | None = Field(
        default=None,
        validation_alias=AliasChoices(
            "BEAM_API_KEY", "GFS_BEAM_API_KEY", "NVIDIA_API_KEY", *PROVIDER_KEY_VARS
        ),
    )
    # Issue 20: validated here so a typo stops the start with a clear message; the client gets it.
    model_tools: Literal["auto", "native", "text"] = "auto"
    model_structured: Literal["auto", "off"] = "auto"

    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    log_format: Literal["text", "json"] = "text"
    retention_days: float = Field(default=30.0, ge=0)
    prune_interval: float = Field(default=3600.0, gt=0)

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper(cls, value: Any) -> Any:
        return value.strip().upper() if isinstance(value, str) else value

    @field_validator("log_format", "model_tools", "model_structured", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("*", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: Any) -> Any:
        # BEAM_DATABASE_URL= (empty) means "the default", as it does for every other variable.
        return None if isinstance(value, str) and value.strip() == "" else value

    @field_validator("work_dir", "runs_dir", "private_key_path", "app_manifest")
    @classmethod
    def _absolute(cls, value: Path | None) -> Path | None:
        return None if value is None else value.expanduser().absolute()

    @field_validator("github_api_url")
    @classmethod
    def _api_url(cls, value: str) -> str:
        return _http_url(value, "BEAM_GITHUB_API_URL")

    @field_validator("public_url")
    @classmethod
    def _public_url(cls, value: str | None) -> str | None:
        return None if value is None else _http_url(value, "BEAM_PUBLIC_URL")

    @field_validator("webhook_proxy_url")
    @classmethod
    def _proxy_url(cls, value: str | None) -> str | None:
        return None if value is None else _http_url(value, "BEAM_WEBHOOK_PROXY_URL")

    @field_validator("setup_token")
    @classmethod
    def _setup_token(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and len(value.get_secret_value()) < 16:
            raise ValueError("BEAM_SETUP_TOKEN is too short: use at least 16 random characters")
        return value

    @field_validator("metrics_token")
    @classmethod
    def _metrics_token(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and len(value.get_secret_value()) < 16:
            raise ValueError("BEAM_METRICS_TOKEN is too short: use at least 16 random characters")
        return value

    @field_validator("dashboard_token")
    @classmethod
    def _dashboard_token(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and len(value.get_secret_value()) < 16:
            raise ValueError("BEAM_DASHBOARD_TOKEN is too short: use at least 16 random characters")
        return value

    @field_validator("metrics_listen")
    @classmethod
    def _metrics_listen(cls, value: str | None) -> str | None:
        if value is not None:
            split_listen(value)
        return value

    @property
    def metrics_address(self) -> tuple[str, int] | None:
        """BEAM_METRICS_LISTEN as (host, port), when set."""
        return None if self.metrics_listen is None else split_listen(self.metrics_listen)

    @field_validator("private_key")
    @classmethod
    def _private_key(cls, value: SecretStr | None) -> SecretStr | None:
        return (
            None if value is None else SecretStr(normalise_pem(value.get_secret_value(), "BEAM_PRIVATE_KEY"))
        )

    @field_validator("webhook_secret")
    @classmethod
    def _secret(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and len(value.get_secret_value()) < 8:
            raise ValueError(
                "BEAM_WEBHOOK_SECRET is too short: use at least 8 characters (GitHub: 32 random)"
            )
        return value

    @model_validator(mode="after")
    def _credentials_complete(self) -> Settings:
        if self.private_key is not None and self.private_key_path is not None:
            raise ValueError("set only one of BEAM_PRIVATE_KEY and BEAM_PRIVATE_KEY_PATH, not both")
        if self.private_key_path is not None and not self.private_key_path.is_file():
            raise ValueError(f"BEAM_PRIVATE_KEY_PATH: no file at {self.private_key_path}")
        if self.app_manifest is not None and not self.app_manifest.is_file():
            raise ValueError(f"BEAM_APP_MANIFEST: no file at {self.app_manifest}")
        has_key = self.private_key is not None or self.private_key_path is not None
        if self.app_id is None:
            if has_key or self.webhook_secret is not None:
                raise ValueError(
                    "BEAM_PRIVATE_KEY / BEAM_WEBHOOK_SECRET are set but BEAM_APP_ID is not: set BEAM_APP_ID "
                    "too, or unset them to register the App in setup mode"
                )
            return self
        if self.webhook_secret is None:
            raise ValueError("BEAM_WEBHOOK_SECRET is required when BEAM_APP_ID is set")
        if not has_key:
            raise ValueError("BEAM_PRIVATE_KEY or BEAM_PRIVATE_KEY_PATH is required when BEAM_APP_ID is set")
        return self

    @property
    def credentials_path(self) -> Path:
        return self.work_dir / CREDENTIALS_FILE

    @property
    def github_web_url(self) -> str:
        """github.com for api.github.com, https://SUB.ghe.com for GHE.com's https://api.SUB.ghe.com, and
        https://HOST for GitHub Enterprise Server's https://HOST/api/v3."""
        if re.match(r"^https?://api\.github\.com$", self.github_api_url):
            return "https://github.com"
        ghe_com = re.match(r"^(https?://)api\.([A-Za-z0-9-]+\.ghe\.com)$", self.github_api_url)
        if ghe_com:
            return ghe_com.group(1) + ghe_com.group(2)
        return re.sub(r"/api/v3$", "", self.github_api_url)

    @property
    def has_llm_key(self) -> bool:
        return self.llm_api_key is not None


def load_settings() -> Settings:
    """Settings from the environment, or `SettingsError` with one line per problem (no secret values)."""
    try:
        return Settings()
    except ValidationError as exc:
        raise SettingsError(describe_validation_error(exc)) from None


def describe_validation_error(exc: ValidationError) -> str:
    lines = ["invalid beam-bot settings:"]
    for err in exc.errors(include_input=False, include_url=False):
        name = _variable_name(err["loc"])
        message = str(err["msg"]).removeprefix("Value error, ")
        # A validator's message often names its variable already: say it once, not twice.
        if name and not message.startswith(name):
            message = f"{name}: {message}"
        lines.append(f"  {message}")
    return "\n".join(lines)


def _variable_name(loc: tuple[int | str, ...]) -> str:
    if not loc:
        return ""
    first = str(loc[0])
    # Fields read through an alias (BEAM_API_KEY, NVIDIA_API_KEY) report the alias itself.
    if first.isupper():
        return first
    return "BEAM_" + "_".join(str(p) for p in loc).upper()


def ensure_work_dir(path: Path) -> None:
    """Creates the work directory (0700) with a `.gitignore` of `*`.

    The default ./.beam may sit inside a git checkout; the ignore file keeps the stored credentials
    and the database out of `git add -A`.
    """
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    ignore = path / ".gitignore"
    if not ignore.exists():
        ignore.write_text(
            "# beam-bot's work directory: credentials, database, mirrors. Never commit it.\n*\n"
        )
