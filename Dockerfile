# Multi-stage build of the operator image: `docker build -t dra-operators:0.1.0 .`
# The same image runs every operator: `dra-operators run <name>` (see manifests/).
# BASE: any Debian-based image with python3 (>= 3.11, with venv), libstdc++6 (for compiled
# wheels) and useradd. The e2e cluster's real node passes one built without a registry
# (devcluster/images.py).
ARG BASE=python:3.11-slim
FROM ${BASE} AS build
WORKDIR /src
COPY pyproject.toml README.md requirements/image.txt ./
COPY operators ./operators
# Exactly the files requirements/image.txt names, each checked against its hash: the versions the
# tests passed with (constraints.txt), with pip and the build backend (setuptools) pinned too.
# The project itself is built by that setuptools, with nothing fetched for it; pip check fails the
# build if the lock misses a dependency.
RUN python3 -m venv /opt/dra-operators \
 && /opt/dra-operators/bin/pip install --no-cache-dir --require-hashes --no-deps -r image.txt \
 && /opt/dra-operators/bin/pip install --no-cache-dir --no-deps --no-build-isolation --no-index . \
 && /opt/dra-operators/bin/pip check

FROM ${BASE}
# A numeric non-root user, so runAsNonRoot can be verified by the kubelet. Not named `operator`:
# Debian's base-passwd already has that group (gid 37). tini is PID 1: Python would not reap the
# orphans an Exec action's helper leaves behind (the e2e base image has it already).
RUN groupadd --gid 65532 dra-operators \
 && useradd --uid 65532 --gid 65532 --no-create-home --shell /usr/sbin/nologin dra-operators \
 && { command -v tini >/dev/null || { apt-get update && apt-get install -y --no-install-recommends tini \
      && rm -rf /var/lib/apt/lists/*; }; }
COPY --from=build /opt/dra-operators /opt/dra-operators
ENV PATH=/opt/dra-operators/bin:$PATH PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
USER 65532:65532
EXPOSE 8080 8081
ENTRYPOINT ["tini", "--", "dra-operators"]
CMD ["--help"]
