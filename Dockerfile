# The flakestorm image: the GitHub Action (default) and, with FLAKESTORM_MODE=proxy, the chaos
# proxy as a workflow service container (see docs/action.md).
#
#   docker build -t flakestorm .
#   docker build --build-arg BASE_IMAGE=my-mirror/python:3.12-slim -t flakestorm .
#
# GitHub runs container actions as root with --workdir /github/workspace (the repository), so
# this image sets neither USER nor WORKDIR, and its ENTRYPOINT is absolute and exec-form.
ARG BASE_IMAGE=python:3.12-slim
FROM ${BASE_IMAGE}

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore

# Runtime dependencies first (exact pins, wheels only): this layer survives code changes.
COPY requirements/docker.txt /tmp/flakestorm/requirements.txt
RUN python -m venv /opt/flakestorm \
    && /opt/flakestorm/bin/pip install --only-binary=:all: -r /tmp/flakestorm/requirements.txt

# The package itself, without dependencies (they are all pinned above).
COPY pyproject.toml README.md LICENSE /tmp/flakestorm/
COPY flakestorm /tmp/flakestorm/flakestorm
# (the HTML report's template compiled once, as pip compiles the modules)
RUN /opt/flakestorm/bin/pip install --no-deps /tmp/flakestorm \
    && rm -rf /tmp/flakestorm \
    && /opt/flakestorm/bin/python -c \
        "from flakestorm.reporters.html import compile_template; compile_template()"
COPY entrypoint.py /opt/flakestorm/entrypoint.py

# No health check by default (the action needs none). As the proxy service, add one in the
# workflow: options: --health-cmd "/opt/flakestorm/bin/python -m flakestorm.chaos.proxy --health"
HEALTHCHECK NONE

ENTRYPOINT ["/opt/flakestorm/bin/python", "/opt/flakestorm/entrypoint.py"]
