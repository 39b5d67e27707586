"""Builds (or reuses) the control-plane binaries into a cache outside the repository.

The cache key is the Kubernetes version plus a hash of go.sum; inside the key directory,
``build.json`` records an ``inputs_sha256`` over go.mod, go.sum, every file under ``cmd/``, the
build flags and ``go version``. A complete directory with matching inputs is reused without
touching Go at all. Builds go to a temporary directory that is renamed into place only after
the versions are verified, so a partial build is never used.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from . import gomod
from .constants import BINARIES, CONTROLPLANE_DIR, SERVER_BINARIES


class BuildError(RuntimeError):
    pass


GO_MISSING = (
    "Go toolchain not found. The e2e tier builds kube-apiserver, kube-scheduler, kube-controller-manager, "
    "kubectl and etcd {version} from Go modules and needs Go >= 1.26 on PATH. Alternatives: "
    "DEVCLUSTER_BIN_DIR with v1.37 binaries, or --kubeconfig for an existing cluster. Unit tests only: "
    "make test-unit."
)
MIN_GO = (1, 26)
BUILD_FLAGS = ("-trimpath", "-pgo=off", "-buildvcs=false")


def shown(path: Path) -> str:
    """A path as people write it: under the home directory as ``~/...``."""
    home = str(Path.home())
    text = str(path)
    return "~" + text[len(home) :] if text == home or text.startswith(home + "/") else text


def cache_root() -> Path:
    explicit = os.environ.get("DEVCLUSTER_CACHE_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "dra-operators"


VERSIONS_DIR = gomod.CONTROLPLANE.versions_dir
# Built once, by the newest version's module, and copied into every other version's directory: it
# reports device health through the 1.37 kubelet plugin library, and any kubelet that lacks that
# service simply does not call it.
VERSION_INDEPENDENT = tuple(Path(source).name for source in gomod.CONTROLPLANE.newest_only)


@dataclass(frozen=True)
class ControlPlaneModule:
    """One Kubernetes version's wrapper module: ``go.mod`` for the newest (which upstream's DRA suite
    shares), ``versions/<version>.mod`` and ``.sum`` beside it for each older one, built from the
    same ``cmd/`` with ``go build -modfile``."""

    modfile: Path

    @property
    def sumfile(self) -> Path:
        return self.modfile.with_suffix(".sum")

    @property
    def newest(self) -> bool:
        return self.modfile == CONTROLPLANE_DIR / "go.mod"

    @property
    def version(self) -> str:
        return gomod.k8s_version_of(self.modfile.read_text())

    @property
    def etcd(self) -> str:
        version = gomod.parse_upstream(self.modfile.read_text()).requires.get(gomod.ETCD_SERVER)
        if not version:
            raise BuildError(f"{self.modfile.name} does not require the etcd server")
        return version

    def go_flags(self) -> list[str]:
        return [] if self.newest else [f"-modfile={self.modfile.relative_to(CONTROLPLANE_DIR)}"]

    def packages(self) -> list[str]:
        if self.newest:
            return ["./cmd/..."]
        return [
            f"./cmd/{p.name}"
            for p in sorted((CONTROLPLANE_DIR / "cmd").iterdir())
            if p.is_dir() and p.name not in VERSION_INDEPENDENT
        ]

    def inputs(self) -> list[Path]:
        skipped = () if self.newest else VERSION_INDEPENDENT
        files = [self.modfile, self.sumfile]
        files += sorted(
            p
            for p in (CONTROLPLANE_DIR / "cmd").rglob("*")
            if p.is_file() and p.relative_to(CONTROLPLANE_DIR / "cmd").parts[0] not in skipped
        )
        return files


NEWEST = ControlPlaneModule(CONTROLPLANE_DIR / "go.mod")


def supported_versions() -> tuple[str, ...]:
    """Newest first: the versions a devcluster can be built at."""
    older = sorted(
        (ControlPlaneModule(p).version for p in VERSIONS_DIR.glob("*.mod")),
        key=lambda v: tuple(int(x) for x in v.lstrip("v").split(".")),
        reverse=True,
    )
    return (NEWEST.version, *older)


def module(version: str | None = None) -> ControlPlaneModule:
    if version is None or version == NEWEST.version:
        return NEWEST
    path = VERSIONS_DIR / f"{version}.mod"
    if not path.is_file():
        raise BuildError(
            f"K8S_VERSION={version} is not one the devcluster builds; it builds "
            f"{', '.join(supported_versions())} (add one with make k8s-gomod K8S_VERSION=vX.Y.Z)"
        )
    return ControlPlaneModule(path)


def k8s_version(version: str | None = None) -> str:
    return module(version).version


def etcd_version(version: str | None = None) -> str:
    return module(version).etcd


def ldflags(version: str) -> str:
    match = re.fullmatch(r"v(\d+)\.(\d+)\.(\d+)", version)
    if not match:
        raise BuildError(f"bad Kubernetes version {version}")
    major, minor = match.group(1), match.group(2)
    stamps = []
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        stamps += [
            f"-X {pkg}.gitVersion={version}",
            f"-X {pkg}.gitMajor={major}",
            f"-X {pkg}.gitMinor={minor}",
            f"-X {pkg}.gitTreeState=clean",
        ]
    return " ".join(["-s -w", *stamps])


def cache_key(mod: ControlPlaneModule = NEWEST) -> str:
    digest = hashlib.sha256(mod.sumfile.read_bytes()).hexdigest()[:16]
    return f"{mod.version}-{digest}"


def _go_version() -> str:
    if shutil.which("go") is None:
        raise BuildError(GO_MISSING.format(version=k8s_version()))
    out = subprocess.run(
        ["go", "version"], capture_output=True, text=True, timeout=60, check=True
    ).stdout.strip()
    return out


def inputs_sha256(go_version: str, mod: ControlPlaneModule = NEWEST) -> str:
    digest = hashlib.sha256()
    for path in mod.inputs():
        # The newest module's names are what they always were, so its caches stay valid.
        name = "go.mod" if path == mod.modfile else "go.sum" if path == mod.sumfile else None
        label = name or str(path.relative_to(CONTROLPLANE_DIR))
        digest.update(label.encode() + b"\0" + path.read_bytes() + b"\0")
    digest.update(" ".join(BUILD_FLAGS).encode() + b"\0" + ldflags(mod.version).encode() + b"\0")
    digest.update(go_version.encode())
    return digest.hexdigest()


@dataclass(frozen=True)
class BuildResult:
    directory: Path
    reused: bool
    seconds: float


def _complete(directory: Path, expected_inputs: str | None, mod: ControlPlaneModule = NEWEST) -> bool:
    info_path = directory / "build.json"
    if not info_path.is_file():
        return False
    own = BINARIES if mod.newest else tuple(n for n in BINARIES if n not in VERSION_INDEPENDENT)
    if not all(os.access(directory / name, os.X_OK) for name in own):
        return False
    if expected_inputs is None:
        return True
    return bool(json.loads(info_path.read_text()).get("inputs_sha256") == expected_inputs)


def _check_go(go_version: str) -> None:
    match = re.search(r"go(\d+)\.(\d+)", go_version)
    if not match or (int(match.group(1)), int(match.group(2))) < MIN_GO:
        raise BuildError(GO_MISSING.format(version=k8s_version()) + f" Found: {go_version}.")
    proxy = subprocess.run(
        ["go", "env", "GOPROXY"], capture_output=True, text=True, timeout=60
    ).stdout.strip()
    if proxy == "off":
        raise BuildError("GOPROXY is off; the first build on a machine needs the Go module proxy.")


def _tail(text: str, lines: int = 50) -> str:
    return "\n".join(text.splitlines()[-lines:])


def verify_versions(directory: Path, version: str, etcd: str) -> None:
    for name in SERVER_BINARIES:
        out = subprocess.run([str(directory / name), "--version"], capture_output=True, text=True, timeout=60)
        if f"Kubernetes {version}" not in out.stdout:
            raise BuildError(
                f"{name} reports {out.stdout.strip() or out.stderr.strip()!r}, expected Kubernetes {version}"
            )
    out = subprocess.run(
        [str(directory / "kubectl"), "version", "--client", "-o", "json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    client_version = json.loads(out.stdout or "{}").get("clientVersion", {}).get("gitVersion")
    if client_version != version:
        raise BuildError(f"kubectl reports {client_version!r}, expected {version}")
    out = subprocess.run([str(directory / "etcd"), "--version"], capture_output=True, text=True, timeout=60)
    if f"etcd Version: {etcd.lstrip('v')}" not in out.stdout:
        raise BuildError(f"etcd reports {out.stdout.strip()!r}, expected {etcd}")


def check_supplied(directory: Path) -> BuildResult:
    missing = [name for name in BINARIES if not os.access(directory / name, os.X_OK)]
    if missing:
        raise BuildError(f"DEVCLUSTER_BIN_DIR={directory} lacks {', '.join(missing)}")
    out = subprocess.run(
        [str(directory / "kube-apiserver"), "--version"], capture_output=True, text=True, timeout=60
    )
    if not re.search(r"Kubernetes v1\.37\.", out.stdout):
        raise BuildError(
            f"DEVCLUSTER_BIN_DIR kube-apiserver reports {out.stdout.strip()!r}, expected v1.37.x"
        )
    return BuildResult(directory, reused=True, seconds=0.0)


def build(timeout: float | None = None, log: object = print, version: str | None = None) -> BuildResult:
    """Build or reuse; returns the binary directory. ``version``: an older supported Kubernetes
    version (:func:`supported_versions`); None is the newest."""
    say = log if callable(log) else print
    supplied = os.environ.get("DEVCLUSTER_BIN_DIR")
    if supplied:
        return check_supplied(Path(supplied))
    mod = module(version)
    if not mod.newest:
        # The version-independent binaries come from the newest build, built or reused first.
        newest = build(timeout, log)
    root = cache_root() / "k8s-bin"
    target = root / cache_key(mod)
    result = _build_or_reuse(mod, target, root, timeout, say)
    if not mod.newest:
        _copy_version_independent(newest.directory, target)
    return result


def _build_or_reuse(
    mod: ControlPlaneModule, target: Path, root: Path, timeout: float | None, say: Callable[[str], None]
) -> BuildResult:
    # Fast path: no Go needed when the recorded inputs still match.
    if _complete(target, None, mod):
        go_version = _go_version() if shutil.which("go") else None
        if go_version is None or _complete(target, inputs_sha256(go_version, mod), mod):
            say(f"reusing {shown(target)}")
            return BuildResult(target, reused=True, seconds=0.0)
    go_version = _go_version()
    expected = inputs_sha256(go_version, mod)
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _complete(target, expected, mod):
            say(f"reusing {shown(target)}")
            return BuildResult(target, reused=True, seconds=0.0)
        return _build_locked(mod, target, go_version, expected, timeout, say)


def _copy_version_independent(source: Path, target: Path) -> None:
    for name in VERSION_INDEPENDENT:
        wanted = (source / name).read_bytes()
        present = target / name
        if present.is_file() and present.read_bytes() == wanted:
            continue
        staged = target / f".{name}.tmp-{os.getpid()}"
        shutil.copy2(source / name, staged)
        staged.rename(present)


def _build_locked(
    mod: ControlPlaneModule,
    target: Path,
    go_version: str,
    expected: str,
    timeout: float | None,
    say: object,
) -> BuildResult:
    log = say if callable(say) else print
    timeout = timeout or float(os.environ.get("DEVCLUSTER_BUILD_TIMEOUT", "2700"))
    _check_go(go_version)
    version, etcd = mod.version, mod.etcd
    started = time.monotonic()
    env = gomod.go_env({"GOFLAGS": "-mod=readonly"})
    download = subprocess.run(
        ["go", "mod", "download", *mod.go_flags()],
        cwd=CONTROLPLANE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if download.returncode != 0:
        raise BuildError(
            f"Cannot download Go modules via GOPROXY={os.environ.get('GOPROXY', 'default')}: "
            f"{_tail(download.stderr, 10)}\nThe first build on a machine needs the Go module proxy; "
            "later builds work from the module cache."
        )
    try:
        gomod.check_offline(mod.modfile.read_text(), mod.go_flags())
    except gomod.GoModError as err:
        raise BuildError(str(err)) from err
    tmp = target.with_name(f"{target.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    names = ", ".join(package.rsplit("/", 1)[-1] for package in mod.packages())
    log(f"building {names} {version} into {target} (cold builds take a while)")
    try:
        remaining = timeout - (time.monotonic() - started)
        proc = subprocess.run(
            [
                "go",
                "build",
                *mod.go_flags(),
                *BUILD_FLAGS,
                "-ldflags",
                ldflags(version),
                "-o",
                f"{tmp}/",
                *mod.packages(),
            ],
            cwd=CONTROLPLANE_DIR,
            env=env,
            capture_output=True,
            text=True,
            timeout=max(remaining, 1),
            check=False,
        )
        if proc.returncode != 0:
            raise BuildError(f"go build failed:\n{_tail(proc.stdout + proc.stderr)}")
        verify_versions(tmp, version, etcd)
        built = [name for name in BINARIES if (tmp / name).is_file()]
        seconds = round(time.monotonic() - started, 1)
        info = {
            "k8s_version": version,
            "etcd_version": etcd,
            "go_version": go_version.split()[2] if len(go_version.split()) > 2 else go_version,
            "goos": os.uname().sysname.lower(),
            "goarch": {"x86_64": "amd64", "aarch64": "arm64"}.get(os.uname().machine, os.uname().machine),
            "ldflags": ldflags(version),
            "inputs_sha256": expected,
            "build_seconds": seconds,
            "built_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "binaries": {
                name: {
                    "size": (tmp / name).stat().st_size,
                    "sha256": hashlib.sha256((tmp / name).read_bytes()).hexdigest(),
                }
                for name in built
            },
        }
        (tmp / "build.json").write_text(json.dumps(info, indent=2) + "\n")
        if target.exists():
            shutil.rmtree(target)
        tmp.rename(target)
    except subprocess.TimeoutExpired as err:
        raise BuildError(
            f"build exceeded DEVCLUSTER_BUILD_TIMEOUT={timeout:.0f}s:\n{_tail(str(err.output or ''))}"
        ) from err
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    log(f"built in {seconds:.0f} s")
    return BuildResult(target, reused=False, seconds=seconds)


def prune(keep: Path) -> list[Path]:
    removed = []
    for entry in (cache_root() / "k8s-bin").iterdir():
        if entry.is_dir() and entry != keep:
            shutil.rmtree(entry)
            removed.append(entry)
    return removed


# -- the real node's runtime ------------------------------------------------------------------

CONTAINERD_MODULE = "github.com/containerd/containerd/v2"
CONTAINERD_VERSION = "v2.4.2"
CONTAINERD_BINARIES = ("containerd", "ctr", "containerd-shim-runc-v2")

HELM_MODULE = "helm.sh/helm/v4"
HELM_VERSION = "v4.3.2"
ORAS_MODULE = "oras.land/oras"
ORAS_VERSION = "v1.3.6"


@dataclass(frozen=True)
class GoTool:
    """Binaries ``go install``ed from one module at a pinned version (the module's own go.sum,
    checked against the checksum database), cached by version, Go version and flags."""

    label: str
    module: str
    version: str
    binaries: tuple[str, ...]
    cache_dir: str
    # The arguments that make the first binary print its version.
    version_args: tuple[str, ...] = ("--version",)
    # Link-time stamps, where the module's own default is not the release's version.
    stamps: tuple[str, ...] = ()

    def ldflags(self) -> str:
        return " ".join(["-s -w", *(f"-X {stamp}" for stamp in self.stamps)])

    def packages(self) -> list[str]:
        return [f"{self.module}/cmd/{name}@{self.version}" for name in self.binaries]


CONTAINERD = GoTool("containerd", CONTAINERD_MODULE, CONTAINERD_VERSION, CONTAINERD_BINARIES, "node-bin")
# helm's own default version is "v4.3": the release stamps the patch version at link time.
HELM = GoTool(
    "helm",
    HELM_MODULE,
    HELM_VERSION,
    ("helm",),
    "helm-bin",
    ("version", "--short"),
    (f"{HELM_MODULE}/internal/version.version={HELM_VERSION}",),
)
ORAS = GoTool("oras", ORAS_MODULE, ORAS_VERSION, ("oras",), "oras-bin", ("version",))


def build_containerd(timeout: float | None = None, log: object = print) -> BuildResult:
    """containerd, ctr and the runc shim at CONTAINERD_VERSION, by ``go install`` into the cache.

    Debian bookworm ships containerd 1.6, which lacks the CRI call through which kubelet 1.37
    learns the cgroup driver; containerd 2 is served as a Go module and needs no replaces.
    """
    return build_tool(CONTAINERD, timeout, log)


def build_helm(timeout: float | None = None, log: object = print) -> BuildResult:
    """helm at HELM_VERSION, for the chart's tests (lint, template, a real install)."""
    return build_tool(HELM, timeout, log)


def build_oras(timeout: float | None = None, log: object = print) -> BuildResult:
    """oras at ORAS_VERSION, which attaches the release's SBOM to the image index it describes."""
    return build_tool(ORAS, timeout, log)


def build_tool(tool: GoTool, timeout: float | None = None, log: object = print) -> BuildResult:
    say = log if callable(log) else print
    go_version = _go_version()
    stamps = f" {tool.stamps}" if tool.stamps else ""
    key = hashlib.sha256(f"{tool.version} {go_version} {BUILD_FLAGS}{stamps}".encode()).hexdigest()[:12]
    root = cache_root() / tool.cache_dir
    target = root / f"{tool.label}-{tool.version}-{key}"
    if all(os.access(target / name, os.X_OK) for name in tool.binaries):
        say(f"reusing {shown(target)}")
        return BuildResult(target, reused=True, seconds=0.0)
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if all(os.access(target / name, os.X_OK) for name in tool.binaries):
            return BuildResult(target, reused=True, seconds=0.0)
        _check_go(go_version)
        started = time.monotonic()
        tmp = target.with_name(f"{target.name}.tmp-{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        say(f"building {', '.join(tool.binaries)} {tool.version} into {target}")
        try:
            proc = subprocess.run(
                ["go", "install", *BUILD_FLAGS, f"-ldflags={tool.ldflags()}", *tool.packages()],
                env=gomod.go_env({"GOBIN": str(tmp), "GOFLAGS": ""}),
                cwd=tmp,
                capture_output=True,
                text=True,
                timeout=timeout or float(os.environ.get("DEVCLUSTER_BUILD_TIMEOUT", "2700")),
                check=False,
            )
            if proc.returncode != 0:
                raise BuildError(f"go install {tool.label} failed:\n{_tail(proc.stdout + proc.stderr)}")
            out = subprocess.run(
                [str(tmp / tool.binaries[0]), *tool.version_args], capture_output=True, text=True, timeout=60
            ).stdout
            if tool.version.lstrip("v") not in out:
                raise BuildError(f"{tool.label} reports {out.strip()!r}, expected {tool.version}")
            if target.exists():
                shutil.rmtree(target)
            tmp.rename(target)
        except subprocess.TimeoutExpired as err:
            raise BuildError(f"{tool.label} build timed out:\n{_tail(str(err.output or ''))}") from err
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        seconds = round(time.monotonic() - started, 1)
        say(f"built in {seconds:.0f} s")
        return BuildResult(target, reused=False, seconds=seconds)
