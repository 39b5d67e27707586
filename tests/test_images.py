"""The real node's image recipes without building anything: cache keys, names, the OCI layout."""

from __future__ import annotations

import json
import re
import shutil
import sys
import tarfile
from pathlib import Path

import pytest

from devcluster import images
from devcluster.constants import REPO_ROOT

pytestmark = pytest.mark.unit

BASE_DIGEST = "sha256:" + "ab" * 32


@pytest.fixture
def context(tmp_path: Path) -> Path:
    """A copy of the operator image's build context, to edit."""
    for relative in images.context_files(REPO_ROOT):
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO_ROOT / relative, tmp_path / relative)
    return tmp_path


def test_base_key_follows_the_packages_and_the_suite_not_their_order() -> None:
    key = images.base_key()
    assert key == images.base_key(tuple(reversed(images.BASE_PACKAGES)))
    assert key != images.base_key((*images.BASE_PACKAGES, "tzdata"))
    assert key != images.base_key(suite="trixie")
    assert re.fullmatch(r"[0-9a-f]{16}", key)


def test_keys_follow_the_recipe_version(monkeypatch: pytest.MonkeyPatch) -> None:
    before = (images.base_key(), images.pause_key("v1.37.2"), images.operator_key(BASE_DIGEST))
    monkeypatch.setattr(images, "RECIPE_VERSION", images.RECIPE_VERSION + 1)
    after = (images.base_key(), images.pause_key("v1.37.2"), images.operator_key(BASE_DIGEST))
    assert all(b != a for b, a in zip(before, after, strict=True))


def test_pause_key_follows_the_kubernetes_version_and_flags() -> None:
    key = images.pause_key("v1.37.2")
    assert key == images.pause_key("v1.37.2")
    assert key != images.pause_key("v1.37.3")
    assert key != images.pause_key("v1.37.2", (*images.PAUSE_CFLAGS, "-g"))


def test_the_image_kinds_never_share_a_key() -> None:
    assert len({images.base_key(), images.pause_key("v1.37.2"), images.operator_key(BASE_DIGEST)}) == 3


def test_operator_key_is_stable_for_an_unchanged_context(context: Path) -> None:
    assert images.operator_key(BASE_DIGEST, context) == images.operator_key(BASE_DIGEST, context)
    assert images.operator_key(BASE_DIGEST, context) == images.operator_key(BASE_DIGEST, REPO_ROOT)


@pytest.mark.parametrize("name", [*images.CONTEXT_FILES, "operators/cli.py"])
def test_operator_key_follows_each_input(context: Path, name: str) -> None:
    before = images.operator_key(BASE_DIGEST, context)
    with open(context / name, "a") as handle:
        handle.write("\n# edited\n")
    assert images.operator_key(BASE_DIGEST, context) != before


def test_operator_key_follows_new_renamed_and_removed_files(context: Path) -> None:
    before = images.operator_key(BASE_DIGEST, context)
    added = context / "operators" / "new_module.py"
    added.write_text("X = 1\n")
    with_added = images.operator_key(BASE_DIGEST, context)
    assert with_added != before
    added.rename(context / "operators" / "renamed_module.py")
    assert images.operator_key(BASE_DIGEST, context) not in (before, with_added)
    (context / "operators" / "renamed_module.py").unlink()
    assert images.operator_key(BASE_DIGEST, context) == before


def test_operator_key_follows_the_base_image(context: Path) -> None:
    other = "sha256:" + "cd" * 32
    assert images.operator_key(BASE_DIGEST, context) != images.operator_key(other, context)


def test_operator_key_ignores_bytecode_and_files_outside_the_context(context: Path) -> None:
    before = images.operator_key(BASE_DIGEST, context)
    cache = context / "operators" / "__pycache__"
    cache.mkdir(exist_ok=True)
    (cache / "cli.cpython-311.pyc").write_bytes(b"\0bytecode")
    (context / "operators" / "stray.pyc").write_bytes(b"\0bytecode")
    (context / "tests").mkdir()
    (context / "tests" / "test_x.py").write_text("def test(): pass\n")
    (context / "Makefile").write_text("all:\n")
    assert images.operator_key(BASE_DIGEST, context) == before


def test_context_files_are_what_the_dockerfile_copies() -> None:
    files = {str(path) for path in images.context_files(REPO_ROOT)}
    assert set(images.CONTEXT_FILES) <= files
    assert "operators/cli.py" in files
    assert not any("__pycache__" in name or name.endswith(".pyc") for name in files)
    copied = set()
    for line in (REPO_ROOT / "Dockerfile").read_text().splitlines():
        if line.startswith("COPY ") and "--from=" not in line:
            copied.update(line.split()[1:-1])
    assert copied == {*images.CONTEXT_FILES, *images.CONTEXT_DIRS} - {"Dockerfile"}


def test_a_missing_context_file_is_a_clear_error(context: Path) -> None:
    (context / "requirements" / "image.txt").unlink()
    with pytest.raises(images.ImageError, match=r"lacks requirements/image\.txt"):
        images.context_files(context)


def test_dockerfile_keeps_a_docker_build_default_base() -> None:
    lines = [line.strip() for line in (REPO_ROOT / "Dockerfile").read_text().splitlines()]
    instructions = [line for line in lines if line and not line.startswith("#")]
    # `docker build .` without --build-arg still has a pullable base.
    assert instructions[0] == "ARG BASE=python:3.11-slim"
    froms = [line for line in instructions if line.startswith("FROM ")]
    assert froms == ["FROM ${BASE} AS build", "FROM ${BASE}"]
    # Debian's own python has no `python` command; python3 works on both bases.
    runs = " ".join(line for line in instructions if line.startswith(("RUN", "&&")))
    assert "python3 -m venv" in runs
    assert not re.search(r"(^|[\s;&])python\s", runs)


def test_canonical_names() -> None:
    assert images.canonical_name(images.OPERATOR_IMAGE) == "docker.io/library/dra-operators:dev"
    assert images.canonical_name(images.BASE_IMAGE) == "docker.io/library/dra-operators-base:bookworm"
    assert images.PAUSE_IMAGE.endswith(f":{images.PAUSE_TAG}")
    # A name that says its registry is stored as it is: the upstream suite's images are.
    for qualified in ("registry.k8s.io/e2e-test-images/busybox:1.37.0-2", "localhost:5000/tools/x:1"):
        assert images.canonical_name(qualified) == qualified
    for bad in ("dra-operators", "registry.k8s.io/busybox", "Dra:dev"):
        with pytest.raises(images.ImageError):
            images.canonical_name(bad)


def test_upstream_pause_tag() -> None:
    makefile = "REGISTRY ?= example.invalid\nIMAGE = $(REGISTRY)/pause\n\nTAG ?= 3.10.2\nREV = x\n"
    assert images.upstream_pause_tag(makefile) == "3.10.2"
    assert images.upstream_pause_tag("all:\n") is None


def test_mmdebstrap_names_no_mirror_unless_told(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("DEVCLUSTER_APT_MIRROR", raising=False)
    cmd = images._mmdebstrap_command(tmp_path / "rootfs.tar")
    assert cmd[-2:] == [images.SUITE, str(tmp_path / "rootfs.tar")]
    assert not any("://" in arg for arg in cmd)
    monkeypatch.setenv("DEVCLUSTER_APT_MIRROR", "/etc/apt/sources.list")
    assert images._mmdebstrap_command(tmp_path / "rootfs.tar")[-1] == "/etc/apt/sources.list"


def _layer_tar(path: Path, name: str, data: bytes) -> Path:
    source = path.with_suffix(".src")
    source.write_bytes(data)
    with tarfile.open(path, "w") as tar:
        tar.add(source, arcname=name)
    return path


def test_an_archive_names_its_image_for_containerd(tmp_path: Path) -> None:
    layer = _layer_tar(tmp_path / "layer.tar", "hello", b"hello\n")
    digest = images.write_layout(tmp_path / "layout", "dra-operators-test:1", [layer], {"Cmd": ["x"]}, "test")
    images.pack_layout(tmp_path / "layout", tmp_path / "image.tar")
    assert images.archive_index(tmp_path / "image.tar") == ("docker.io/library/dra-operators-test:1", digest)
    with tarfile.open(tmp_path / "image.tar") as tar:
        names = tar.getnames()
        assert names[:2] == ["oci-layout", "index.json"]

        def blob(digest: str) -> bytes:
            member = tar.extractfile(f"blobs/sha256/{digest.removeprefix('sha256:')}")
            assert member is not None
            return member.read()

        manifest = json.loads(blob(digest))
        config = json.loads(blob(manifest["config"]["digest"]))
        index_member = tar.extractfile("index.json")
        assert index_member is not None
        index = json.loads(index_member.read())
    assert index["manifests"][0]["annotations"]["org.opencontainers.image.ref.name"] == "1"
    assert manifest["layers"][0]["mediaType"] == "application/vnd.oci.image.layer.v1.tar+gzip"
    assert config["config"] == {"Cmd": ["x"]}
    assert len(config["rootfs"]["diff_ids"]) == 1


def test_a_foreign_archive_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "junk.tar").write_bytes(b"not a tar")
    with pytest.raises(images.ImageError, match="not an OCI archive"):
        images.archive_index(tmp_path / "junk.tar")


def test_reuse_needs_no_tools(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DEVCLUSTER_CACHE_DIR", str(tmp_path))
    entry = images.images_root() / f"base-{images.base_key()}"
    entry.mkdir(parents=True)
    (entry / "image.tar").write_bytes(b"x" * 10)
    record = {"ref": images.BASE_IMAGE, "digest": BASE_DIGEST, "build_seconds": 99.0}
    (entry / "build.json").write_text(json.dumps(record))
    monkeypatch.setattr(images, "_build_base", _fail)
    said: list[str] = []
    result = images.ensure_base(said.append)
    assert result.reused
    assert (result.archive, result.digest, result.size) == (entry / "image.tar", BASE_DIGEST, 10)
    assert images.base_image(said.append) == entry / "image.tar"
    assert said
    assert all(line.startswith("reusing base image") for line in said)


def test_an_incomplete_entry_is_rebuilt_and_old_entries_pruned(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("DEVCLUSTER_CACHE_DIR", str(tmp_path))
    root = images.images_root()
    for index in range(images.KEEP_PER_IMAGE + 1):
        (root / f"pause-old{index}").mkdir(parents=True)
    target = root / f"pause-{images.pause_key('v1.37.2')}"
    target.mkdir()
    (target / "image.tar").write_bytes(b"partial")  # no build.json: never completed

    def build(tmp: Path, version: str, say: images.Say) -> tuple[str, dict[str, object]]:
        (tmp / "image.tar").write_bytes(b"complete")
        (tmp / "scratch").mkdir()
        return "sha256:" + "ef" * 32, {"kubernetes": version}

    monkeypatch.setattr(images, "k8s_version", lambda: "v1.37.2")
    monkeypatch.setattr(images, "_build_pause", build)
    result = images.ensure_pause(lambda line: None)
    assert not result.reused
    assert (target / "image.tar").read_bytes() == b"complete"
    assert sorted(p.name for p in target.iterdir()) == ["build.json", "image.tar"]
    record = json.loads((target / "build.json").read_text())
    assert record["name"] == "docker.io/library/" + images.PAUSE_IMAGE
    assert record["kubernetes"] == "v1.37.2"
    assert len(list(root.glob("pause-*"))) == images.KEEP_PER_IMAGE
    assert not list(root.glob("*.tmp-*"))


def _fail(*args: object) -> tuple[str, dict[str, object]]:
    raise AssertionError("must not build")


FAKE_CTR = """#!{python}
import json, sys, tarfile
from pathlib import Path
state = Path({state!r})
images = json.loads(state.read_text()) if state.exists() else {{}}
args = sys.argv[1:]
with open(state.with_suffix(".calls"), "a") as calls:
    calls.write(" ".join(args) + "\\n")
assert args[:4] == ["--address", {address!r}, "-n", "k8s.io"], args
if args[4:6] == ["images", "ls"]:
    print("REF TYPE DIGEST SIZE PLATFORMS LABELS")
    for name, digest in images.items():
        print(name, "application/vnd.oci.image.manifest.v1+json", digest, "1 MiB", "linux/amd64", "-")
elif args[4:6] == ["images", "import"]:
    with tarfile.open(args[6]) as tar:
        entry = json.load(tar.extractfile("index.json"))["manifests"][0]
    images[entry["annotations"]["io.containerd.image.name"]] = entry["digest"]
    state.write_text(json.dumps(images))
else:
    sys.exit(2)
"""


def _archive(tmp_path: Path, ref: str, content: bytes) -> Path:
    layout = tmp_path / f"layout-{content.hex()}"
    layer = _layer_tar(tmp_path / f"{content.hex()}.tar", "file", content)
    images.write_layout(layout, ref, [layer], {}, "test")
    images.pack_layout(layout, tmp_path / f"{content.hex()}.oci.tar")
    return tmp_path / f"{content.hex()}.oci.tar"


def test_import_images_is_idempotent(tmp_path: Path) -> None:
    ctr = tmp_path / "ctr"
    state = tmp_path / "state.json"
    address = "/run/test/containerd.sock"
    ctr.write_text(FAKE_CTR.format(python=sys.executable, state=str(state), address=address))
    ctr.chmod(0o755)
    first = [_archive(tmp_path, "dra-operators-a:1", b"a"), _archive(tmp_path, "dra-operators-b:1", b"b")]
    said: list[str] = []
    images.import_images(ctr, address, first, said.append)
    imported = json.loads(state.read_text())
    assert set(imported) == {"docker.io/library/dra-operators-a:1", "docker.io/library/dra-operators-b:1"}
    calls = state.with_suffix(".calls")
    assert sum("images import" in line for line in calls.read_text().splitlines()) == 2

    calls.write_text("")
    images.import_images(ctr, address, first, said.append)
    assert "images import" not in calls.read_text()
    assert said[-1].startswith("docker.io/library/dra-operators-b:1 is already in containerd")

    # A rebuilt image under the same name is imported again.
    changed = _archive(tmp_path, "dra-operators-a:1", b"a2")
    images.import_images(ctr, address, [changed], said.append)
    assert (
        json.loads(state.read_text())["docker.io/library/dra-operators-a:1"]
        == images.archive_index(changed)[1]
    )
