# FinBot (the good agent) with tests/action/meddler.py beside it: the agent's container calls
# the chaos proxy's control API throughout the run, as an injected agent could.
ARG BASE_IMAGE
FROM ${BASE_IMAGE}
COPY meddler.py /app/meddler.py
CMD ["python", "/app/meddler.py"]
