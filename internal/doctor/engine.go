package doctor

import (
	"context"
	"fmt"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
)

// DockerEngine is the Docker engine the environment names (DOCKER_HOST),
// asked through the Engine API.
type DockerEngine struct{ c *client.Client }

var _ Engine = (*DockerEngine)(nil)

// NewDockerEngine connects to the engine of the environment; it does not
// contact it yet.
func NewDockerEngine() (*DockerEngine, error) {
	c, err := client.New(client.FromEnv)
	if err != nil {
		return nil, fmt.Errorf("docker client: %w", err)
	}
	return &DockerEngine{c: c}, nil
}

// Close drops the connection.
func (d *DockerEngine) Close() error { return d.c.Close() }

// Version implements Engine.
func (d *DockerEngine) Version(ctx context.Context) (string, string, error) {
	if _, err := d.c.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		return "", "", err
	}
	v, err := d.c.ServerVersion(ctx, client.ServerVersionOptions{})
	if err != nil {
		return "", "", fmt.Errorf("engine version: %w", err)
	}
	return v.Version, v.APIVersion, nil
}

// HasImage implements Engine.
func (d *DockerEngine) HasImage(ctx context.Context, image string) (bool, error) {
	_, err := d.c.ImageInspect(ctx, image)
	if cerrdefs.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("inspect image %s: %w", image, err)
	}
	return true, nil
}
