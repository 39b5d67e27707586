# Multi-stage build of the operator image: `docker build -t dra-operators:0.1.0 .`
# The same image runs every operator: `dra-operators run <name>` (see manifests/).
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md constraints.txt ./
COPY operators ./operators
# The versions the tests passed with (constraints.txt), not whatever is newest today.
RUN python -m venv /opt/dra-operators \
 && /opt/dra-operators/bin/pip install --no-cache-dir --upgrade pip \
 && /opt/dra-operators/bin/pip install --no-cache-dir -c constraints.txt .

FROM python:3.11-slim
# A numeric non-root user, so runAsNonRoot can be verified by the kubelet.
RUN groupadd --gid 65532 operator && useradd --uid 65532 --gid 65532 --no-create-home --shell /usr/sbin/nologin operator
COPY --from=build /opt/dra-operators /opt/dra-operators
ENV PATH=/opt/dra-operators/bin:$PATH PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
USER 65532:65532
EXPOSE 8080 8081
ENTRYPOINT ["dra-operators"]
CMD ["--help"]
