"""Server settings (`Settings`, environment variables `BEAM_*`) and the GitHub App credentials.

Everything the server reads from its environment is declared here, once, and validated before the
server opens a port: a wrong setting is a clear message at start, not a failure on the first webhook.
Nothing is read at import; `Settings()` reads the environment when it is built, and tests build it
from keyword arguments (`Settings(_env_file=None, app_id=...)`).

Credentials come from the environment (`BEAM_APP_ID` + key + secret) or, when the environment has
none, from the database (sealed with BEAM_SECRET_KEY, `stored_credentials.py`), else from
`<work_dir>/app-credentials.json`, the file setup mode writes without a key (mode 0600). The
environment wins so that an operator can always override what setup mode stored.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import AliasChoices, Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import SettingsConfigDict

from bot.app.check_settings import CheckSettings
from bot.app.credential_settings import CredentialSettings
from bot.app.github_settings import GitHubSettings
from bot.app.limit_settings import LimitSettings

CREDENTIALS_FILE = "app-credentials.json"
DEFAULT_GITHUB_API_URL = "https://api.github.com"
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


class Settings(CheckSettings, LimitSettings, CredentialSettings, GitHubSettings):
    """The server's configuration. Each field is the variable BEAM_<FIELD NAME>:

    - APP_ID, PRIVATE_KEY (PEM text; one line with literal \\n accepted) or PRIVATE_KEY_PATH,
      WEBHOOK_SECRET: the App's credentials, all or none. None: setup mode, unless setup mode already
      stored them, in the database (SECRET_KEY set: `CredentialSettings`) or the work directory.
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
    - BEAM_API_KEY (or GFS_BEAM_API_KEY, NVIDIA_API_KEY): only whether a live model is configured.
      MODEL_TOOLS (auto): how tools reach the model, native `tools`, described in the prompt (text),
      or native until the server refuses them (auto); docs/models.md. MODEL_TEMPERATURE (unset: 0.2
      for reviews, the server's own otherwise), read by OpenAiCompatible.from_env like the others.
    - Costs and limits (docs/costs-and-limits.md): PRICE_INPUT_PER_MTOK, PRICE_OUTPUT_PER_MTOK,
      MAX_TOKENS_PER_RUN, MAX_MINUTES_PER_RUN, RUNS_PER_USER_PER_DAY, RUNS_PER_REPO_PER_DAY,
      TOKENS_PER_INSTALLATION_PER_MONTH, MAX_CONCURRENCY_PER_INSTALLATION; 0 turns a limit off.
    - LOG_LEVEL (INFO), LOG_FORMAT (text, or json: one JSON object per line). Checks: `CheckSettings`.
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
    # The seed's precedence (BEAM_API_KEY, then GFS_BEAM_API_KEY, then NVIDIA_API_KEY); the client
    # itself is built by OpenAiCompatible.from_env, this only tells whether a live model is configured.
    llm_api_key: SecretStr | None = Field(
        default=None,
        validation_alias=AliasChoices("BEAM_API_KEY", "GFS_BEAM_API_KEY", "NVIDIA_API_KEY"),
    )
    # Issue 20: validated here so a typo stops the start with a clear message; the client gets it.
    model_tools: Literal["auto", "native", "text"] = "auto"

    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    log_format: Literal["text", "json"] = "text"
    retention_days: float = Field(default=30.0, ge=0)
    prune_interval: float = Field(default=3600.0, gt=0)

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper(cls, value: Any) -> Any:
        return value.strip().upper() if isinstance(value, str) else value

    @field_validator("log_format", "model_tools", mode="before")
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


@dataclass(frozen=True, slots=True)
class AppCredentials:
    """What authenticates the App to GitHub and GitHub to us. Never logged: repr hides the secrets."""

    app_id: int
    private_key: SecretStr
    webhook_secret: SecretStr
    slug: str | None = None
    client_id: str | None = None
    source: str = "env"

    def __repr__(self) -> str:
        return f"AppCredentials(app_id={self.app_id}, slug={self.slug!r}, source={self.source!r})"


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


def load_credentials(settings: Settings) -> AppCredentials | None:
    """The App credentials from the environment, else from the stored file, else None (setup mode).

    Blocking (small file reads): call it at start or through `anyio.to_thread.run_sync`.
    """
    if settings.app_id is not None:
        assert settings.webhook_secret is not None  # the model validator guarantees it
        key = settings.private_key
        if key is None:
            assert settings.private_key_path is not None
            key = _read_key_file(settings.private_key_path)
        return AppCredentials(settings.app_id, key, settings.webhook_secret, source="env")
    return read_credentials_file(settings.credentials_path)


def _read_key_file(path: Path) -> SecretStr:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SettingsError(f"BEAM_PRIVATE_KEY_PATH: cannot read {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise SettingsError(f"BEAM_PRIVATE_KEY_PATH: {path} is not a PEM text file") from None
    try:
        return SecretStr(normalise_pem(text, f"BEAM_PRIVATE_KEY_PATH ({path})"))
    except ValueError as exc:
        raise SettingsError(str(exc)) from None


def read_credentials_file(path: Path) -> AppCredentials | None:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise SettingsError(f"cannot read the stored App credentials {path}: {exc.strerror}") from None
    try:
        data = json.loads(raw)
        creds = AppCredentials(
            app_id=int(data["app_id"]),
            private_key=SecretStr(normalise_pem(str(data["pem"]), f"the key in {path}")),
            webhook_secret=SecretStr(str(data["webhook_secret"])),
            slug=data.get("slug"),
            client_id=data.get("client_id"),
            source="file",
        )
    except (ValueError, KeyError, TypeError):
        raise SettingsError(
            f"the stored App credentials {path} are damaged: delete the file to register again, "
            "or set BEAM_APP_ID, BEAM_PRIVATE_KEY and BEAM_WEBHOOK_SECRET"
        ) from None
    return creds


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


def write_credentials_file(path: Path, creds: AppCredentials) -> None:
    """Writes the file atomically, readable by this user only from its first byte (mode 0600).

    The temporary file is created with 0600 by `os.open`, so the secret is never world-readable, even
    between creation and `chmod`; the rename makes a half-written file impossible.
    """
    ensure_work_dir(path.parent)
    body = json.dumps(
        {
            "app_id": creds.app_id,
            "slug": creds.slug,
            "client_id": creds.client_id,
            "webhook_secret": creds.webhook_secret.get_secret_value(),
            "pem": creds.private_key.get_secret_value(),
        },
        indent=2,
    ).encode()
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        with os.fdopen(fd, "wb") as fh:
            os.fchmod(fh.fileno(), 0o600)  # the umask can only remove bits; this pins the mode exactly
            fh.write(body)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
