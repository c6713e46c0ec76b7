# The appliance image: the `appliance` CLI with every benchmark's model and preprocessed synthetic
# dataset baked in. ENTRYPOINT is the CLI; with no arguments it runs the embedded default benchmark.
#
#   docker build -t mlperf-appliance --build-arg GIT_COMMIT="$(git rev-parse HEAD)" .
#   docker run --rm -v "$PWD/results:/results" mlperf-appliance
#
# Base: pin it for real use, e.g. FROM debian:bookworm-slim@sha256:<digest> (docs/container.md).
# Targets: image-cpu (the default, last stage) and image-gpu (`--target image-gpu`): the GPU variant
#                    installs requirements-gpu.lock: onnxruntime-gpu, NVIDIA's CUDA 13.0 runtime, cuBLAS,
#                    cuFFT, cuRAND, NVRTC and cuDNN 9 wheels and nvidia-ml-py, so that
#                    `docker run --gpus all IMAGE` needs only the host's NVIDIA driver (580 or newer) and
#                    container toolkit; its default backend is onnxruntime-cuda (APPLIANCE_BACKEND).
# Build arguments:
#   GIT_COMMIT, VERSION  recorded in the OCI labels and in every run's manifest.json (GIT_COMMIT is
#                    also baked into the package, harness/_build_info.py, as the manifest's appliance.commit).
# Build secret (optional): pip_cert, a CA bundle for pip behind a TLS-intercepting proxy; it is
# mounted for the pip steps only and never stored in the image.
#
# Stages: runtime (Python), build (+ compiler and the locks), wheel (the package built once, the locks,
# pip's wheel), venv-cpu (the CPU packages), data (every benchmark prepared with the CPU venv: the same bytes
# for both variants, so a second variant's build takes it from the layer cache), image (runtime + the
# data, the labels, the user), then image-gpu (the image + the GPU venv installed in place) and
# image-cpu (the image + venv-cpu).

FROM debian:bookworm-slim AS runtime
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3=3.11.2-1+b1 \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --no-log-init --uid 10001 --user-group --create-home --home-dir /home/appliance appliance \
 && mkdir -p /results /data /opt/appliance/data \
 && chown appliance:appliance /results /data

FROM runtime AS build
# g++ and the Python headers build the package's two C++ extensions (LoadGen intake, batch copy)
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3-venv=3.11.2-1+b1 \
      python3-dev=3.11.2-1+b1 g++=4:12.2.0-3 \
 && rm -rf /var/lib/apt/lists/*
COPY requirements.lock requirements-gpu.lock /src/
COPY pyproject.toml setup.py README.md /src/
# the package with its data: simulated-card profiles (harness/cards/profiles) and the paper servers'
# card maps (harness/hw/topology/maps); setup.py writes GIT_COMMIT into harness/_build_info.py
COPY harness /src/harness

# The package as a wheel (its C++ extensions compiled once, GIT_COMMIT baked in by setup.py), beside the
# locks and pip's own wheel (Debian's), which runs from the wheel file: neither venv holds pip, and the
# runtime needs no python3-venv.
FROM build AS wheel
ARG GIT_COMMIT=unknown
RUN --mount=type=secret,id=pip_cert \
    if [ -s /run/secrets/pip_cert ]; then export PIP_CERT=/run/secrets/pip_cert; fi \
 && mkdir /opt/wheel \
 && cp /src/requirements.lock /src/requirements-gpu.lock /usr/share/python-wheels/pip-*.whl /opt/wheel/ \
 && pip=$(echo /opt/wheel/pip-*.whl)/pip \
 && GIT_COMMIT="$GIT_COMMIT" python3 "$pip" wheel --no-cache-dir --disable-pip-version-check \
      --no-deps --wheel-dir /opt/wheel /src

FROM wheel AS venv-cpu
RUN --mount=type=secret,id=pip_cert \
    if [ -s /run/secrets/pip_cert ]; then export PIP_CERT=/run/secrets/pip_cert; fi \
 && python3 -m venv --without-pip /opt/venv \
 && export PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore \
 && pip=$(echo /opt/wheel/pip-*.whl)/pip \
 && /opt/venv/bin/python "$pip" install -r /opt/wheel/requirements.lock \
 && /opt/venv/bin/python "$pip" install --no-deps /opt/wheel/mlperf_appliance-*.whl

# Every benchmark's seeded model, synthetic dataset, uint8 shards and golden labels, built
# (and ResNet50's fp16 model, which a GPU card runs without a tuned record: harness.run.gpu_defaults)
# deterministically (fixed seeds) on the CPU. The raw synthetic JPEGs are dropped once preprocessed
# (val_map.txt and the seed marker stay, so `appliance prepare` still sees the data as up to date); the
# baked data belongs to root and is read-only for the user that runs the benchmarks.
FROM runtime AS data
COPY --from=venv-cpu /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH APPLIANCE_DATA_DIR=/opt/appliance/data PYTHONDONTWRITEBYTECODE=1
RUN for benchmark in $(python -c 'from harness.data.benchmarks import NAMES; print(*NAMES)'); do \
      appliance prepare --benchmark "$benchmark" --quiet || exit 1; \
    done \
 && appliance prepare --benchmark resnet50 --precision fp16 --quiet \
 && find /opt/appliance/data -type f \( -iname '*.jpeg' -o -iname '*.jpg' -o -iname '*.png' \) -delete \
 && chmod -R a+rX,go-w /opt/appliance

# The image, less what the variants differ in (the venv, the default backend). Stage names are fixed
# (no `FROM stage-${ARG}`: buildah 1.28, Debian bookworm's, does not resolve those to stages).
FROM runtime AS image
COPY --from=data /opt/appliance/data /opt/appliance/data
ENV PATH=/opt/venv/bin:$PATH \
    APPLIANCE_DATA_DIR=/opt/appliance/data \
    APPLIANCE_RESULTS_DIR=/results \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
ARG VERSION=0.1.0
ARG GIT_COMMIT=unknown
LABEL org.opencontainers.image.title="mlperf-appliance" \
      org.opencontainers.image.description="MLPerf Inference benchmark appliance (LoadGen harness, models and preprocessed data baked in)" \
      org.opencontainers.image.version="$VERSION" \
      org.opencontainers.image.revision="$GIT_COMMIT" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.base.name="docker.io/library/debian:bookworm-slim"
ENV APPLIANCE_IMAGE_VERSION=$VERSION \
    APPLIANCE_IMAGE_REVISION=$GIT_COMMIT
VOLUME ["/results", "/data"]
WORKDIR /home/appliance
USER appliance
ENTRYPOINT ["appliance"]
CMD ["run"]

# The GPU variant (`--target image-gpu`): onnxruntime-gpu with NVIDIA's CUDA and cuDNN wheels, installed
# in place rather than built in a stage and copied: its 3.5 GB would be stored twice and, while the copy is
# committed, written twice more (the build's peak disk use). What it installs from, /opt/wheel (under 3 MB), is
# copied in, not bind-mounted: buildah 1.28 mounts an empty folder for a `from=` bind beside the secret.
FROM image AS image-gpu
USER root
COPY --from=wheel /opt/wheel /opt/wheel
RUN --mount=type=secret,id=pip_cert \
    if [ -s /run/secrets/pip_cert ]; then export PIP_CERT=/run/secrets/pip_cert; fi \
 && python3 -m venv --without-pip /opt/venv \
 && export PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore \
 && pip=$(echo /opt/wheel/pip-*.whl)/pip \
 && /opt/venv/bin/python "$pip" install -r /opt/wheel/requirements-gpu.lock \
 && /opt/venv/bin/python "$pip" install --no-deps /opt/wheel/mlperf_appliance-*.whl \
 && rm -rf /opt/wheel
USER appliance
ENV APPLIANCE_BACKEND=onnxruntime-cuda \
    APPLIANCE_IMAGE_VARIANT=gpu

# The CPU variant: the last stage, what a plain `docker build .` makes
FROM image AS image-cpu
COPY --from=venv-cpu /opt/venv /opt/venv
ENV APPLIANCE_BACKEND=onnxruntime \
    APPLIANCE_IMAGE_VARIANT=cpu
