"""Upstream's DRA e2e suite, built here: its test binary, the ginkgo CLI, and its two images.

The Go module beside this file pins ``k8s.io/kubernetes`` at the control plane's newest version
with the same replaces (``make k8s-gomod`` writes both), and every binary is built with the control
plane's flags, so the packages the two share are compiled once. Each older version the devcluster
builds has its own ``versions/<version>.mod`` and ``.sum`` here (``make k8s-gomod OLDER=1``), built
from the same sources with ``-modfile`` and the older module's build tag, so that every version
runs its own suite, as its release tested itself. Nothing of the suite is kept in
this repository: ``suite_test.go`` only does what upstream's ``test/e2e/e2e_test.go`` does before
it runs the specs.

The cache entry ``cache_root()/conformance/<version>-<inputs>/`` (one per version) holds ``e2e-dra.test``,
``ginkgo`` and ``hostpathplugin`` (the stand-in for csi-driver-host-path's proxy mode, which the
Go module proxy does not serve), with ``build.json``.

The images are named as the suite resolves them (``-list-images``): every busybox tag it names is
the base image under that name (the suite's pods need ``sh``, ``env`` and ``sleep``); every
hostpathplugin it names is the base image with the stand-in as ``/hostpathplugin``.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from devcluster import gomod, images
from devcluster.build import (
    BUILD_FLAGS,
    NEWEST,
    BuildError,
    _check_go,
    _go_version,
    _tail,
    cache_root,
    ldflags,
    shown,
)
from devcluster.constants import CONFORMANCE_DIR

SUITE = "e2e-dra.test"
GINKGO = "ginkgo"
PROXY = "hostpathplugin"
BINARIES = (SUITE, GINKGO, PROXY)


@dataclass(frozen=True)
class SuiteBinaries:
    directory: Path
    reused: bool
    seconds: float

    @property
    def suite(self) -> Path:
        return self.directory / SUITE

    @property
    def ginkgo(self) -> Path:
        return self.directory / GINKGO

    @property
    def proxy(self) -> Path:
        return self.directory / PROXY


@dataclass(frozen=True)
class SuiteModule:
    """The suite's module at one Kubernetes version: ``go.mod`` for the newest, ``versions/`` for
    the others."""

    version: str

    @property
    def newest(self) -> bool:
        return self.version == NEWEST.version

    @property
    def modfile(self) -> Path:
        return (
            CONFORMANCE_DIR / "go.mod"
            if self.newest
            else gomod.CONFORMANCE.versions_dir / f"{self.version}.mod"
        )

    def modfile_flags(self) -> list[str]:
        """For every go command: which module file."""
        return [] if self.newest else [f"-modfile={self.modfile.relative_to(CONFORMANCE_DIR)}"]

    def go_flags(self) -> list[str]:
        """For the suite's own build: the module file, and the tag of the files older modules build."""
        return self.modfile_flags() + ([] if self.newest else [f"-tags={gomod.OLDER_MODULE_TAG}"])

    def inputs(self) -> list[Path]:
        sources = sorted(p for p in CONFORMANCE_DIR.rglob("*.go") if p.is_file())
        return [self.modfile, self.modfile.with_suffix(".sum"), *sources]


def suite_module(version: str | None = None) -> SuiteModule:
    module = SuiteModule(version or NEWEST.version)
    if not module.modfile.is_file():
        raise BuildError(
            f"upstream's DRA suite has no module for {module.version}"
            f" (add it with make k8s-gomod K8S_VERSION={module.version} OLDER=1)"
        )
    return module


def inputs_sha256(go_version: str, module: SuiteModule) -> str:
    digest = hashlib.sha256()
    for path in module.inputs():
        # The module files under one name, so that a version's key does not depend on where they sit.
        name = "go.mod" if path == module.modfile else "go.sum" if path.suffix == ".sum" else None
        label = name or str(path.relative_to(CONFORMANCE_DIR))
        digest.update(label.encode() + b"\0" + path.read_bytes() + b"\0")
    flags = [*BUILD_FLAGS, *module.go_flags(), ldflags(module.version)]
    digest.update(" ".join(flags).encode() + b"\0")
    digest.update(go_version.encode())
    return digest.hexdigest()


def _complete(directory: Path, expected: str) -> bool:
    try:
        info = json.loads((directory / "build.json").read_text())
    except (OSError, ValueError):
        return False
    return info.get("inputs_sha256") == expected and all(os.access(directory / n, os.X_OK) for n in BINARIES)


def build(version: str | None = None, timeout: float | None = None, log: object = print) -> SuiteBinaries:
    """Build or reuse the suite's binaries at ``version`` (None: the newest)."""
    say = log if callable(log) else print
    module = suite_module(version)
    go_version = _go_version()
    expected = inputs_sha256(go_version, module)
    root = cache_root() / "conformance"
    target = root / f"{module.version}-{expected[:16]}"
    if _complete(target, expected):
        say(f"reusing {shown(target)}")
        return SuiteBinaries(target, reused=True, seconds=0.0)
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _complete(target, expected):
            return SuiteBinaries(target, reused=True, seconds=0.0)
        _check_go(go_version)
        return _build_locked(module, target, go_version, expected, timeout, say)


def _build_locked(
    module: SuiteModule, target: Path, go_version: str, expected: str, timeout: float | None, say: object
) -> SuiteBinaries:
    log = say if callable(say) else print
    deadline = time.monotonic() + (timeout or float(os.environ.get("DEVCLUSTER_BUILD_TIMEOUT", "2700")))
    version = module.version
    tmp = target.with_name(f"{target.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    env = gomod.go_env({"GOFLAGS": "-mod=readonly"})
    modfile = module.modfile_flags()
    flags = [*BUILD_FLAGS, *module.go_flags(), "-ldflags", ldflags(version)]
    commands = [
        ["go", "mod", "download", *modfile],
        ["go", "test", "-c", *flags, "-o", str(tmp / SUITE), "."],
        ["go", "build", *BUILD_FLAGS, *modfile, "-o", str(tmp / GINKGO), f"{gomod.GINKGO}/ginkgo"],
        ["go", "build", *BUILD_FLAGS, *modfile, "-o", str(tmp / PROXY), f"./cmd/{PROXY}"],
    ]
    log(f"building upstream's DRA e2e suite {version} ({', '.join(BINARIES)}) into {shown(target)}")
    started = time.monotonic()
    try:
        for command in commands:
            proc = subprocess.run(
                command,
                cwd=CONFORMANCE_DIR,
                env=env,
                capture_output=True,
                text=True,
                timeout=max(deadline - time.monotonic(), 1),
                check=False,
            )
            if proc.returncode != 0:
                raise BuildError(f"{' '.join(command[:3])} failed:\n{_tail(proc.stdout + proc.stderr)}")
        listed = subprocess.run(
            [str(tmp / SUITE), "-list-tests"], capture_output=True, text=True, timeout=120, check=False
        )
        specs = sum("[DRA]" in line for line in listed.stdout.splitlines())
        if specs == 0:
            raise BuildError(
                f"{SUITE} -list-tests names no [DRA] spec:\n{_tail(listed.stdout + listed.stderr)}"
            )
        seconds = round(time.monotonic() - started, 1)
        info = {
            "k8s_version": version,
            "go_version": go_version,
            "inputs_sha256": expected,
            "dra_specs": specs,
            "build_seconds": seconds,
            "built_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
        (tmp / "build.json").write_text(json.dumps(info, indent=2) + "\n")
        shutil.rmtree(target, ignore_errors=True)
        tmp.rename(target)
    except subprocess.TimeoutExpired as err:
        raise BuildError(f"the suite's build timed out:\n{_tail(str(err.output or ''))}") from err
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for stale in target.parent.glob(f"{version}-*"):
        if stale.is_dir() and stale != target and ".tmp-" not in stale.name:
            shutil.rmtree(stale, ignore_errors=True)
    log(f"built in {seconds:.0f} s ({specs} [DRA] specs)")
    return SuiteBinaries(target, reused=False, seconds=seconds)


def image_names(suite: Path) -> tuple[list[str], list[str]]:
    """(every busybox image, every hostpathplugin image) the suite resolves."""
    listed = subprocess.run(
        [str(suite), "-list-images"], capture_output=True, text=True, timeout=120, check=True
    )
    names = [line.strip() for line in listed.stdout.splitlines() if line.strip()]
    busybox = sorted(name for name in names if name.rpartition(":")[0].endswith("/busybox"))
    # Which tag the proxy pod names differs between versions (1.37 takes the newest, 1.35 does
    # not), so every one the suite lists is the stand-in.
    proxies = sorted(name for name in names if name.rpartition(":")[0].endswith("/hostpathplugin"))
    if not busybox or not proxies:
        raise BuildError(f"{suite.name} -list-images names no busybox or hostpathplugin image")
    return busybox, proxies


def suite_images(binaries: SuiteBinaries, say: images.Say = print) -> tuple[Path, ...]:
    """The OCI archives of the suite's images, built or reused."""
    base = images.ensure_base(say)
    busybox, proxies = image_names(binaries.suite)
    # One cache name per tag: the cache keeps a few entries per name, and the suite needs every tag
    # at once (the entries of one name would evict each other).
    archives = [images.ensure_derived(_cache_name(name), name, base, say=say).archive for name in busybox]
    archives += [
        images.ensure_derived(_cache_name(name), name, base, {f"/{PROXY}": binaries.proxy}, say).archive
        for name in proxies
    ]
    return tuple(archives)


def _cache_name(ref: str) -> str:
    """``busybox-1.36.1-1`` for ``registry.k8s.io/e2e-test-images/busybox:1.36.1-1``."""
    repository, _, tag = ref.rpartition(":")
    return f"{repository.rpartition('/')[2]}-{tag}"
