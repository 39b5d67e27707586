"""The README's first command, ``make run`` (``python -m e2e.run``), on the test cluster named by
``KUBECONFIG``: every operator starts and becomes ready, the demo's pods get claims from their
template and run on the real node, printing the device the test driver prepared, and a SIGTERM to
``make run`` stops every operator it started."""

from __future__ import annotations

import functools
import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

from demo import cleanup
from demo.scenarios import Scenario
from devcluster import launcher
from devcluster.constants import REPO_ROOT
from devcluster.kube import Kube, wait_for
from e2e import harness
from operators import OPERATOR_NAMES

WORKLOAD = Scenario(
    "make-run", "make run's workload", ("resourceclaim",), "demo-make-run", (), REPO_ROOT / "e2e"
)
READY_LINE = "The operators keep running; Ctrl-C stops them."
LOGS_LINE = re.compile(r"^operator logs: (\S+)/<name>\.log \(follow them with: tail -f \S+/\*\.log\)$", re.M)
OPERATOR_LINE = re.compile(r"^(\w+): ready, metrics and probes on (http://127\.0\.0\.1:\d+)$", re.M)
CLAIM_ROW = re.compile(r"^resourceclaim\.resource\.k8s\.io/trainer-[01]-gpu-\w+\s+allocated,reserved\s", re.M)
POD_ROW = re.compile(r"^pod/trainer-[01]\s+1/1\s+Running\s.*\sdevcluster-node\s", re.M)
DEVICE_LINE = re.compile(r"^trainer-[01] uses GPU_DEVICE_0=gpu-\d+$", re.M)


def _ready(url: str) -> bool:
    return launcher.http_get(f"{url}/readyz", timeout=2)[0] == 200


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                status = (entry / "status").read_text()
            except OSError:
                continue
            if re.search(rf"^PPid:\s+{pid}$", status, re.M):
                found.append(int(entry.name))
    return found


def test_make_run_starts_the_operators_and_the_demo_and_stops_them(
    cluster: harness.Cluster, api: Kube
) -> None:
    cleanup.clean(api, WORKLOAD)
    path = os.pathsep.join([str(Path(cluster.kubectl_path).parent), os.environ.get("PATH", "")])
    env = {**os.environ, "KUBECONFIG": cluster.kubeconfig, "PATH": path}
    proc = subprocess.Popen(
        [sys.executable, "-m", "e2e.run"],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[str] = []
    assert proc.stdout is not None
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout or ()), daemon=True)
    reader.start()
    operator_pids: list[int] = []
    try:
        wait_for(lambda: READY_LINE in "".join(lines) or proc.poll() is not None, 180, "make run to settle")
        output = "".join(lines)
        assert proc.poll() is None, f"make run exited with {proc.returncode}:\n{output[-4000:]}"

        started = dict(OPERATOR_LINE.findall(output))
        assert sorted(started) == sorted(OPERATOR_NAMES), output[-4000:]
        logs = LOGS_LINE.search(output)
        assert logs, output[-4000:]
        # The terminal shows status lines and the demo; the operators' logs went to their files.
        log_dir = Path(logs.group(1))
        for name in OPERATOR_NAMES:
            log_file = log_dir if log_dir.is_absolute() else REPO_ROOT / log_dir
            assert (log_file / f"{name}.log").stat().st_size > 0, f"{name} logged nothing to {log_file}"
        demo = output.split("$ kubectl get resourceclaims,pods -n demo-make-run -o wide", 1)[1]
        assert len(CLAIM_ROW.findall(demo)) == 2, demo
        assert len(POD_ROW.findall(demo)) == 2, demo
        assert len(DEVICE_LINE.findall(demo)) == 2, demo
        for name, url in started.items():
            wait_for(functools.partial(_ready, url), 60, f"{name} to be ready at {url}/readyz")

        operator_pids = _children(proc.pid)
        assert len(operator_pids) == len(OPERATOR_NAMES), operator_pids
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0, "".join(lines)[-4000:]
        assert not [pid for pid in operator_pids if launcher.process_alive(pid)]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        for pid in operator_pids:
            if launcher.process_alive(pid):
                os.kill(pid, signal.SIGKILL)
        reader.join(10)
        proc.stdout.close()
        cleanup.clean(api, WORKLOAD, wait=False)
