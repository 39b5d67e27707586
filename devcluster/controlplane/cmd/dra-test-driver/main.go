// Command dra-test-driver is a DRA driver with fake GPUs for the devcluster's
// real node. It publishes the devices in a ResourceSlice and hands allocated
// ones to containers as CDI environment variables, so that tests can observe
// which devices a pod received without any hardware.
package main

import (
	"context"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"syscall"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/klog/v2"
)

type config struct {
	kubeconfig  string
	nodeName    string
	driverName  string
	devices     int
	kubeletRoot string
	cdiDir      string
	healthFile  string
}

// cdiVendorRE is the CDI vendor syntax; the driver name doubles as the
// vendor, so a name the runtime would reject must fail at startup rather
// than at the first pod.
var cdiVendorRE = regexp.MustCompile(`^[A-Za-z]([A-Za-z0-9._-]*[A-Za-z0-9])?$`)

// maxSocketPath is what fits into sockaddr_un.sun_path with its NUL;
// longer paths fail in bind with an unhelpful EINVAL.
const maxSocketPath = 107

func main() {
	klog.InitFlags(nil)
	var cfg config
	flag.StringVar(&cfg.kubeconfig, "kubeconfig", "", "path to a kubeconfig file; empty means in-cluster configuration")
	flag.StringVar(&cfg.nodeName, "node-name", "", "name of the Node this driver runs on; also the pool name (required)")
	flag.StringVar(&cfg.driverName, "driver-name", "gpu.dra-operators.test", "DRA driver name, also used as CDI vendor")
	flag.IntVar(&cfg.devices, "devices", 4, "number of devices gpu-0..gpu-N-1 to publish")
	flag.StringVar(&cfg.kubeletRoot, "kubelet-root", "/var/lib/kubelet", "the kubelet's --root-dir")
	flag.StringVar(&cfg.cdiDir, "cdi-dir", "/var/run/cdi", "directory for CDI spec files; the container runtime must read it")
	flag.StringVar(&cfg.healthFile, "health-file", "", "JSON file of device health and taints, re-read while running; absent or empty: every device Healthy and untainted")
	flag.Parse()

	if err := run(cfg); err != nil {
		klog.ErrorS(err, "dra-test-driver failed")
		klog.Flush()
		os.Exit(1)
	}
	klog.Flush()
}

func run(cfg config) error {
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %q", flag.Args())
	}
	if cfg.nodeName == "" {
		return errors.New("--node-name is required")
	}
	if !cdiVendorRE.MatchString(cfg.driverName) {
		return fmt.Errorf("--driver-name %q is not usable as CDI vendor", cfg.driverName)
	}
	if cfg.devices < 0 || cfg.devices > resourceapi.ResourceSliceMaxDevices {
		return fmt.Errorf("--devices must be between 0 and %d", resourceapi.ResourceSliceMaxDevices)
	}

	pluginDir := filepath.Join(cfg.kubeletRoot, "plugins", cfg.driverName)
	registryDir := filepath.Join(cfg.kubeletRoot, "plugins_registry")
	for _, socket := range []string{
		filepath.Join(pluginDir, "dra.sock"),
		filepath.Join(registryDir, cfg.driverName+"-reg.sock"),
	} {
		if len(socket) > maxSocketPath {
			return fmt.Errorf("socket path %s is longer than %d bytes", socket, maxSocketPath)
		}
	}
	// The driver may start before the kubelet; the kubelet also picks up
	// registration sockets that already exist when it starts.
	for _, dir := range []string{pluginDir, registryDir, cfg.cdiDir} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}

	restConfig, err := clientcmd.BuildConfigFromFlags("", cfg.kubeconfig)
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w", err)
	}
	client, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return fmt.Errorf("create client: %w", err)
	}

	sigCtx, stopSignals := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stopSignals()
	ctx, fail := context.WithCancelCause(sigCtx)
	defer fail(nil)

	health := newHealthControl(cfg.healthFile, cfg.nodeName, deviceNames(cfg.devices))
	// A restarted driver publishes the taints already asked for, rather than
	// an untainted slice first.
	if _, err := health.reload(); err != nil {
		klog.ErrorS(err, "device health control file refused, every device starts Healthy")
	}
	d := &driver{name: cfg.driverName, pool: cfg.nodeName, cdiDir: cfg.cdiDir, fail: fail, health: health}
	helper, err := kubeletplugin.Start(ctx, d,
		kubeletplugin.DriverName(cfg.driverName),
		kubeletplugin.NodeName(cfg.nodeName),
		kubeletplugin.KubeClient(client),
		kubeletplugin.PluginDataDirectoryPath(pluginDir),
		kubeletplugin.RegistrarDirectoryPath(registryDir),
		// The kubelet subscribes to the device health stream when the
		// plugin registers and fills the pods' allocatedResourcesStatus
		// from it.
		kubeletplugin.HealthService(true),
	)
	if err != nil {
		return fmt.Errorf("start kubelet plugin: %w", err)
	}
	klog.InfoS("driver started", "driver", cfg.driverName, "node", cfg.nodeName, "devices", cfg.devices,
		"pluginDir", pluginDir, "registryDir", registryDir, "cdiDir", cfg.cdiDir, "healthFile", cfg.healthFile)

	// PublishResources waits until it can list ResourceSlices, so an
	// unreachable API server keeps us here until a signal arrives.
	err = helper.PublishResources(ctx, driverResources(cfg.nodeName, cfg.devices, health.taints()))
	if err == nil {
		if cfg.healthFile != "" {
			go health.poll(ctx, func(taints map[string][]resourceapi.DeviceTaint) {
				// Later calls only hand the slice controller its new
				// target; they return at once and fail only without a
				// node name, which was checked above.
				if err := helper.PublishResources(ctx, driverResources(cfg.nodeName, cfg.devices, taints)); err != nil {
					fail(fmt.Errorf("republish resources: %w", err))
				}
			})
		}
		<-ctx.Done()
	}
	// A second signal during a stuck shutdown should kill the process.
	stopSignals()
	helper.Stop()
	if sigCtx.Err() != nil {
		klog.InfoS("driver stopped")
		return nil
	}
	if err != nil {
		return fmt.Errorf("publish resources: %w", err)
	}
	return context.Cause(ctx)
}

func deviceNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("gpu-%d", i)
	}
	return names
}

// driverResources is the driver's one slice; taints holds the devices'
// taints by device name.
func driverResources(nodeName string, n int, taints map[string][]resourceapi.DeviceTaint) resourceslice.DriverResources {
	devices := make([]resourceapi.Device, n)
	for i, name := range deviceNames(n) {
		devices[i] = resourceapi.Device{
			Name:   name,
			Taints: taints[name],
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				"index": {IntValue: new(int64(i))},
				"model": {StringValue: new("dra-test-gpu")},
				"uuid":  {StringValue: new(deviceUUID(nodeName, i))},
			},
			Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
				"memory": {Value: resource.MustParse("16Gi")},
			},
		}
	}
	return resourceslice.DriverResources{
		Pools: map[string]resourceslice.Pool{
			nodeName: {Slices: []resourceslice.Slice{{Devices: devices}}},
		},
	}
}

// deviceUUID derives a stable UUID so that a restarted driver, or a test
// computing the value independently, sees the same identity for a device.
// It is marked as RFC 9562 version 8 because it is a custom hash.
func deviceUUID(nodeName string, index int) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%s/%d", nodeName, index))
	b := sum[:16]
	b[6] = b[6]&0x0f | 0x80
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
