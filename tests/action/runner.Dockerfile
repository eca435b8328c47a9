# The runner's job image for act (-P ubuntu-latest=...): the base image plus curl, which the
# README's agent service health check runs (tests/test_action_runner.py builds FinBot on it too).
ARG BASE_IMAGE
FROM ${BASE_IMAGE}
RUN apt-get update -qq \
    && apt-get install -y -qq --no-install-recommends curl >/dev/null \
    && rm -rf /var/lib/apt/lists/*
