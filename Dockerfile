# beam-bot: the GitHub App server. Build: docker build -t beam-bot .
# Run:   docker run -p 8080:8080 -v beam-data:/data -e BEAM_PUBLIC_URL=https://bot.example.org beam-bot
# Without App credentials it starts in setup mode: open BEAM_PUBLIC_URL/ to register the App; the
# credentials are then stored in /data/app-credentials.json (mode 0600, owned by the beam user).
# Several processes on PostgreSQL: see compose.yaml.
FROM python:3.11-slim

# git: mirror upkeep uses the git command line where it is much faster than libgit2.
# bubblewrap: the checks jail (docs/checks.md); it also needs setpriv and prlimit (util-linux) and
# bash, which the base image has, and libseccomp2 for its syscall filter. Without them checks are
# off, never unjailed. As USER 10001 below, checks run in an unprivileged user namespace. They also
# need a memory cgroup the bot may write below, which Docker does not give an unprivileged container
# by default: without one checks are off, and /readyz and the approval comments say how to give it
# one (docs/checks.md, "Memory").
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends git bubblewrap libseccomp2 \
    && rm -rf /var/lib/apt/lists/*

RUN groupadd --gid 10001 beam \
    && useradd --create-home --uid 10001 --gid 10001 --shell /usr/sbin/nologin beam \
    && mkdir /data && chown beam:beam /data

WORKDIR /src
# Dependencies first, pinned by the lock file (PostgreSQL driver included), in their own layer:
# a code change rebuilds only the layers below.
COPY requirements.lock ./
RUN pip install --no-cache-dir --no-deps -r requirements.lock
COPY pyproject.toml README.md LICENSE ./
COPY bot ./bot
RUN pip install --no-cache-dir --no-deps . && rm -rf /src

WORKDIR /data
ENV PYTHONUNBUFFERED=1 \
    BEAM_WORK_DIR=/data \
    BEAM_HOST=0.0.0.0 \
    BEAM_PORT=8080
VOLUME ["/data"]
# The beam user, by number so that the runtime need not resolve the name.
USER 10001:10001
EXPOSE 8080
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/healthz', timeout=4)"]
CMD ["beam-bot", "serve"]
