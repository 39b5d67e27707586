package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"
)

const (
	// Device names begin with the claim UID, which may start with a digit;
	// CDI allows that from 0.5.0 on.
	cdiVersion = "0.6.0"
	cdiClass   = "gpu"
)

// The CDI spec subset this driver writes: environment variables only.
type cdiSpec struct {
	Version        string      `json:"cdiVersion"`
	Kind           string      `json:"kind"`
	Devices        []cdiDevice `json:"devices"`
	ContainerEdits cdiEdits    `json:"containerEdits"`
}

type cdiDevice struct {
	Name           string   `json:"name"`
	ContainerEdits cdiEdits `json:"containerEdits"`
}

type cdiEdits struct {
	Env []string `json:"env,omitempty"`
}

// driver keeps no claim state: a claim is prepared exactly when its CDI spec
// file exists, so restarts and repeated kubelet calls need no bookkeeping.
// Device health likewise lives in the control file, not in the process.
type driver struct {
	name   string
	pool   string
	cdiDir string
	fail   context.CancelCauseFunc
	health *healthControl
}

var _ kubeletplugin.DRAPlugin = (*driver)(nil)

func (d *driver) cdiKind() string { return d.name + "/" + cdiClass }

// specPath is per driver name as well as per claim so that two instances
// with different names can share one CDI directory and even one claim.
func (d *driver) specPath(claimUID types.UID) string {
	return filepath.Join(d.cdiDir, d.name+"-"+string(claimUID)+".json")
}

func (d *driver) PrepareResourceClaims(ctx context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	logger := klog.FromContext(ctx)
	results := make(map[types.UID]kubeletplugin.PrepareResult, len(claims))
	for _, claim := range claims {
		devices, err := d.prepare(claim)
		if err != nil {
			logger.Error(err, "prepare failed", "claim", klog.KObj(claim), "uid", claim.UID)
			results[claim.UID] = kubeletplugin.PrepareResult{Err: err}
			continue
		}
		names := make([]string, len(devices))
		for i, dev := range devices {
			names[i] = dev.DeviceName
		}
		logger.Info(fmt.Sprintf("prepared claim %s/%s (%s) devices %s",
			claim.Namespace, claim.Name, claim.UID, strings.Join(names, ",")))
		results[claim.UID] = kubeletplugin.PrepareResult{Devices: devices}
	}
	return results, nil
}

// prepare derives everything from the allocation, which is immutable while
// the claim is reserved, so a repeated call yields the same spec and result.
func (d *driver) prepare(claim *resourceapi.ResourceClaim) ([]kubeletplugin.Device, error) {
	spec := cdiSpec{
		Version: cdiVersion,
		Kind:    d.cdiKind(),
		ContainerEdits: cdiEdits{
			Env: []string{"DRA_TEST_CLAIM=" + claim.Namespace + "/" + claim.Name},
		},
	}
	var devices []kubeletplugin.Device
	for _, r := range claim.Status.Allocation.Devices.Results {
		if r.Driver != d.name || r.Pool != d.pool {
			continue
		}
		// The claim UID keeps CDI names unique across claims, which the
		// runtime's spec cache relies on.
		cdiName := string(claim.UID) + "-" + r.Device
		spec.Devices = append(spec.Devices, cdiDevice{
			Name: cdiName,
			ContainerEdits: cdiEdits{
				Env: []string{fmt.Sprintf("GPU_DEVICE_%d=%s", len(devices), r.Device)},
			},
		})
		devices = append(devices, kubeletplugin.Device{
			Requests:     []string{r.Request},
			PoolName:     r.Pool,
			DeviceName:   r.Device,
			CDIDeviceIDs: []string{d.cdiKind() + "=" + cdiName},
			ShareID:      r.ShareID,
		})
	}
	if len(devices) == 0 {
		// CDI rejects specs without devices, and there is nothing to inject.
		return nil, nil
	}
	data, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := writeFileAtomic(d.specPath(claim.UID), data); err != nil {
		return nil, fmt.Errorf("write CDI spec: %w", err)
	}
	return devices, nil
}

func (d *driver) UnprepareResourceClaims(ctx context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	logger := klog.FromContext(ctx)
	results := make(map[types.UID]error, len(claims))
	for _, claim := range claims {
		err := os.Remove(d.specPath(claim.UID))
		if errors.Is(err, fs.ErrNotExist) {
			err = nil
		}
		if err != nil {
			logger.Error(err, "unprepare failed", "claim", claim.NamespacedName, "uid", claim.UID)
		} else {
			logger.Info(fmt.Sprintf("unprepared claim %s (%s)", claim.NamespacedName, claim.UID))
		}
		results[claim.UID] = err
	}
	return results, nil
}

func (d *driver) HandleError(ctx context.Context, err error, msg string) {
	utilruntime.HandleErrorWithContext(ctx, err, msg)
	if !errors.Is(err, kubeletplugin.ErrRecoverable) {
		d.fail(fmt.Errorf("%s: %w", msg, err))
	}
}

// writeFileAtomic makes sure the runtime never reads a partial spec. Identical
// content is left alone so that repeated prepares don't make the runtime
// reload its CDI cache.
func writeFileAtomic(path string, data []byte) (err error) {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
		return nil
	}
	// The temporary name must not end in .json, or the CDI cache would try
	// to load it.
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = os.Remove(f.Name())
		}
	}()
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(0o644)
	}
	if err == nil {
		err = f.Sync()
	}
	if closeErr := f.Close(); err == nil {
		err = closeErr
	}
	if err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
