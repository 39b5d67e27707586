"""Upstream's DRA e2e suite, built here: its test binary, the ginkgo CLI, and its two images.

The Go module beside this file pins ``k8s.io/kubernetes`` at the control plane's version with
the same replaces (``make k8s-gomod`` writes both), and every binary is built with the control
plane's flags, so the packages the two share are compiled once. Nothing of the suite is kept in
this repository: ``suite_test.go`` only does what upstream's ``test/e2e/e2e_test.go`` does before
it runs the specs.

The cache entry ``cache_root()/conformance/<version>-<inputs>/`` holds ``e2e-dra.test``,
``ginkgo`` and ``hostpathplugin`` (the stand-in for csi-driver-host-path's proxy mode, which the
Go module proxy does not serve), with ``build.json``.

The images are named as the suite resolves them (``-list-images``): every busybox tag it names is
the base image under that name (the suite's pods need ``sh``, ``env`` and ``sleep``); the newest
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

from e2e.cluster import gomod, images
from e2e.cluster.build import (
    BUILD_FLAGS,
    BuildError,
    _check_go,
    _go_version,
    _tail,
    cache_root,
    k8s_version,
    ldflags,
    shown,
)
from e2e.cluster.constants import CONFORMANCE_DIR

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


def inputs_sha256(go_version: str) -> str:
    digest = hashlib.sha256()
    files = sorted(
        p for p in CONFORMANCE_DIR.rglob("*") if p.is_file() and p.suffix in (".go", ".mod", ".sum")
    )
    for path in files:
        digest.update(str(path.relative_to(CONFORMANCE_DIR)).encode() + b"\0" + path.read_bytes() + b"\0")
    digest.update(" ".join(BUILD_FLAGS).encode() + b"\0" + ldflags(k8s_version()).encode() + b"\0")
    digest.update(go_version.encode())
    return digest.hexdigest()


def _complete(directory: Path, expected: str) -> bool:
    try:
        info = json.loads((directory / "build.json").read_text())
    except (OSError, ValueError):
        return False
    return info.get("inputs_sha256") == expected and all(os.access(directory / n, os.X_OK) for n in BINARIES)


def build(timeout: float | None = None, log: object = print) -> SuiteBinaries:
    """Build or reuse the suite's binaries."""
    say = log if callable(log) else print
    go_version = _go_version()
    expected = inputs_sha256(go_version)
    root = cache_root() / "conformance"
    target = root / f"{k8s_version()}-{expected[:16]}"
    if _complete(target, expected):
        say(f"reusing {shown(target)}")
        return SuiteBinaries(target, reused=True, seconds=0.0)
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _complete(target, expected):
            return SuiteBinaries(target, reused=True, seconds=0.0)
        _check_go(go_version)
        return _build_locked(target, go_version, expected, timeout, say)


def _build_locked(
    target: Path, go_version: str, expected: str, timeout: float | None, say: object
) -> SuiteBinaries:
    log = say if callable(say) else print
    deadline = time.monotonic() + (timeout or float(os.environ.get("DEVCLUSTER_BUILD_TIMEOUT", "2700")))
    version = k8s_version()
    tmp = target.with_name(f"{target.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    env = gomod.go_env({"GOFLAGS": "-mod=readonly"})
    flags = [*BUILD_FLAGS, "-ldflags", ldflags(version)]
    commands = [
        ["go", "mod", "download"],
        ["go", "test", "-c", *flags, "-o", str(tmp / SUITE), "."],
        ["go", "build", *BUILD_FLAGS, "-o", str(tmp / GINKGO), f"{gomod.GINKGO}/ginkgo"],
        ["go", "build", *BUILD_FLAGS, "-o", str(tmp / PROXY), f"./cmd/{PROXY}"],
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
    for stale in target.parent.iterdir():
        if stale.is_dir() and stale != target and ".tmp-" not in stale.name:
            shutil.rmtree(stale, ignore_errors=True)
    log(f"built in {seconds:.0f} s ({specs} [DRA] specs)")
    return SuiteBinaries(target, reused=False, seconds=seconds)


def image_names(suite: Path) -> tuple[list[str], str]:
    """(every busybox image, the newest hostpathplugin image) the suite resolves."""
    listed = subprocess.run(
        [str(suite), "-list-images"], capture_output=True, text=True, timeout=120, check=True
    )
    names = [line.strip() for line in listed.stdout.splitlines() if line.strip()]
    busybox = sorted(name for name in names if name.rpartition(":")[0].endswith("/busybox"))
    proxies = [name for name in names if name.rpartition(":")[0].endswith("/hostpathplugin")]
    if not busybox or not proxies:
        raise BuildError(f"{suite.name} -list-images names no busybox or hostpathplugin image")
    # The suite picks the newest hostpathplugin by comparing the tags as strings.
    return busybox, max(proxies, key=lambda name: name.rpartition(":")[2])


def suite_images(binaries: SuiteBinaries, say: images.Say = print) -> tuple[Path, ...]:
    """The OCI archives of the suite's images, built or reused."""
    base = images.ensure_base(say)
    busybox, proxy = image_names(binaries.suite)
    archives = [images.ensure_derived("busybox", name, base, say=say).archive for name in busybox]
    archives.append(
        images.ensure_derived("hostpathplugin", proxy, base, {f"/{PROXY}": binaries.proxy}, say).archive
    )
    return tuple(archives)
