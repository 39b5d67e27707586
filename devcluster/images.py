"""Builds (or reuses) the real node's container images as OCI archives, without a Docker engine.

Three images, each cached under ``cache_root()/images/<name>-<key>/`` (``image.tar`` plus
``build.json``), where the key is a hash of everything the image is made from:

- the base: Debian ``SUITE`` made by ``mmdebstrap`` (python3, venv, useradd, tini). It is also the
  test workload image (``sh``, ``sleep``, ``env``). Key: the package list, the suite and
  ``RECIPE_VERSION``; the Debian mirror is mmdebstrap's default, or ``DEVCLUSTER_APT_MIRROR``
  (any MIRROR argument mmdebstrap takes, for example a sources file of this machine).
- the pause image: ``build/pause/linux/pause.c`` of the k8s.io/kubernetes module the control
  plane is built from, compiled statically with gcc from the Go module cache (nothing of it is
  kept in this repository). Key: the Kubernetes version, the compiler flags, ``RECIPE_VERSION``.
- the operator image: the repository's ``Dockerfile`` built by ``buildah bud`` (chroot
  isolation, host network for PyPI, throwaway storage) on top of the base. Key: the build
  context (Dockerfile, pyproject.toml, requirements/image.txt, README.md, operators/), the base
  image's manifest digest and ``RECIPE_VERSION``. The built image must run
  every operator's modules and ``dra-operators --help`` before it is kept.

Each image is built in a temporary directory renamed into place when complete, under a
per-image file lock, so a partial build is never used. The archives name their image the way
containerd does after ``ctr -n k8s.io images import`` (``<short name>`` is stored as
``docker.io/library/<short name>``, which is how the kubelet and CRI resolve an unqualified image
name); pods use them with ``imagePullPolicy: Never``, nothing is ever pulled.
"""

from __future__ import annotations

import fcntl
import gzip
import hashlib
import json
import os
import platform
import re
import shlex
import shutil
import ssl
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from . import gomod
from .build import BuildError, cache_root, k8s_version, shown
from .constants import REPO_ROOT

Say = Callable[[str], object]

# Bump when a recipe below changes in a way the inputs do not show (flags, layout, config).
RECIPE_VERSION = 1

SUITE = "bookworm"
# What the Dockerfile and the test pods need: python3 + venv (ensurepip), useradd/groupadd
# (passwd), TLS roots for pip (ca-certificates). sh, sleep and env are Essential packages.
# libstdc++6: compiled wheels (google-re2, which cel-python uses) link it; python:3.11-slim has it.
# tini: the operator image's PID 1, which reaps what an Exec action's helper leaves behind.
BASE_PACKAGES = ("ca-certificates", "libstdc++6", "passwd", "python3", "python3-venv", "tini")
BASE_IMAGE = f"dra-operators-base:{SUITE}"
# The tag follows build/pause/Makefile's TAG of the Kubernetes version built here.
PAUSE_TAG = "3.10.2"
PAUSE_IMAGE = f"dra-operators-pause:{PAUSE_TAG}"
OPERATOR_REPOSITORY = "dra-operators"
OPERATOR_TAG = "dev"
OPERATOR_IMAGE = f"{OPERATOR_REPOSITORY}:{OPERATOR_TAG}"
PAUSE_CFLAGS = ("-Os", "-Wall", "-Werror", "-static")
# The name containerd and the kubelet give an unqualified reference ("foo:tag"); an OCI archive
# must carry it in full, or ``ctr import`` stores the image under a generated name.
_CANONICAL_PREFIX = "docker.io/library/"
_UNQUALIFIED = re.compile(r"[a-z0-9]+(?:[._-][a-z0-9]+)*:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
_QUALIFIED = re.compile(
    r"(?:[a-z0-9-]+(?:\.[a-z0-9-]+)+|localhost)(?::[0-9]+)?(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)+:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"
)

# dpkg keeps no documentation but the copyright files (the image's licences).
_DPKG_EXCLUDES = (
    "path-exclude=/usr/share/man/*",
    "path-exclude=/usr/share/info/*",
    "path-exclude=/usr/share/locale/*",
    "path-include=/usr/share/locale/locale.alias",
    "path-exclude=/usr/share/doc/*",
    "path-include=/usr/share/doc/*/copyright",
)
# Merged /usr by directory symlinks (as debootstrap does), so apt needs not pull in usrmerge and
# with it a full perl.
_MERGED_USR_HOOKS = Path("/usr/share/mmdebstrap/hooks/merged-usr")
_PATH_ENV = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

# The operator image's build context: exactly what the Dockerfile COPYs.
CONTEXT_FILES = ("Dockerfile", "pyproject.toml", "requirements/image.txt", "README.md")
CONTEXT_DIRS = ("operators",)
_SKIPPED_DIRS = frozenset({"__pycache__"})
_SKIPPED_SUFFIXES = (".pyc", ".pyo")

KEEP_PER_IMAGE = 3
_OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
_OCI_INDEX = "application/vnd.oci.image.index.v1+json"
_OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
_OCI_LAYER_GZIP = "application/vnd.oci.image.layer.v1.tar+gzip"
_TOOLS_HINT = "apt-get install mmdebstrap buildah uidmap gcc libc6-dev"


class ImageError(BuildError):
    """An image cannot be built, checked or imported."""


@dataclass(frozen=True)
class ImageResult:
    name: str
    ref: str
    archive: Path
    digest: str  # the manifest digest, as containerd will show it
    size: int
    reused: bool
    seconds: float


# -- names and keys (pure) ------------------------------------------------------------------


def canonical_name(ref: str) -> str:
    """The name containerd stores a ``name:tag`` under: an unqualified one in Docker Hub's
    library, one that names its registry (``registry.k8s.io/...``) as it is."""
    if _QUALIFIED.fullmatch(ref):
        return ref
    if not _UNQUALIFIED.fullmatch(ref):
        raise ImageError(f"{ref!r} is not a name:tag")
    return _CANONICAL_PREFIX + ref


def _key(parts: dict[str, Any]) -> str:
    text = json.dumps({"recipe": RECIPE_VERSION, **parts}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def base_key(packages: Sequence[str] = BASE_PACKAGES, suite: str = SUITE, arch: str | None = None) -> str:
    parts: dict[str, Any] = {"image": "base", "suite": suite, "packages": sorted(packages)}
    # The native build's key stays what it was before there were others.
    if _foreign(arch):
        parts["arch"] = arch
    return _key(parts)


def pause_key(kubernetes_version: str, cflags: Sequence[str] = PAUSE_CFLAGS) -> str:
    return _key({"image": "pause", "kubernetes": kubernetes_version, "cflags": list(cflags)})


def context_files(root: Path = REPO_ROOT) -> list[Path]:
    """The operator build context, relative to ``root``, in a stable order."""
    missing = [name for name in (*CONTEXT_FILES, *CONTEXT_DIRS) if not (root / name).exists()]
    if missing:
        raise ImageError(f"{root} lacks {', '.join(missing)} (the operator image's build context)")
    files = [Path(name) for name in CONTEXT_FILES]
    for directory in CONTEXT_DIRS:
        for current, dirs, names in os.walk(root / directory):
            dirs[:] = sorted(d for d in dirs if d not in _SKIPPED_DIRS)
            base = Path(current).relative_to(root)
            files += [base / name for name in sorted(names) if not name.endswith(_SKIPPED_SUFFIXES)]
    return files


def operator_key(base_digest: str, root: Path = REPO_ROOT) -> str:
    digest = hashlib.sha256()
    for relative in context_files(root):
        data = (root / relative).read_bytes()
        digest.update(f"{relative}\0{len(data)}\0".encode() + data)
    return _key({"image": "operator", "base": base_digest, "context": digest.hexdigest()})


# -- OCI layout and archives ----------------------------------------------------------------


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return "sha256:" + digest.hexdigest()


def _goarch() -> str:
    machine = platform.machine()
    return {"x86_64": "amd64", "aarch64": "arm64"}.get(machine, machine)


def _foreign(arch: str | None) -> bool:
    return arch is not None and arch != _goarch()


def _cache_name(image: str, arch: str | None) -> str:
    """Another architecture's images apart from the native ones (each name is pruned alone)."""
    return f"{arch}-{image}" if _foreign(arch) else image


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _blob(layout: Path, path: Path, media_type: str) -> dict[str, Any]:
    """Move ``path`` into the layout's blobs; its descriptor."""
    digest = _sha256_file(path)
    target = layout / "blobs" / "sha256" / digest.removeprefix("sha256:")
    target.parent.mkdir(parents=True, exist_ok=True)
    size = path.stat().st_size
    path.replace(target)
    return {"mediaType": media_type, "digest": digest, "size": size}


def _json_blob(layout: Path, value: dict[str, Any], media_type: str) -> dict[str, Any]:
    scratch = layout / "blob.json.tmp"
    scratch.write_text(json.dumps(value, separators=(",", ":"), sort_keys=True))
    return _blob(layout, scratch, media_type)


def _layer(layout: Path, tar_path: Path) -> tuple[dict[str, Any], str]:
    """Gzip an uncompressed layer tar into the layout; (descriptor, diff_id)."""
    diff_id = _sha256_file(tar_path)
    compressed = layout / "layer.gz.tmp"
    with (
        open(tar_path, "rb") as src,
        open(compressed, "wb") as raw,
        gzip.GzipFile(filename="", mode="wb", compresslevel=6, fileobj=raw, mtime=0) as out,
    ):
        shutil.copyfileobj(src, out, 1 << 20)
    tar_path.unlink()
    return _blob(layout, compressed, _OCI_LAYER_GZIP), diff_id


def write_layout(
    layout: Path,
    ref: str,
    layers: Sequence[Path],
    config: dict[str, Any],
    history: str,
    arch: str | None = None,
) -> str:
    """An OCI image layout of ``layers`` (uncompressed tars, consumed) for ``arch`` (None: this
    machine's); the manifest digest."""
    layout.mkdir(parents=True, exist_ok=True)
    descriptors, diff_ids = [], []
    for tar_path in layers:
        descriptor, diff_id = _layer(layout, tar_path)
        descriptors.append(descriptor)
        diff_ids.append(diff_id)
    created = _now()
    image_config = {
        "created": created,
        "architecture": arch or _goarch(),
        "os": "linux",
        "config": config,
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
        "history": [{"created": created, "created_by": history}],
    }
    manifest = {
        "schemaVersion": 2,
        "mediaType": _OCI_MANIFEST,
        "config": _json_blob(layout, image_config, _OCI_CONFIG),
        "layers": descriptors,
    }
    index = {
        "schemaVersion": 2,
        "mediaType": _OCI_INDEX,
        "manifests": [_json_blob(layout, manifest, _OCI_MANIFEST)],
    }
    (layout / "index.json").write_text(json.dumps(index))
    (layout / "oci-layout").write_text(json.dumps({"imageLayoutVersion": "1.0.0"}))
    return name_layout(layout, ref)


def name_layout(layout: Path, ref: str) -> str:
    """Annotate the layout's one manifest with ``ref`` as containerd and OCI tools read it."""
    index = json.loads((layout / "index.json").read_text())
    manifests = index.get("manifests") or []
    if len(manifests) != 1:
        raise ImageError(f"{layout}/index.json lists {len(manifests)} manifests, expected 1")
    manifests[0]["annotations"] = {
        "io.containerd.image.name": canonical_name(ref),
        "org.opencontainers.image.ref.name": ref.rpartition(":")[2],
    }
    (layout / "index.json").write_text(json.dumps(index))
    return str(manifests[0]["digest"])


def pack_layout(layout: Path, archive: Path) -> None:
    """An OCI archive (a tar of the layout, as ``oci-archive:`` and ``ctr import`` read it)."""

    def clean(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        info.mtime = 0
        return info

    names = ["oci-layout", "index.json", "blobs", "blobs/sha256"]
    names += sorted(f"blobs/sha256/{p.name}" for p in (layout / "blobs" / "sha256").iterdir())
    with tarfile.open(archive, "w", format=tarfile.PAX_FORMAT) as tar:
        for name in names:
            tar.add(layout / name, arcname=name, recursive=False, filter=clean)


def archive_index(archive: Path) -> tuple[str, str]:
    """(containerd name, manifest digest) of an archive written here."""
    try:
        with tarfile.open(archive) as tar:
            member = tar.extractfile("index.json")
            if member is None:
                raise KeyError("index.json")
            index = json.loads(member.read())
    except (OSError, KeyError, tarfile.TarError, ValueError) as err:
        raise ImageError(f"{archive} is not an OCI archive with an index.json: {err}") from err
    manifests = index.get("manifests") or [{}]
    name = manifests[0].get("annotations", {}).get("io.containerd.image.name", "")
    digest = manifests[0].get("digest", "")
    if len(manifests) != 1 or not name or not digest:
        raise ImageError(f"{archive}: expected one manifest named by io.containerd.image.name")
    return str(name), str(digest)


# -- the cache ------------------------------------------------------------------------------


SELF_CHECK = (
    "from operators import OPERATOR_NAMES\n"
    "from operators.cli import load_definition, main\n"
    "for name in OPERATOR_NAMES:\n"
    "    load_definition(name)\n"
    "main(['--help'])\n"
)


def images_root() -> Path:
    return cache_root() / "images"


def _tail(text: str, lines: int = 40) -> str:
    return "\n".join(text.splitlines()[-lines:])


def _timeout() -> float:
    return float(os.environ.get("DEVCLUSTER_BUILD_TIMEOUT", "2700"))


def _run(
    cmd: Sequence[str],
    what: str,
    *,
    timeout: float,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    try:
        proc = subprocess.run(
            list(cmd), cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
        )
    except FileNotFoundError as err:
        raise ImageError(f"{what}: {cmd[0]} not found ({_TOOLS_HINT})") from err
    except subprocess.TimeoutExpired as err:
        raise ImageError(f"{what} exceeded {timeout:.0f}s: {shlex.join(cmd)}") from err
    if proc.returncode != 0:
        raise ImageError(
            f"{what} failed (exit {proc.returncode}): {shlex.join(cmd)}\n{_tail(proc.stdout + proc.stderr)}"
        )
    return proc


def _require(*tools: str) -> None:
    missing = [tool for tool in tools if shutil.which(tool) is None]
    if missing:
        raise ImageError(f"{', '.join(missing)} not found on PATH ({_TOOLS_HINT})")


def _record(directory: Path) -> dict[str, Any] | None:
    """The build record of a complete cache entry, or None."""
    try:
        info: dict[str, Any] = json.loads((directory / "build.json").read_text())
    except (OSError, ValueError):
        return None
    return info if (directory / "image.tar").is_file() and info.get("digest") else None


def _result(name: str, directory: Path, info: dict[str, Any], reused: bool) -> ImageResult:
    return ImageResult(
        name=name,
        ref=str(info["ref"]),
        archive=directory / "image.tar",
        digest=str(info["digest"]),
        size=(directory / "image.tar").stat().st_size,
        reused=reused,
        seconds=0.0 if reused else float(info["build_seconds"]),
    )


@contextmanager
def _locked(name: str) -> Iterator[None]:
    root = images_root()
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _cached(
    name: str,
    key: str,
    ref: str,
    build: Callable[[Path], tuple[str, dict[str, Any]]],
    say: Say,
) -> ImageResult:
    """Reuse ``<name>-<key>`` or run ``build(tmp)`` (which writes tmp/image.tar, returns the
    manifest digest and extra build-record fields) and rename it into place."""
    target = images_root() / f"{name}-{key}"
    info = _record(target)
    if info is not None:
        say(f"reusing {name} image {shown(target / 'image.tar')}")
        return _result(name, target, info, reused=True)
    with _locked(name):
        info = _record(target)
        if info is not None:
            say(f"reusing {name} image {shown(target / 'image.tar')}")
            return _result(name, target, info, reused=True)
        tmp = target.with_name(f"{target.name}.tmp-{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        started = time.monotonic()
        try:
            digest, extra = build(tmp)
            info = {
                "ref": ref,
                "name": canonical_name(ref),
                "digest": digest,
                "key": key,
                "recipe_version": RECIPE_VERSION,
                "build_seconds": round(time.monotonic() - started, 1),
                "built_at": _now(),
                "size": (tmp / "image.tar").stat().st_size,
                **extra,
            }
            (tmp / "build.json").write_text(json.dumps(info, indent=2) + "\n")
            for entry in list(tmp.iterdir()):
                if entry.name not in ("image.tar", "build.json"):
                    _remove(entry)
            shutil.rmtree(target, ignore_errors=True)
            tmp.rename(target)
        finally:
            _remove(tmp)
        _prune(name, keep=target)
    result = _result(name, target, info, reused=False)
    say(f"built {name} image {shown(result.archive)} in {result.seconds:.0f} s ({result.size / 1e6:.0f} MB)")
    return result


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    elif path.exists() or path.is_symlink():
        path.unlink()


def _prune(name: str, keep: Path) -> None:
    """Keep the KEEP_PER_IMAGE newest complete entries of ``name`` (an edit to operators/ makes a
    new operator image each time)."""
    entries = [
        entry
        for entry in images_root().glob(f"{name}-*")
        if entry.is_dir() and ".tmp-" not in entry.name and entry != keep
    ]
    entries.sort(key=lambda entry: entry.stat().st_mtime, reverse=True)
    for entry in entries[KEEP_PER_IMAGE - 1 :]:
        shutil.rmtree(entry, ignore_errors=True)


# -- the base image -------------------------------------------------------------------------


def _mmdebstrap_command(rootfs_tar: Path, arch: str | None = None) -> list[str]:
    cmd = ["mmdebstrap", "--variant=essential", f"--include={','.join(BASE_PACKAGES)}", "--format=tar"]
    if _foreign(arch):
        cmd.append(f"--arch={arch}")
    if _MERGED_USR_HOOKS.is_dir():
        cmd.append(f"--hook-dir={_MERGED_USR_HOOKS}")
    cmd += [f"--dpkgopt={option}" for option in _DPKG_EXCLUDES]
    cmd += [SUITE, str(rootfs_tar)]
    cmd += shlex.split(os.environ.get("DEVCLUSTER_APT_MIRROR", ""))
    return cmd


def _without_device_nodes(src: Path, dst: Path) -> None:
    """The rootfs tar without /dev's contents: the runtime provides /dev."""
    with tarfile.open(src, "r|") as tar_in, tarfile.open(dst, "w|", format=tarfile.PAX_FORMAT) as tar_out:
        for member in tar_in:
            name = member.name.removeprefix("./")
            if name.startswith("dev/") and name != "dev/":
                continue
            tar_out.addfile(member, tar_in.extractfile(member) if member.isreg() else None)


def _build_base(tmp: Path, say: Say, arch: str | None = None) -> tuple[str, dict[str, Any]]:
    _require("mmdebstrap")
    if os.geteuid() != 0:
        raise ImageError("the base image is built as root (mmdebstrap's root mode, then buildah)")
    ensure_emulation(arch)
    rootfs = tmp / "rootfs.tar"
    cmd = _mmdebstrap_command(rootfs, arch)
    say(f"building the {arch or _goarch()} base image: {shlex.join(cmd[:3])} ... {SUITE} (a few minutes)")
    _run(cmd, "mmdebstrap", timeout=_timeout(), cwd=tmp)
    layer = tmp / "layer.tar"
    _without_device_nodes(rootfs, layer)
    rootfs.unlink()
    with tarfile.open(layer) as tar:
        names = {member.name.removeprefix("./") for member in tar}
    # A tar member's path may resolve through the merged-/usr symlinks (bin -> usr/bin).
    for needed in (
        "usr/bin/sh",
        "usr/bin/sleep",
        "usr/bin/env",
        "usr/bin/python3",
        "usr/sbin/useradd",
        "usr/bin/tini",
    ):
        if needed not in names:
            raise ImageError(f"the base image lacks /{needed}")
    digest = write_layout(
        tmp / "layout",
        BASE_IMAGE,
        [layer],
        {"Env": [_PATH_ENV], "Cmd": ["bash"]},
        f"mmdebstrap --variant=essential --include={','.join(BASE_PACKAGES)} {SUITE}",
        arch,
    )
    pack_layout(tmp / "layout", tmp / "image.tar")
    return digest, {"suite": SUITE, "packages": list(BASE_PACKAGES), "arch": arch or _goarch()}


def ensure_base(say: Say = print, arch: str | None = None) -> ImageResult:
    """The base image for ``arch`` (None: this machine's architecture)."""
    return _cached(
        _cache_name("base", arch),
        base_key(arch=arch),
        BASE_IMAGE,
        lambda tmp: _build_base(tmp, say, arch),
        say,
    )


def base_image(say: Say = print) -> Path:
    """The base (and test workload) image's OCI archive, built once."""
    return ensure_base(say).archive


# -- the pause image ------------------------------------------------------------------------


def _go_env_var(name: str) -> str:
    return _run(["go", "env", name], f"go env {name}", timeout=60, env=gomod.go_env()).stdout.strip()


def kubernetes_source(version: str, tmp: Path) -> Path:
    """The k8s.io/kubernetes module's directory in the Go module cache (downloaded if missing)."""
    _require("go")
    directory = Path(_go_env_var("GOMODCACHE")) / f"k8s.io/kubernetes@{version}"
    if not (directory / "build" / "pause").is_dir():
        proc = _run(
            ["go", "mod", "download", "-json", f"k8s.io/kubernetes@{version}"],
            "go mod download",
            timeout=_timeout(),
            cwd=tmp,
            env=gomod.go_env(),
        )
        directory = Path(json.loads(proc.stdout).get("Dir") or directory)
    if not (directory / "build" / "pause" / "linux" / "pause.c").is_file():
        raise ImageError(f"{directory} has no build/pause/linux/pause.c")
    return directory


def upstream_pause_tag(makefile: str) -> str | None:
    match = re.search(r"^TAG\s*\?=\s*(\S+)", makefile, re.MULTILINE)
    return match.group(1) if match else None


def _build_pause(tmp: Path, version: str, say: Say) -> tuple[str, dict[str, Any]]:
    _require("gcc", "strip")
    source = kubernetes_source(version, tmp) / "build" / "pause"
    upstream_tag = upstream_pause_tag((source / "Makefile").read_text())
    if upstream_tag != PAUSE_TAG:
        say(f"note: k8s.io/kubernetes {version} tags pause {upstream_tag}, PAUSE_TAG is {PAUSE_TAG}")
    binary = tmp / "pause"
    defines = [f"-DVERSION=v{PAUSE_TAG}-{version}"]
    pause_c = source / "linux" / "pause.c"
    say(f"building the pause image from k8s.io/kubernetes@{version}/build/pause/linux/pause.c")
    _run(["gcc", *PAUSE_CFLAGS, *defines, "-o", str(binary), str(pause_c)], "gcc", timeout=600)
    _run(["strip", str(binary)], "strip", timeout=60)
    out = _run([str(binary), "-v"], "pause -v", timeout=10).stdout
    if f"v{PAUSE_TAG}" not in out:
        raise ImageError(f"pause -v reports {out.strip()!r}")
    layer = tmp / "layer.tar"
    with tarfile.open(layer, "w", format=tarfile.PAX_FORMAT) as tar:
        info = tar.gettarinfo(binary, arcname="pause")
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        info.mode, info.mtime = 0o755, 0
        with open(binary, "rb") as handle:
            tar.addfile(info, handle)
    digest = write_layout(
        tmp / "layout",
        PAUSE_IMAGE,
        [layer],
        {"Entrypoint": ["/pause"], "User": "65535:65535"},
        shlex.join(
            ["gcc", *PAUSE_CFLAGS, *defines, f"k8s.io/kubernetes@{version}/build/pause/linux/pause.c"]
        ),
    )
    pack_layout(tmp / "layout", tmp / "image.tar")
    gcc = _run(["gcc", "--version"], "gcc --version", timeout=60).stdout.splitlines()[0]
    return digest, {"kubernetes": version, "pause_version": out.strip(), "gcc": gcc}


def ensure_pause(say: Say = print) -> ImageResult:
    version = k8s_version()
    return _cached("pause", pause_key(version), PAUSE_IMAGE, lambda tmp: _build_pause(tmp, version, say), say)


def pause_image(say: Say = print) -> Path:
    """The pause (sandbox) image's OCI archive; containerd's config names it PAUSE_IMAGE."""
    return ensure_pause(say).archive


# -- the operator image ---------------------------------------------------------------------

_POLICY = {"default": [{"type": "insecureAcceptAnything"}]}
# Where Debian's ca-certificates (and pip, through OpenSSL) keep the trusted roots.
_IMAGE_CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"


def host_ca_bundle() -> Path | None:
    """The roots this machine trusts (SSL_CERT_FILE, else OpenSSL's default file).

    The build's RUN steps see them in place of the image's own, so pip reaches PyPI through
    a TLS-inspecting proxy that the machine trusts; the image keeps Debian's roots.
    """
    explicit = os.environ.get("DEVCLUSTER_CA_BUNDLE")
    cafile = explicit or ssl.get_default_verify_paths().cafile
    if not cafile:
        return None
    path = Path(cafile).resolve()
    if not path.is_file():
        if explicit:
            raise ImageError(f"DEVCLUSTER_CA_BUNDLE={explicit} is not a file")
        return None
    return path


def _stage_context(destination: Path, root: Path = REPO_ROOT) -> None:
    for relative in context_files(root):
        (destination / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / relative, destination / relative)


def _build_operator(
    tmp: Path, base: ImageResult, say: Say, arch: str | None = None
) -> tuple[str, dict[str, Any]]:
    _require("buildah")
    if os.geteuid() != 0:
        raise ImageError("the operator image is built as root (buildah with chroot isolation)")
    ensure_emulation(arch)
    # Another architecture's RUN steps (and the self-check below) run under qemu-user-static.
    foreign = ["--platform", f"linux/{arch}"] if _foreign(arch) else []
    context = tmp / "context"
    _stage_context(context)
    policy = tmp / "policy.json"
    policy.write_text(json.dumps(_POLICY))
    # Throwaway storage: nothing lands in the machine's /var/lib/containers.
    buildah = [
        "buildah",
        "--root",
        str(tmp / "storage"),
        "--runroot",
        str(tmp / "run"),
        "--storage-driver",
        "vfs",
    ]
    env = {**os.environ, "BUILDAH_ISOLATION": "chroot", "TMPDIR": str(tmp)}
    local_ref = OPERATOR_IMAGE  # buildah stores it as localhost/<name>
    ca_bundle = host_ca_bundle()
    volumes = ["--volume", f"{ca_bundle}:{_IMAGE_CA_BUNDLE}:ro"] if ca_bundle else []
    bud = [
        *buildah,
        "bud",
        "--isolation",
        "chroot",
        "--network",
        "host",
        "--signature-policy",
        str(policy),
        "--format",
        "oci",
        *foreign,
        "--build-arg",
        f"BASE=oci-archive:{base.archive}",
        *volumes,
        "--tag",
        local_ref,
        "--file",
        str(context / "Dockerfile"),
        str(context),
    ]
    say(
        f"building the {arch or _goarch()} operator image with buildah from the Dockerfile "
        "(pip needs PyPI; a few minutes)"
    )
    _run(bud, "buildah bud", timeout=_timeout(), env=env)
    created = _run(
        [*buildah, "from", "--signature-policy", str(policy), "--pull-never", *foreign, local_ref],
        "buildah from",
        timeout=600,
        env=env,
    )
    container = created.stdout.strip().splitlines()[-1]
    # Every operator's modules imported, as `run <name>` does: a missing shared library of a
    # compiled wheel fails here, not as a crash-looping pod.
    check = ["/opt/dra-operators/bin/python", "-c", SELF_CHECK]
    out = _run(
        [*buildah, "run", "--isolation", "chroot", "--user", "65532:65532", container, "--", *check],
        "the operator image's self-check (every operator's modules import)",
        timeout=600,
        env=env,
    ).stdout
    if "usage" not in out.lower():
        raise ImageError(f"dra-operators --help printed no usage: {_tail(out, 10)}")
    _run([*buildah, "rm", container], "buildah rm", timeout=600, env=env)
    layout = tmp / "layout"
    _run(
        [*buildah, "push", "--signature-policy", str(policy), local_ref, f"oci:{layout}:{OPERATOR_IMAGE}"],
        "buildah push",
        timeout=_timeout(),
        env=env,
    )
    digest = name_layout(layout, OPERATOR_IMAGE)
    pack_layout(layout, tmp / "image.tar")
    version = _run(["buildah", "--version"], "buildah --version", timeout=60).stdout.strip()
    return digest, {"base_digest": base.digest, "buildah": version}


def ensure_operator(say: Say = print, arch: str | None = None) -> ImageResult:
    """The operator image for ``arch`` (None: this machine's architecture)."""
    base = ensure_base(say, arch)
    key = operator_key(base.digest)
    return _cached(
        _cache_name("operator", arch),
        key,
        OPERATOR_IMAGE,
        lambda tmp: _build_operator(tmp, base, say, arch),
        say,
    )


def operator_image(say: Say = print) -> Path:
    """The operator image's OCI archive, built from the repository's Dockerfile."""
    return ensure_operator(say).archive


# -- other architectures --------------------------------------------------------------------

# What a release publishes, as one image index.
RELEASE_ARCHITECTURES = ("amd64", "arm64")
_BINFMT = Path("/proc/sys/fs/binfmt_misc")
_BINFMT_RULES = Path("/usr/lib/binfmt.d")
_QEMU_NAMES = {"amd64": "x86_64", "arm64": "aarch64"}


def ensure_emulation(arch: str | None) -> None:
    """Another architecture's programs run here under qemu-user-static, through binfmt_misc:
    mounted and its rule registered (Debian's qemu-user-static ships the rule with the F flag, so
    the interpreter works inside mmdebstrap's and buildah's chroots too) when missing."""
    if not _foreign(arch):
        return
    assert arch is not None
    name = f"qemu-{_QEMU_NAMES.get(arch, arch)}"
    entry = _BINFMT / name
    if entry.is_file() and entry.read_text().startswith("enabled"):
        return
    rule = _BINFMT_RULES / f"{name}.conf"
    if not rule.is_file():
        raise ImageError(f"building for {arch} needs qemu-user-static: apt-get install qemu-user-static")
    if os.geteuid() != 0:
        raise ImageError(f"{entry} is not enabled, and only root may register it")
    if not (_BINFMT / "register").exists():
        _run(["mount", "-t", "binfmt_misc", "binfmt_misc", str(_BINFMT)], "mount binfmt_misc", timeout=30)
    if entry.exists():
        entry.write_text("1")
    else:
        (_BINFMT / "register").write_text(rule.read_text().strip())


def index_archive(archives: dict[str, Path], ref: str, target: Path) -> str:
    """One OCI archive of the images in ``archives`` (architecture -> single-image archive) as one
    image index named ``ref``, each manifest with its platform; the index's digest."""
    with tempfile.TemporaryDirectory(prefix="dra-index-") as tmp:
        layout = Path(tmp) / "layout"
        entries = []
        for arch, archive in sorted(archives.items()):
            with tarfile.open(archive) as tar:
                tar.extractall(layout, filter="data")
            (descriptor,) = json.loads((layout / "index.json").read_text())["manifests"]
            entries.append(
                {
                    "mediaType": descriptor["mediaType"],
                    "digest": descriptor["digest"],
                    "size": descriptor["size"],
                    "platform": {"architecture": arch, "os": "linux"},
                }
            )
        index = {"schemaVersion": 2, "mediaType": _OCI_INDEX, "manifests": entries}
        top = {
            "schemaVersion": 2,
            "mediaType": _OCI_INDEX,
            "manifests": [_json_blob(layout, index, _OCI_INDEX)],
        }
        (layout / "index.json").write_text(json.dumps(top))
        digest = name_layout(layout, ref)
        pack_layout(layout, target)
    return digest


# -- images derived from another ------------------------------------------------------------


def derived_key(base_digest: str, ref: str, files: dict[str, Path]) -> str:
    return _key(
        {
            "image": "derived",
            "base": base_digest,
            "ref": ref,
            "files": {name: _sha256_file(path) for name, path in sorted(files.items())},
        }
    )


def _build_derived(
    tmp: Path, base: ImageResult, ref: str, files: dict[str, Path]
) -> tuple[str, dict[str, Any]]:
    """The base's layers under another name, with ``files`` (path in the image -> file here,
    executable) as one more layer."""
    layout = tmp / "layout"
    with tarfile.open(base.archive) as tar:
        tar.extractall(layout, filter="data")
    index = json.loads((layout / "index.json").read_text())

    def read_blob(descriptor: dict[str, Any]) -> dict[str, Any]:
        blob = layout / "blobs" / "sha256" / str(descriptor["digest"]).removeprefix("sha256:")
        loaded: dict[str, Any] = json.loads(blob.read_text())
        return loaded

    manifest = read_blob(index["manifests"][0])
    if files:
        layer = tmp / "layer.tar"
        with tarfile.open(layer, "w", format=tarfile.PAX_FORMAT) as tar:
            for name, path in sorted(files.items()):
                info = tar.gettarinfo(path, arcname=name.lstrip("/"))
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                info.mode, info.mtime = 0o755, 0
                with open(path, "rb") as handle:
                    tar.addfile(info, handle)
        descriptor, diff_id = _layer(layout, layer)
        config = read_blob(manifest["config"])
        config["rootfs"]["diff_ids"].append(diff_id)
        config.setdefault("history", []).append(
            {"created": _now(), "created_by": f"add {' '.join(sorted(files))}"}
        )
        manifest["config"] = _json_blob(layout, config, _OCI_CONFIG)
        manifest["layers"].append(descriptor)
    index["manifests"] = [_json_blob(layout, manifest, _OCI_MANIFEST)]
    (layout / "index.json").write_text(json.dumps(index))
    digest = name_layout(layout, ref)
    pack_layout(layout, tmp / "image.tar")
    return digest, {"base": base.digest, "files": sorted(files)}


def ensure_derived(
    name: str, ref: str, base: ImageResult, files: dict[str, Path] | None = None, say: Say = print
) -> ImageResult:
    """An image named ``ref`` made of ``base`` and, if given, a layer of ``files``."""
    extra = dict(files or {})
    key = derived_key(base.digest, ref, extra)
    return _cached(name, key, ref, lambda tmp: _build_derived(tmp, base, ref, extra), say)


# -- containerd -----------------------------------------------------------------------------


def image_digests(ctr: Path, address: str) -> dict[str, str]:
    """containerd's images in the ``k8s.io`` namespace: name -> manifest (or index) digest."""
    out = _run(
        [str(ctr), "--address", address, "-n", "k8s.io", "images", "ls"], "ctr images ls", timeout=120
    ).stdout
    digests = {}
    for line in out.splitlines()[1:]:
        fields = line.split()
        if len(fields) >= 3 and fields[2].startswith("sha256:"):
            digests[fields[0]] = fields[2]
    return digests


def import_images(ctr: Path, address: str, archives: Sequence[Path], say: Say = print) -> None:
    """Import each archive into containerd's ``k8s.io`` namespace, unless already there."""
    present = image_digests(ctr, address)
    for archive in archives:
        name, digest = archive_index(archive)
        if present.get(name) == digest:
            say(f"{name} is already in containerd ({digest[:19]})")
            continue
        say(f"importing {name} from {shown(archive)}")
        _run(
            [str(ctr), "--address", address, "-n", "k8s.io", "images", "import", str(archive)],
            f"ctr images import {archive.name}",
            timeout=600,
        )
        present = image_digests(ctr, address)
        if present.get(name) != digest:
            raise ImageError(
                f"after importing {archive}, containerd has {name} at {present.get(name)}, expected {digest}"
            )


def main_images(say: Say = print) -> int:
    """``python -m devcluster images``: build or reuse all three images; print where they are."""
    results = []
    for ensure in (ensure_base, ensure_pause, ensure_operator):
        started = time.monotonic()
        result = ensure(say)
        results.append((result, time.monotonic() - started))
    width = max(len(canonical_name(result.ref)) for result, _ in results)
    for result, seconds in results:
        how = "reused" if result.reused else f"built in {result.seconds:.0f} s"
        size = f"{result.size / 1e6:6.1f} MB"
        say(f"{result.name:9} {canonical_name(result.ref):{width}}  {size}  {how} ({seconds:.1f} s)")
        say(f"{'':9} {result.archive}")
    return 0
