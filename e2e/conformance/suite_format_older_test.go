//go:build dra_older_module

// Before 1.37 the package registering the suite's YAML formatting of objects had this path.
package conformance

import _ "k8s.io/kubernetes/test/utils/format"
