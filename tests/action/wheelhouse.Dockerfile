# `python:3.12-slim` for act's build of the action's Dockerfile, which act runs with no build
# args on a network with no route out: the base image with the action's pinned wheels (and the
# build backend) in /wheels, and a pip.conf that installs from there only.
ARG BASE_IMAGE
FROM ${BASE_IMAGE}
COPY docker.txt /tmp/requirements.txt
RUN pip download --quiet --only-binary=:all: -d /wheels -r /tmp/requirements.txt \
        "setuptools>=77" wheel \
    && printf '[global]\nno-index = true\nfind-links = /wheels\n' > /etc/pip.conf
