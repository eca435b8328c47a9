# FinBot's unsafe variant as an image of its own, so a workflow switches agents by image only.
ARG BASE_IMAGE
FROM ${BASE_IMAGE}
ENV BAD_AGENT=1
