package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"sync"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"
)

// healthPollInterval bounds how late a change of the control file is seen.
// Polling rather than inotify: writers replace the file by rename, which
// drops a watch on the file itself, and reading a few hundred bytes this
// often costs nothing beside the kubelet's and the API server's own pace.
const healthPollInterval = 200 * time.Millisecond

// healthResendInterval keeps every device's report fresh: the kubelet
// reports a device as Unknown once its last report is older than the
// device's health check timeout (30 s unless the report says otherwise).
const healthResendInterval = 10 * time.Second

// deviceControl is one entry of the control file: what a test wants the
// driver to claim about one device.
type deviceControl struct {
	Health string                   `json:"health"`
	Taint  *resourceapi.DeviceTaint `json:"taint,omitempty"`
}

// healthControl holds the state read from the control file. A device that is
// not named there is Healthy and untainted, so an absent file leaves the
// driver exactly as it was before health reporting existed.
type healthControl struct {
	path    string
	pool    string
	devices []string

	mu      sync.Mutex
	raw     []byte
	states  map[string]deviceControl
	changed chan struct{} // closed, then replaced, whenever states change
}

func newHealthControl(path, pool string, devices []string) *healthControl {
	return &healthControl{
		path:    path,
		pool:    pool,
		devices: devices,
		states:  map[string]deviceControl{},
		changed: make(chan struct{}),
	}
}

// reload reads the control file and reports whether the state changed. A
// file that does not parse or names an unknown device is refused as a
// whole, and the previous state stays: half of a test's intent is worse
// than none, and the error in the driver's log says what was wrong.
func (h *healthControl) reload() (bool, error) {
	if h.path == "" {
		return false, nil
	}
	raw, err := os.ReadFile(h.path)
	if errors.Is(err, fs.ErrNotExist) {
		raw, err = nil, nil
	}
	if err != nil {
		return false, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if bytes.Equal(raw, h.raw) {
		return false, nil
	}
	states, err := h.parse(raw)
	// Remembered even when refused, so that one bad write is logged once.
	h.raw = raw
	if err != nil {
		return false, fmt.Errorf("%s: %w", h.path, err)
	}
	h.states = states
	close(h.changed)
	h.changed = make(chan struct{})
	return true, nil
}

func (h *healthControl) parse(raw []byte) (map[string]deviceControl, error) {
	states := map[string]deviceControl{}
	if len(bytes.TrimSpace(raw)) == 0 {
		return states, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&states); err != nil {
		return nil, err
	}
	for name, state := range states {
		if !slices.Contains(h.devices, name) {
			return nil, fmt.Errorf("no device %q on this driver", name)
		}
		switch kubeletplugin.HealthStatus(state.Health) {
		case kubeletplugin.HealthStatusHealthy, kubeletplugin.HealthStatusUnhealthy, kubeletplugin.HealthStatusUnknown:
		default:
			return nil, fmt.Errorf("device %s: health %q is not Healthy, Unhealthy or Unknown", name, state.Health)
		}
		if t := state.Taint; t != nil {
			switch t.Effect {
			case resourceapi.DeviceTaintEffectNone, resourceapi.DeviceTaintEffectNoSchedule, resourceapi.DeviceTaintEffectNoExecute:
			default:
				return nil, fmt.Errorf("device %s: taint effect %q is not None, NoSchedule or NoExecute", name, t.Effect)
			}
			if errs := validation.IsQualifiedName(t.Key); len(errs) > 0 {
				return nil, fmt.Errorf("device %s: taint key %q: %v", name, t.Key, errs)
			}
			if t.TimeAdded != nil {
				// The API server stamps it; a value from the file would
				// fight with the one the slice controller keeps.
				return nil, fmt.Errorf("device %s: taint timeAdded is set by the API server", name)
			}
		}
	}
	return states, nil
}

// taints are what the ResourceSlice carries per device; nil when no device
// is tainted, so that the slice stays what it was without the file.
func (h *healthControl) taints() map[string][]resourceapi.DeviceTaint {
	h.mu.Lock()
	defer h.mu.Unlock()
	var taints map[string][]resourceapi.DeviceTaint
	for name, state := range h.states {
		if state.Taint == nil {
			continue
		}
		if taints == nil {
			taints = map[string][]resourceapi.DeviceTaint{}
		}
		taints[name] = []resourceapi.DeviceTaint{*state.Taint}
	}
	return taints
}

// report covers every device, so that the kubelet's view never depends on
// which reports it happened to receive; the channel tells when to send the
// next one.
func (h *healthControl) report() (kubeletplugin.DeviceHealthReport, <-chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := time.Now()
	report := kubeletplugin.DeviceHealthReport{Devices: make([]kubeletplugin.DeviceHealth, 0, len(h.devices))}
	for _, name := range h.devices {
		health := kubeletplugin.HealthStatusHealthy
		if state, ok := h.states[name]; ok {
			health = kubeletplugin.HealthStatus(state.Health)
		}
		report.Devices = append(report.Devices, kubeletplugin.DeviceHealth{
			PoolName:    h.pool,
			DeviceName:  name,
			Health:      health,
			LastUpdated: now,
		})
	}
	return report, h.changed
}

// poll re-reads the control file until ctx ends and calls publish after
// every change, with the taints then in force.
func (h *healthControl) poll(ctx context.Context, publish func(map[string][]resourceapi.DeviceTaint)) {
	logger := klog.FromContext(ctx)
	ticker := time.NewTicker(healthPollInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		changed, err := h.reload()
		if err != nil {
			logger.Error(err, "device health control file refused, keeping the previous state")
			continue
		}
		if changed {
			report, _ := h.report()
			logger.Info("device health changed", "devices", describe(report, h.taints()))
			publish(h.taints())
		}
	}
}

// describe names the devices that are not Healthy or carry a taint, for the
// driver's log.
func describe(report kubeletplugin.DeviceHealthReport, taints map[string][]resourceapi.DeviceTaint) map[string]string {
	out := map[string]string{}
	for _, d := range report.Devices {
		if d.Health == kubeletplugin.HealthStatusHealthy && taints[d.DeviceName] == nil {
			continue
		}
		text := string(d.Health)
		for _, t := range taints[d.DeviceName] {
			text += fmt.Sprintf(", taint %s=%s:%s", t.Key, t.Value, t.Effect)
		}
		out[d.DeviceName] = text
	}
	return out
}

func (d *driver) WatchHealthStatus(ctx context.Context, reports chan<- kubeletplugin.DeviceHealthReport) error {
	logger := klog.FromContext(ctx)
	logger.Info("kubelet watches device health")
	resend := time.NewTimer(healthResendInterval)
	defer resend.Stop()
	for {
		report, changed := d.health.report()
		select {
		case <-ctx.Done():
			return nil
		case reports <- report:
		}
		resend.Reset(healthResendInterval)
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		case <-resend.C:
		}
	}
}
