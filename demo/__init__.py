"""The demo scenarios: one folder per feature, each a README plus numbered manifests.

The folders are the documentation, the walk-through (``python -m demo``, ``make demo``) and the
e2e tests (``e2e/product/test_demo.py``) at once: all three apply the very same files in the same order,
so what the READMEs say is what the tests check.

Modules:

* :mod:`.fakedriver`: ``python -m demo.fakedriver apply|delete <folder>``, the stand-in for a DRA
  driver: it creates the folder's fake Nodes (with status, which ``kubectl apply`` cannot set)
  and applies its ResourceSlices and DeviceClasses;
* :mod:`.scenarios`: the six scenarios as data: the commands of each step, in order, as a user
  types them;
* :mod:`.player`: runs a scenario's commands and records their real output;
* :mod:`.cleanup`: removes what a scenario created, on a cluster without kubelets;
* :mod:`.transcripts`: the transcript blocks of the READMEs (written from a real run);
* :mod:`.walkthrough`: ``python -m demo``: control plane, CRDs, operators, then every scenario.
"""
