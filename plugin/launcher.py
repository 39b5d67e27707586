#!/usr/bin/env python3
"""``kubectl-dra`` as krew installs it: this script beside the kubectl_dra wheel.

The plugin's dependencies (pydantic-core, aiohttp, google-re2 through cel-python) are compiled per
platform and Python version, so one archive cannot carry them for every machine krew serves. The
first run installs the wheel into a virtualenv beside this script with the user's ``python3`` and
pip, which pick the right builds; later runs go straight to it. ``kubectl krew uninstall dra``
removes the directory, virtualenv included.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

# krew links ~/.krew/bin/kubectl-dra to this file in its store; the wheel is beside the target.
HERE = Path(__file__).resolve().parent
ENV = HERE / "venv"
# Written last: a first run that was interrupted leaves no marker and is redone from scratch.
READY = ENV / ".kubectl-dra-ready"


def install() -> None:
    wheels = sorted(HERE.glob("kubectl_dra-*.whl"))
    if len(wheels) != 1:
        sys.exit(f"kubectl-dra: expected one kubectl_dra wheel in {HERE}, found {len(wheels)}")
    print(f"kubectl-dra: first run, installing {wheels[0].name} into {ENV}", file=sys.stderr)
    shutil.rmtree(ENV, ignore_errors=True)
    venv.create(ENV, with_pip=True)
    pip = [str(ENV / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    if subprocess.run([*pip, str(wheels[0])], check=False).returncode != 0:
        shutil.rmtree(ENV, ignore_errors=True)
        sys.exit("kubectl-dra: pip could not install the plugin (see above); the next run tries again")
    READY.touch()


def main() -> None:
    # The user's python3, not the project's: it may well be older.
    if sys.version_info < (3, 11):  # noqa: UP036
        sys.exit(f"kubectl-dra needs Python 3.11 or newer as python3; this is {sys.version.split()[0]}")
    if not READY.exists():
        install()
    plugin = ENV / "bin" / "kubectl-dra"
    os.execv(plugin, [str(plugin), *sys.argv[1:]])


if __name__ == "__main__":
    main()
