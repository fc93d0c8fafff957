# syntax=docker/dockerfile:1
# kueue-tas controller image: `docker build -t ghcr.io/kueue-tas/kueue-tas:<tag> .`

FROM python:3.12-slim AS builder
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY kueue_tas ./kueue_tas
# Only our wheel; its dependencies are resolved from the index in the runtime stage.
RUN pip wheel --no-deps --wheel-dir /dist .

FROM python:3.12-slim
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
# The wheel is bind-mounted, not copied, so it leaves no layer behind.
RUN --mount=type=bind,from=builder,source=/dist,target=/dist \
    pip install /dist/*.whl \
    && groupadd --system --gid 65532 kueue-tas \
    && useradd --system --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent \
       --shell /usr/sbin/nologin kueue-tas
# Numeric, so that Kubernetes' runAsNonRoot can verify it without reading /etc/passwd.
USER 65532:65532
EXPOSE 8080 8081
ENTRYPOINT ["kueue-tas"]
CMD ["run"]
