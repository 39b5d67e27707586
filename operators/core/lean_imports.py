"""Import kubernetes-asyncio's generated client lazily.

``kubernetes_asyncio.client`` eagerly imports ~900 generated API and model classes (~30 MiB
per process), and kopf imports it as soon as it is installed. The operators use only the
credential loading, the aiohttp session and the Lease lock of the library, so the packages
whose ``__init__`` is nothing but re-exports are replaced by modules that import each name
on first use. Submodules still load from the installed files: behaviour is the library's own.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys
import types
from pathlib import Path
from typing import Any

# The re-exporting packages; their __init__ files consist of import lines only.
LAZY_PACKAGES = (
    "kubernetes_asyncio",
    "kubernetes_asyncio.client",
    "kubernetes_asyncio.client.api",
    "kubernetes_asyncio.client.models",
)
_REEXPORT = re.compile(r"^(?:from (\S+) import (\w+)|import (\S+) as (\w+))\s*$", re.MULTILINE)


def reexports(init_source: str) -> dict[str, tuple[str, str | None]]:
    """``name -> (module, attribute)``; attribute None means the name is the module itself."""
    found: dict[str, tuple[str, str | None]] = {}
    for module, attribute, whole_module, alias in _REEXPORT.findall(init_source):
        if module:
            found[attribute] = (module, attribute)
        else:
            found[alias] = (whole_module, None)
    return found


def _lazy_package(name: str, directory: Path) -> types.ModuleType:
    init = directory / "__init__.py"
    names = reexports(init.read_text(encoding="utf-8"))
    package = types.ModuleType(name)
    package.__file__ = str(init)
    package.__path__ = [str(directory)]
    package.__spec__ = importlib.util.spec_from_file_location(
        name, init, submodule_search_locations=[str(directory)]
    )
    package.__all__ = sorted(names)  # type: ignore[attr-defined]

    def __getattr__(attribute: str) -> Any:
        try:
            module_name, inner = names[attribute]
        except KeyError:
            raise AttributeError(f"module {name!r} has no attribute {attribute!r}") from None
        module = importlib.import_module(module_name)
        value = module if inner is None else getattr(module, inner)
        setattr(package, attribute, value)
        return value

    package.__getattr__ = __getattr__  # type: ignore[method-assign]
    return package


def install() -> None:
    """Idempotent; does nothing once the real package has been imported."""
    if any(name in sys.modules for name in LAZY_PACKAGES):
        return
    spec = importlib.util.find_spec("kubernetes_asyncio")
    if spec is None or not spec.submodule_search_locations:
        return
    root = Path(next(iter(spec.submodule_search_locations)))
    for name in LAZY_PACKAGES:
        relative = name.split(".")[1:]
        package = _lazy_package(name, root.joinpath(*relative))
        sys.modules[name] = package
        parent, _, child = name.rpartition(".")
        if parent:
            setattr(sys.modules[parent], child, package)
