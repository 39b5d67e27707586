"""``make dist``: the Python distributions, and the ``kubectl dra`` plugin alone for pip and krew.

Into ``dist/``:

- ``dra_operators-<version>.tar.gz`` and ``-py3-none-any.whl``: the operators, with the plugin;
- ``kubectl_dra-<version>.tar.gz`` and ``-py3-none-any.whl``: the plugin alone (no kopf, no
  operators), built from a staging directory with ``plugin/pyproject.toml``, ``plugin/README.md``,
  ``LICENSE`` and exactly the modules that ``operators.kubectl_dra`` imports, found in the import
  graph (grimp, the library behind ``lint-imports``), so a module the plugin starts to import is
  shipped without a list to keep;
- ``krew/kubectl-dra-<version>.tar.gz`` (``plugin/launcher.py`` as ``kubectl-dra``, the plugin's
  wheel, ``LICENSE``) and ``krew/dra.yaml``, its krew manifest with the archive's sha256.

RELEASE.md says how they are published.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import shutil
import subprocess
import sys
import tarfile
import tempfile
import venv
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grimp
import yaml

from .constants import REPO_ROOT
from .release import DIST, project_version

PLUGIN_DIR = REPO_ROOT / "plugin"
PLUGIN_PACKAGE = "operators.kubectl_dra"
REPOSITORY = "https://github.com/dra-operators/dra-operators"
KREW_PLATFORMS = [(os, arch) for os in ("linux", "darwin") for arch in ("amd64", "arm64")]
BUILD_TIMEOUT = 600

Say = Callable[[str], None]


def plugin_modules() -> list[str]:
    """The modules of ``operators`` that the plugin imports, directly or not, its own included."""
    graph = grimp.build_graph("operators", cache_dir=None, exclude_type_checking_imports=True)
    pending = {PLUGIN_PACKAGE, *graph.find_descendants(PLUGIN_PACKAGE)}
    found: set[str] = set()
    while pending:
        module = pending.pop()
        found.add(module)
        # Importing a module runs the __init__ of each package above it, and what that imports.
        parents = {".".join(module.split(".")[:i]) for i in range(1, module.count(".") + 1)}
        pending |= (graph.find_upstream_modules(module) | parents) - found
    return sorted(found)


def module_file(module: str) -> Path:
    path = REPO_ROOT.joinpath(*module.split("."))
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


def stage_plugin(into: Path) -> Path:
    """A source tree of the ``kubectl-dra`` distribution, in ``into``."""
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(PLUGIN_DIR / name, into / name)
    shutil.copy2(REPO_ROOT / "LICENSE", into / "LICENSE")
    for module in plugin_modules():
        source = module_file(module)
        target = into / source.relative_to(REPO_ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)
    return into


def _build(source: Path, out: Path, say: Say) -> list[Path]:
    """``python -m build``: the sdist, then the wheel built from that sdist, as pip would."""
    with tempfile.TemporaryDirectory(prefix="dra-dist-") as tmp:
        done = subprocess.run(
            [sys.executable, "-m", "build", "--outdir", tmp, str(source)],
            capture_output=True,
            text=True,
            timeout=BUILD_TIMEOUT,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(
                f"python -m build {source} failed:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
            )
        paths = [Path(shutil.move(built, out / built.name)) for built in sorted(Path(tmp).iterdir())]
    for path in paths:
        say(f"{path.name} ({path.stat().st_size // 1024} KiB)")
    return paths


def build_plugin(out: Path, say: Say = print) -> list[Path]:
    """The ``kubectl-dra`` sdist and wheel, into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="dra-plugin-") as tmp:
        return _build(stage_plugin(Path(tmp)), out, say)


def krew_archive(wheel: Path, out: Path, version: str) -> Path:
    """The archive krew unpacks: the launcher as ``kubectl-dra``, the wheel and the licence. Fixed
    owners and times, so the same wheel gives the same sha256."""
    archive = out / f"kubectl-dra-{version}.tar.gz"
    members = [
        ("kubectl-dra", (PLUGIN_DIR / "launcher.py").read_bytes(), 0o755),
        (wheel.name, wheel.read_bytes(), 0o644),
        ("LICENSE", (REPO_ROOT / "LICENSE").read_bytes(), 0o644),
    ]
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data, mode in members:
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), mode, 0
            tar.addfile(info, io.BytesIO(data))
    archive.write_bytes(gzip.compress(buffer.getvalue(), mtime=0))
    return archive


def krew_manifest(archive: Path, version: str) -> dict[str, Any]:
    """The krew-index manifest (``plugins/dra.yaml``) for the archive as a release asset."""
    sha256 = hashlib.sha256(archive.read_bytes()).hexdigest()
    uri = f"{REPOSITORY}/releases/download/v{version}/{archive.name}"
    return {
        "apiVersion": "krew.googlecontainertools.github.com/v1alpha2",
        "kind": "Plugin",
        "metadata": {"name": "dra"},
        "spec": {
            "version": f"v{version}",
            "homepage": f"{REPOSITORY}/blob/main/docs/kubectl-dra.md",
            "shortDescription": "Inspect and maintain Kubernetes DRA devices",
            "description": (
                "Asks the dra-operators about Dynamic Resource Allocation devices: devices per pool,\n"
                "what a DeviceTaintRule would affect, why a claim or pod is where it is, and device\n"
                "maintenance (taint, untaint, drain of a node's or a pool's devices).\n"
            ),
            "caveats": (
                "kubectl dra runs on python3 (3.11 or newer) from your PATH. Its first run installs\n"
                "the plugin and its dependencies from PyPI into a virtualenv in krew's directory\n"
                "for the plugin, which needs pip and network access once.\n"
            ),
            "platforms": [
                {
                    "selector": {"matchLabels": {"os": os, "arch": arch}},
                    "uri": uri,
                    "sha256": sha256,
                    "files": [{"from": "*", "to": "."}],
                    "bin": "kubectl-dra",
                }
                for os, arch in KREW_PLATFORMS
            ],
        },
    }


class _BlockDumper(yaml.SafeDumper):
    """Multi-line strings as literal blocks, as krew-index's manifests write them."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None)


_BlockDumper.add_representer(str, _str)


def manifest_yaml(manifest: dict[str, Any]) -> str:
    return yaml.dump(manifest, Dumper=_BlockDumper, sort_keys=False)


def build(out: Path = DIST, say: Say = print) -> list[Path]:
    """Everything of the module docstring, into ``out``."""
    version = project_version()
    out.mkdir(parents=True, exist_ok=True)
    made = _build(REPO_ROOT, out, say)
    plugin = build_plugin(out, say)
    wheel = next(p for p in plugin if p.suffix == ".whl")
    krew = out / "krew"
    krew.mkdir(exist_ok=True)
    archive = krew_archive(wheel, krew, version)
    manifest = krew / "dra.yaml"
    manifest.write_text(manifest_yaml(krew_manifest(archive, version)))
    for path in (archive, manifest):
        say(f"{path.relative_to(out)} ({path.stat().st_size // 1024} KiB)")
    return [*made, *plugin, archive, manifest]


def check(made: list[Path]) -> None:
    """``twine check --strict``: the metadata and the rendered README of each Python distribution, as
    PyPI would take them."""
    python = [p for p in made if p.name.endswith((".whl", ".tar.gz")) and p.parent.name != "krew"]
    subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", *map(str, python)], check=True, timeout=300
    )


def clean_venv(directory: Path, wheel: Path, constraints: Path = REPO_ROOT / "constraints.txt") -> Path:
    """A new virtualenv in ``directory`` with ``wheel`` installed from PyPI under ``constraints``,
    as a user's ``pip install`` would; its ``bin`` directory."""
    venv.create(directory, with_pip=True, clear=True)
    done = subprocess.run(
        [
            *(str(directory / "bin" / "python"), "-m", "pip", "install", "--quiet"),
            *("--disable-pip-version-check", "-c", str(constraints), str(wheel)),
        ],
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"pip install {wheel.name} failed:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}")
    return directory / "bin"
