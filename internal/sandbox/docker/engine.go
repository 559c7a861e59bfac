package docker

import (
	"context"
	"errors"
	"fmt"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
)

// versioner is the SDK call EngineVersion makes (the real client has it;
// the tests' fakes need not).
type versioner interface {
	ServerVersion(ctx context.Context, options client.ServerVersionOptions) (client.ServerVersionResult, error)
}

// EngineVersion is the engine's version and the highest API version it
// serves (for beige doctor).
func (d *Runtime) EngineVersion(ctx context.Context) (version, api string, err error) {
	if err := d.Ping(ctx); err != nil {
		return "", "", err
	}
	v, ok := d.api.(versioner)
	if !ok {
		return "", "", errors.New("docker engine: version not available")
	}
	res, err := v.ServerVersion(ctx, client.ServerVersionOptions{})
	if err != nil {
		return "", "", fmt.Errorf("docker engine version: %w", err)
	}
	return res.Version, res.APIVersion, nil
}

// HasImage reports whether the engine holds image (by name or ID).
func (d *Runtime) HasImage(ctx context.Context, image string) (bool, error) {
	_, err := d.api.ImageInspect(ctx, image)
	if cerrdefs.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("inspect image %s: %w", image, err)
	}
	return true, nil
}
