# syntax=docker/dockerfile:1
# The kueue-tas controller image. `docker build .` needs no arguments; `make image` builds this
# same file with buildah (e2e/image.py) and writes an OCI archive. Build arguments:
#   BASE_IMAGE  Debian bookworm (slim): its python3 is 3.11, the Python the locks are made for
#   VERSION     the package version and the image label (make image: the one setuptools-scm
#               derives from the git tag; .git is not in the build context)
#   REVISION    the git commit, for the label
# Behind a TLS-intercepting proxy, give pip its CA bundle as a build secret, mounted only for the
# steps that download and never written to a layer:
#   docker build --secret id=pip-ca,src=/etc/ssl/certs/ca-certificates.crt .
# The base by tag: a release build pins it by digest with the tag beside it,
#   --build-arg BASE_IMAGE=debian:bookworm-slim@sha256:<the digest the registry gives that day>
# (no registry is reachable where this file is kept, so no digest is written here rather than a
# guessed one). `make image` makes the base from Debian's packages instead (e2e/image.py): it is
# fixed by the tarball cached at its first build, not by a digest or a snapshot date.
ARG BASE_IMAGE=debian:bookworm-slim

# Debian's python3 and nothing else: no pip, setuptools, compiler or headers.
FROM ${BASE_IMAGE} AS python
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 \
    && rm -rf /var/lib/apt/lists/* /var/cache/apt/* /var/cache/debconf/*-old /var/log/apt /var/log/dpkg.log

FROM python AS builder
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3-venv \
    && rm -rf /var/lib/apt/lists/*
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore
WORKDIR /src
COPY requirements/build.lock requirements/runtime.lock requirements/
# Two virtualenvs: /build holds the locked build tools (pip, setuptools, setuptools-scm); the
# image's /opt/kueue-tas gets no pip of its own, /build's pip installs into it (--python).
# Wheels only: nothing is compiled, so no compiler is needed here either.
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca; fi \
    && python3 -m venv /build \
    && /build/bin/pip install --require-hashes --only-binary=:all: -r requirements/build.lock \
    && python3 -m venv --without-pip /opt/kueue-tas \
    && /build/bin/pip --python /opt/kueue-tas/bin/python install \
       --require-hashes --only-binary=:all: --no-deps -r requirements/runtime.lock
COPY pyproject.toml README.md ./
COPY kueue_tas ./kueue_tas
ARG VERSION=0.1.0
# Our wheel, built with the locked tools (no build isolation: nothing fetched unhashed).
RUN SETUPTOOLS_SCM_PRETEND_VERSION="${VERSION}" \
    /build/bin/pip wheel --no-deps --no-build-isolation --no-index --wheel-dir /dist . \
    && /build/bin/pip --python /opt/kueue-tas/bin/python install --no-deps --no-index /dist/*.whl

FROM python
ARG VERSION=0.1.0
ARG REVISION=unknown
LABEL org.opencontainers.image.title="kueue-tas" \
      org.opencontainers.image.description="Topology Aware Scheduling for Kueue, as an AdmissionCheck controller" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.licenses="Apache-2.0"
RUN groupadd --system --gid 65532 kueue-tas \
    && useradd --system --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent \
       --shell /usr/sbin/nologin kueue-tas
COPY --from=builder /opt/kueue-tas /opt/kueue-tas
# Bytecode was compiled at install; the root filesystem is read-only in the Deployment anyway.
ENV PATH=/opt/kueue-tas/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
# Numeric, so that Kubernetes' runAsNonRoot can verify it without reading /etc/passwd.
USER 65532:65532
EXPOSE 8080 8081 9443
ENTRYPOINT ["kueue-tas"]
CMD ["run"]
