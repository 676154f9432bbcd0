# The rein worker image: rein, the repository's agents (examples/) and worker.py.
#   docker build -t rein-worker .
#   docker run --rm -e TEMPORAL_ADDRESS=host:7233 -e OPENAI_API_KEY rein-worker
# API keys come from the container's environment at run time; none is baked into the image.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

RUN useradd --create-home --uid 10001 --user-group rein

WORKDIR /app
COPY . /app
RUN pip install .

# The code stays root-owned and read-only for the worker's user.
USER rein

# worker.py and examples/ load from /app (the working directory); rein itself is installed.
CMD ["python", "worker.py", "--agent", "rein.examples.calculator:agent"]
