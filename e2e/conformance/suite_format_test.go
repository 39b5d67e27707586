//go:build !dra_older_module

// Upstream's e2e_test.go registers the suite's YAML formatting of objects; 1.37 moved the package.
package conformance

import _ "k8s.io/kubernetes/test/utils/ktesting/format"
