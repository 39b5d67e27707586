"""e2e tests of the kubectl dra plugin against the real control plane."""
