"""The ``kubectl-dra`` distribution (devcluster/dist.py, plugin/): the plugin alone, without kopf.

Building and installing it from PyPI is ``tests/test_dist_install.py`` (make test-dist); these
check, without a network, that what it ships is what the plugin imports and needs."""

from __future__ import annotations

import hashlib
import importlib.metadata
import subprocess
import sys
import tarfile
import tomllib
from pathlib import Path

import grimp
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from devcluster import dist

ROOT = Path(__file__).resolve().parents[1]
PLUGIN_PROJECT = tomllib.loads((ROOT / "plugin" / "pyproject.toml").read_text())["project"]

# What a user's python must not load for any kubectl dra command: kopf, and aiohttp's server side
# (kubernetes-asyncio needs aiohttp's client). None in sys.modules makes an import fail.
BLOCKED = ("kopf", "aiohttp.web", "uvloop", "cryptography")
RUN_BLOCKED = f"""
import importlib, sys
for name in {BLOCKED!r}:
    sys.modules[name] = None
import operators
assert operators.__file__.startswith(sys.argv[1]), operators.__file__
for module in sys.argv[2:]:
    if not module.endswith(".__main__"):  # that one runs the plugin on import
        importlib.import_module(module)
from operators.kubectl_dra import main
for command in (["--help"], ["pools", "--help"], ["taint", "--help"], ["completion", "bash"]):
    try:
        code = main(command)
    except SystemExit as stop:
        code = stop.code
    assert code in (0, None), (command, code)
print("ran")
"""


def run_blocked(tree: Path, modules: list[str]) -> subprocess.CompletedProcess[str]:
    # The current directory comes first on sys.path, so `operators` is the one in `tree`.
    return subprocess.run(
        [sys.executable, "-c", RUN_BLOCKED, str(tree), *modules],
        cwd=tree,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_plugin_runs_with_kopf_and_the_http_server_blocked() -> None:
    done = run_blocked(ROOT, dist.plugin_modules())
    assert done.returncode == 0, done.stderr
    assert "ran" in done.stdout


def test_the_staged_distribution_holds_every_module_the_plugin_imports_and_no_operator(
    tmp_path: Path,
) -> None:
    staged = dist.stage_plugin(tmp_path)
    shipped = sorted(
        ".".join(p.relative_to(staged).with_suffix("").parts).removesuffix(".__init__")
        for p in staged.rglob("*.py")
    )
    assert shipped == dist.plugin_modules()
    assert {m.split(".")[1] for m in shipped if "." in m} == {"core", "dra", "kubectl_dra"}
    assert "operators.core.runtime" not in shipped
    assert (staged / "LICENSE").is_file()
    assert (staged / "README.md").is_file()
    # Nothing outside the staged tree is needed: every shipped module imports from it alone.
    done = run_blocked(staged, shipped)
    assert done.returncode == 0, done.stderr


def _top_level_imports(modules: list[str]) -> set[str]:
    graph = grimp.build_graph(
        "operators", cache_dir=None, include_external_packages=True, exclude_type_checking_imports=True
    )
    imported = {i for m in modules for i in graph.find_modules_directly_imported_by(m)}
    return {i for i in imported if not i.startswith("operators")} - set(sys.stdlib_module_names)


def test_the_plugin_declares_exactly_the_libraries_it_imports() -> None:
    """Each library the shipped modules import is a declared dependency or comes with one (yarl
    with aiohttp), and each declared dependency is imported."""
    declared = {canonicalize_name(Requirement(r).name) for r in PLUGIN_PROJECT["dependencies"]}
    providers = importlib.metadata.packages_distributions()
    imported = {canonicalize_name(providers[name][0]) for name in _top_level_imports(dist.plugin_modules())}
    brought = {
        canonicalize_name(Requirement(r).name)
        for d in declared
        for r in importlib.metadata.requires(d) or ()
        if "extra ==" not in r
    }
    assert imported - declared <= brought, imported - declared - brought
    assert declared <= imported, declared - imported
    assert "kopf" not in imported | brought


def test_the_krew_manifest_names_the_archive_by_its_sha256(tmp_path: Path) -> None:
    wheel = tmp_path / "kubectl_dra-9.9.9-py3-none-any.whl"
    wheel.write_bytes(b"not really a wheel")
    first = dist.krew_archive(wheel, tmp_path, "9.9.9")
    manifest = dist.krew_manifest(first, "9.9.9")
    again = dist.krew_archive(wheel, tmp_path, "9.9.9")
    assert dist.krew_manifest(again, "9.9.9") == manifest, "the archive is not reproducible"

    assert manifest["apiVersion"] == "krew.googlecontainertools.github.com/v1alpha2"
    assert manifest["kind"] == "Plugin"
    assert manifest["metadata"]["name"] == "dra"
    assert manifest["spec"]["version"] == "v9.9.9"
    sha256 = hashlib.sha256(first.read_bytes()).hexdigest()
    platforms = manifest["spec"]["platforms"]
    assert {
        (p["selector"]["matchLabels"]["os"], p["selector"]["matchLabels"]["arch"]) for p in platforms
    } == {
        ("linux", "amd64"),
        ("linux", "arm64"),
        ("darwin", "amd64"),
        ("darwin", "arm64"),
    }
    for platform in platforms:
        assert platform["sha256"] == sha256
        assert platform["bin"] == "kubectl-dra"
        assert platform["uri"] == (
            "https://github.com/dra-operators/dra-operators/releases/download/v9.9.9/kubectl-dra-9.9.9.tar.gz"
        )
    with tarfile.open(first) as tar:
        members = {m.name: m for m in tar.getmembers()}
        assert set(members) == {"kubectl-dra", wheel.name, "LICENSE"}
        assert members["kubectl-dra"].mode == 0o755
        launcher = tar.extractfile("kubectl-dra")
        assert launcher is not None
        assert launcher.read() == (ROOT / "plugin" / "launcher.py").read_bytes()
    assert yaml.safe_load(dist.manifest_yaml(manifest)) == manifest
