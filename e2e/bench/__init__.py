"""``make bench``: our operators against the upstream Go controllers, on the same workload, in
one run. Not a test: it prints ratios and peak RSS, and writes ``bench-results/results.json``.

Each benchmark starts a devcluster in upstream mode (the in-tree controller does the work),
measures, stops it, then starts one in default mode with our operator and repeats the same
workload. Client limits are set per tier: (a) kube-controller-manager's defaults, 20 QPS /
30 burst, with our operator given the same token bucket; (b) unthrottled.
"""
