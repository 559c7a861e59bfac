// Package sandboximage holds the default sandbox image's Dockerfile,
// embedded so that `beige sandbox build` needs nothing but the binary. (The
// sandboxes themselves are internal/sandbox.)
package sandboximage

import _ "embed"

// Dockerfile is sandboximage/Dockerfile.
//
//go:embed Dockerfile
var Dockerfile []byte
