package docker_test

import (
	"context"
	"testing"

	"github.com/beige-dev/beige/internal/sandbox/docker"
	"github.com/beige-dev/beige/internal/sandbox/docker/dockertest"
)

// TestEngineVersionAndHasImage: what beige doctor asks the engine.
func TestEngineVersionAndHasImage(t *testing.T) {
	img := dockertest.Image(t)
	rt := dockertest.NewRuntime(t, docker.Options{})
	ctx := context.Background()
	v, api, err := rt.EngineVersion(ctx)
	if err != nil || v == "" || api == "" {
		t.Fatalf("EngineVersion = %q, %q, %v", v, api, err)
	}
	if ok, err := rt.HasImage(ctx, img); !ok || err != nil {
		t.Errorf("HasImage(%s) = %v, %v; want true", img, ok, err)
	}
	if ok, err := rt.HasImage(ctx, "beige-no-such-image:"+dockertest.Suffix()); ok || err != nil {
		t.Errorf("HasImage(missing) = %v, %v; want false, nil", ok, err)
	}
}
